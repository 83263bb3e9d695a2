package window

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFirstGoal(t *testing.T) {
	long := strings.Repeat("目", 500) + strings.Repeat("标", 500)
	cases := []struct {
		name string
		msgs []item
		want string
	}{
		{"first real user message", []item{{Message: Message{Role: RoleSystem, Content: "s"}},
			{Message: Message{Role: RoleUser, Content: MarkerZH + "\nold summary"}}, {Message: Message{Role: RoleUser, Content: "  "}},
			{Message: Message{Role: RoleAssistant, Content: "a"}}, {Message: Message{Role: RoleUser, Content: " 帮我迁移数据库 "}},
			{Message: Message{Role: RoleUser, Content: "later"}}}, "帮我迁移数据库"},
		{"none", []item{{Message: Message{Role: RoleAssistant, Content: "a"}}}, ""},
		{"long: head and tail", []item{{Message: Message{Role: RoleUser, Content: long}}},
			strings.Repeat("目", goalHead) + "\n…[450]…\n" + strings.Repeat("标", goalTail)},
	}
	for _, c := range cases {
		if got := firstGoal(c.msgs); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if n := utf8.RuneCountInString(firstGoal(cases[2].msgs)); n > maxGoalRunes+20 {
		t.Errorf("anchor of a long message is %d characters", n)
	}
	if got := summaryContent("en", summaryEntry{Text: "s", Goal: "g"}); got != MarkerEN+"\ns\n\n[Original goal]\ng" {
		t.Errorf("summary content %q", got)
	}
	if got := summaryContent("zh", summaryEntry{Text: "s"}); got != MarkerZH+"\ns" {
		t.Errorf("summary content without a goal %q", got)
	}
}
