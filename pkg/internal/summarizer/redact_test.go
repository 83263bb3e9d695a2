package summarizer

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// Issue 9.6: an English password phrase and a card number are masked in the transcript sent
// to the model (unless redact-llm-input is off), in the daily note, and in the ledger's
// reason even when the model quotes them.
func TestSecretsMaskedBeforeTheModelAndInTheLedger(t *testing.T) {
	for _, redact := range []bool{true, false} {
		db := storetest.SQLite(t)
		var mu sync.Mutex
		var prompts []string
		fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
			mu.Lock()
			prompts = append(prompts, userPrompt(r))
			mu.Unlock()
			return answer(map[string]any{
				"should_update": true,
				"reason":        "the user said my password is hunter2 and paid with 4111 1111 1111 1111",
				"daily_entry":   "- Password is hunter2; card 4111111111111111.",
			})
		})
		h := newHarness(t, db, withLLM(fake), withSettings(func(s *Settings) { s.Memory.RedactLLMInput = redact }))
		ctx := context.Background()
		if _, err := h.msgs.Add(ctx,
			conversation.Message{AgentID: 8, ConversationID: "c1", Role: "user", Content: "my password is hunter2, remember it for me please"},
			conversation.Message{AgentID: 8, ConversationID: "c1", Role: "assistant", Content: "I should not keep that."},
			conversation.Message{AgentID: 8, ConversationID: "c1", Role: "user", Content: "and my card is 4111 1111 1111 1111 for the renewal"},
			conversation.Message{AgentID: 8, ConversationID: "c1", Role: "assistant", Content: "Noted the renewal."},
		); err != nil {
			t.Fatal(err)
		}
		h.worker(h.service("w1"))
		h.publish(completed(8, "c1", "evt-secret", 4))
		poll.Until(t, 20*time.Second, "the run", func() bool { return h.settled() && len(h.runs("evt-secret")) > 0 })
		mu.Lock()
		sent := strings.Join(prompts, "\n")
		mu.Unlock()
		leaked := strings.Contains(sent, "hunter2") || strings.Contains(sent, "4111 1111 1111 1111")
		if redact && leaked {
			t.Fatalf("secrets sent to the model:\n%s", sent)
		}
		if !redact && !leaked {
			t.Fatal("with redact-llm-input off the transcript should be sent as it is")
		}
		for _, r := range h.runs("evt-secret") {
			if strings.Contains(r.Reason, "hunter2") || strings.Contains(r.Reason, "4111") {
				t.Fatalf("the ledger's reason carries a secret: %q", r.Reason)
			}
		}
		infos, _ := h.ws.ListContent(ctx, 8, "memory/", 10)
		for _, f := range infos {
			if strings.Contains(f.Content, "hunter2") || strings.Contains(f.Content, "4111111111111111") {
				t.Fatalf("daily note carries a secret: %q", f.Content)
			}
		}
		if len(infos) == 0 {
			t.Fatal("no daily note written")
		}
	}
}
