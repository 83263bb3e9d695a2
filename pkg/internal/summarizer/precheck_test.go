package summarizer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// TestPreCheckConformance: MateClaw's behaviour on the event's fields. Only a userMessage
// the event carries is length-checked (none: no check); any triggerSource is accepted and only
// cron is skipped; turns that ended in an error, a stop or an incomplete answer are not
// extracted, with the reason in the ledger.
func TestPreCheckConformance(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		h := newHarness(t, db) // offline provider: an extraction completes without an LLM
		h.worker(h.service("w1"))
		cases := []struct {
			name   string
			agent  int64
			short  bool // the conversation's last user message is short
			mut    func(e *event.ConversationCompletedEvent)
			status string
			reason string
		}{
			{"no userMessage, long stored message", 1, false, func(e *event.ConversationCompletedEvent) { e.UserMessage = "" }, store.RunCompleted, ""},
			// The spec's listener checks the length only of a userMessage the event carries.
			{"no userMessage, short stored message", 2, true, func(e *event.ConversationCompletedEvent) { e.UserMessage = "" }, store.RunCompleted, ""},
			{"short userMessage", 11, false, func(e *event.ConversationCompletedEvent) { e.UserMessage = " 好的吧 " }, store.RunSkipped,
				"the last user message has 3 characters; min-user-message-length is 10"},
			{"own trigger source", 3, false, func(e *event.ConversationCompletedEvent) { e.TriggerSource = "wecom" }, store.RunCompleted, ""},
			{"no trigger source", 4, false, func(e *event.ConversationCompletedEvent) { e.TriggerSource = "" }, store.RunCompleted, ""},
			{"cron", 5, false, func(e *event.ConversationCompletedEvent) { e.TriggerSource = event.TriggerCron }, store.RunSkipped, "skip-cron-conversations"},
			{"error reply", 6, false, func(e *event.ConversationCompletedEvent) { e.AssistantReply = "[错误] 认证失败: Invalid API Key" }, store.RunSkipped,
				"the assistant reply is an error message"},
			{"error status", 7, false, func(e *event.ConversationCompletedEvent) { e.TurnStatus = event.TurnError }, store.RunSkipped, `turnStatus "error"`},
			{"stopped", 8, false, func(e *event.ConversationCompletedEvent) { e.TurnStatus = event.TurnStopped }, store.RunSkipped, `turnStatus "stopped"`},
			{"max iterations", 9, false, func(e *event.ConversationCompletedEvent) { e.FinishReason = "max_iterations_reached" }, store.RunSkipped,
				`finishReason "max_iterations_reached" is not durable`},
			{"normal finish", 10, false, func(e *event.ConversationCompletedEvent) { e.TurnStatus, e.FinishReason = "completed", "normal" }, store.RunCompleted, ""},
		}
		ids := make([]string, len(cases))
		for i, c := range cases {
			h.conversation(c.agent, "c", "pc", 6)
			if c.short {
				if _, err := h.msgs.Add(context.Background(),
					conversation.Message{AgentID: c.agent, ConversationID: "c", Role: "user", Content: " 好的吧 "},
					conversation.Message{AgentID: c.agent, ConversationID: "c", Role: "assistant", Content: "好。"}); err != nil {
					t.Fatal(err)
				}
			}
			e := completed(c.agent, "c", fmt.Sprintf("e-precheck-%d", c.agent), 6)
			c.mut(e)
			h.publish(e)
			ids[i] = e.EventID
		}
		poll.Until(t, 20*time.Second, "all events settled", h.settled)
		for i, c := range cases {
			runs := h.runs(ids[i])
			if len(runs) == 0 {
				t.Errorf("%s: no ledger row", c.name)
				continue
			}
			if string(runs[0].Status) != c.status || !strings.Contains(runs[0].Reason, c.reason) {
				t.Errorf("%s: last run %s %q, want %s with %q", c.name, runs[0].Status, runs[0].Reason, c.status, c.reason)
			}
		}
	})
}
