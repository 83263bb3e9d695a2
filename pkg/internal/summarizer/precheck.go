package summarizer

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/matememory/matememory/pkg/event"
)

// preCheck is the spec's pre-check of an event, plus MateClaw's later gate on the turn's
// outcome: it says why the event is not extracted (skip) or that it may be. err is a
// transient failure (reading the stored user message).
func (s *Service) preCheck(ctx context.Context, ev *event.ConversationCompletedEvent) (reason string, skip bool, err error) {
	m := s.set.Memory
	switch {
	case !m.AutoSummarizeEnabled:
		return "auto-summarize-enabled is false", true, nil
	case m.SkipCronConversations && ev.TriggerSource == event.TriggerCron:
		return "triggered by a cron job and skip-cron-conversations is true", true, nil
	case ev.MessageCount < m.MinMessagesForSummarize:
		return fmt.Sprintf("messageCount %d is below min-messages-for-summarize %d", ev.MessageCount, m.MinMessagesForSummarize), true, nil
	}
	if reason, skip := turnGate(ev); skip {
		return reason, true, nil
	}
	if ev.UserMessage == "" {
		// The spec's listener checks the length only when the event carries the message
		// (MateClaw: userMessage != null): an event without one (absent, null or empty; a
		// tool-only turn) skips the check.
		return "", false, nil
	}
	if n := utf8.RuneCountInString(strings.TrimSpace(ev.UserMessage)); n < m.MinUserMessageLength {
		return fmt.Sprintf("the last user message has %d characters; min-user-message-length is %d", n, m.MinUserMessageLength), true, nil
	}
	return "", false, nil
}

// durableFinish are the finish reasons whose turns are extracted (MateClaw's gate: every
// other reason, e.g. max_iterations_reached, error_fallback, incomplete, stopped, is not).
var durableFinish = map[string]bool{"": true, "normal": true, "return_direct": true}

// errorReplies are the texts MateClaw's chat layer puts in an assistant reply that is an
// error surface rather than an answer ("[错误] 认证失败: Invalid API Key"), and its markers of
// an incomplete or unsupported answer.
var errorReplies = []string{"LLM 调用失败:", "LLM 调用超时", "LLM 调用被中断", "Prompt 过长:", "认证失败:",
	"LLM 返回空响应", "Bad request:", "[证据不足]", "failed to generate a response", "error_fallback"}

// turnGate keeps turns that did not end in a real answer out of memory: an error, a stop,
// an incomplete answer, or an error message in place of the reply.
func turnGate(ev *event.ConversationCompletedEvent) (string, bool) {
	if st := strings.ToLower(ev.TurnStatus); st != "" && st != event.TurnCompleted {
		return fmt.Sprintf("the turn ended with turnStatus %q, not completed; only completed turns are extracted", ev.TurnStatus), true
	}
	if fr := strings.ToLower(ev.FinishReason); !durableFinish[fr] {
		return fmt.Sprintf("the turn's finishReason %q is not durable memory input (only normal and return_direct are)", ev.FinishReason), true
	}
	reply := strings.TrimSpace(ev.AssistantReply)
	if strings.HasPrefix(reply, "[错误]") || strings.HasPrefix(reply, "[Error]") {
		return fmt.Sprintf("the assistant reply is an error message (%q), not an answer", truncateRunes(reply, 80, "…")), true
	}
	for _, marker := range errorReplies {
		if strings.Contains(reply, marker) {
			return fmt.Sprintf("the assistant reply is an error or incomplete answer (contains %q)", marker), true
		}
	}
	return "", false
}
