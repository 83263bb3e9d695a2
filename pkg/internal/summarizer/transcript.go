package summarizer

import (
	"strings"
	"unicode/utf8"

	"github.com/matememory/matememory/pkg/internal/promptsafe"
	"github.com/matememory/matememory/pkg/internal/store"
)

// MaxMessageRunes is the spec's per-message limit in the transcript.
const MaxMessageRunes = 2000

// labels of the transcript in an agent's language.
type labels struct {
	user, assistant, conversation, truncated string
}

func labelsFor(language string) labels {
	if language == "en" {
		return labels{user: "User", assistant: "Assistant", conversation: "Conversation", truncated: "... [truncated]"}
	}
	return labels{user: "用户", assistant: "助手", conversation: "对话", truncated: "... [截断]"}
}

// inTranscript reports whether a message belongs in the transcript: user and assistant
// messages only (tool and system messages are skipped, as the spec says), and only those
// with content (an assistant turn that only made tool calls is skipped, as MateClaw skips
// blank messages, rather than rendered as an empty "助手: " line).
func inTranscript(m store.Message) bool {
	return (m.Role == "user" || m.Role == "assistant") && strings.TrimSpace(m.Content) != ""
}

// truncateRunes cuts s to max characters (runes, not bytes) and appends marker when cut.
func truncateRunes(s string, max int, marker string) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max]) + marker
}

// Transcript renders messages (already filtered and bounded) grouped by conversation, in
// the order given: a "### 对话 <id>" header per conversation when there are several, then
// one "用户: ..." / "助手: ..." entry per message.
func Transcript(language string, msgs []store.Message) string {
	l := labelsFor(language)
	kept := make([]store.Message, 0, len(msgs))
	convs := map[string]bool{}
	for _, m := range msgs {
		if inTranscript(m) {
			kept = append(kept, m)
			convs[m.ConversationID] = true
		}
	}
	var b strings.Builder
	cur := ""
	for i, m := range kept {
		if len(convs) > 1 && (i == 0 || m.ConversationID != cur) {
			if i > 0 {
				b.WriteString("\n")
			}
			b.WriteString("### " + l.conversation + " " + strings.Join(strings.Fields(m.ConversationID), " ") + "\n")
		}
		cur = m.ConversationID
		label := l.user
		if m.Role == "assistant" {
			label = l.assistant
		}
		// Continuation lines are indented: no line of a message starts at the margin where
		// the labels are, so "\nAssistant: ..." inside a message is not another turn.
		b.WriteString(label + ": " + promptsafe.Indent(truncateRunes(strings.TrimSpace(m.Content), MaxMessageRunes, l.truncated), "  ") + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}
