package window

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The original-goal anchor (MateClaw's first-user anchor): the summary message ends with the
// conversation's first real user message, so a long task compacted many times still shows
// what was asked at the start. It stays inside the summary's user message (never a system
// message) and is cached with the summary.
const (
	goalLabelZH = "[原始目标]"
	goalLabelEN = "[Original goal]"
	// maxGoalRunes bounds the anchor: a longer first message keeps its head and tail.
	maxGoalRunes = 600
	goalHead     = 450
	goalTail     = 100
)

func goalLabel(lang string) string {
	if lang == "en" {
		return goalLabelEN
	}
	return goalLabelZH
}

// firstGoal is the first user message of msgs that is not blank and not an injected summary,
// bounded to maxGoalRunes (head and tail kept).
func firstGoal(msgs []item) string {
	for _, m := range msgs {
		if m.Role != RoleUser {
			continue
		}
		text := strings.TrimSpace(m.Content)
		if text == "" || strings.HasPrefix(text, MarkerZH) || strings.HasPrefix(text, MarkerEN) {
			continue
		}
		n := utf8.RuneCountInString(text)
		if n <= maxGoalRunes {
			return text
		}
		r := []rune(text)
		return string(r[:goalHead]) + fmt.Sprintf("\n…[%d]…\n", n-goalHead-goalTail) + string(r[n-goalTail:])
	}
	return ""
}

// goalOf is the goal a summary folding msgs into prev carries: prev's, or, for the first
// summary of a conversation read from its start, the first user message of msgs.
func (a *assembly) goalOf(prev summaryEntry, from int, msgs []item) string {
	if prev.Goal != "" || prev.Covers > 0 || a.offset+from > 0 {
		return prev.Goal
	}
	return firstGoal(msgs)
}

// summaryContent is the summary message's content: the marker, the summary, and the
// original-goal anchor when there is one.
func summaryContent(lang string, e summaryEntry) string {
	s := Marker(lang) + "\n" + e.Text
	if e.Goal != "" {
		s += "\n\n" + goalLabel(lang) + "\n" + e.Goal
	}
	return s
}
