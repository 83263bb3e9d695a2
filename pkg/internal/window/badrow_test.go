package window

import (
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// Issue 9.4: a stored message whose tool_calls cannot be used (a string, an object: stored
// before the intake validated them) is left out and reported; the conversation's context
// still assembles instead of answering 500 for good.
func TestUnusableStoredMessageIsSkipped(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		e := newEnv(t, db)
		r := e.replica("a", replicaOpts{})
		e.store(1, "c-bad", 0, 2, filler)
		for _, tc := range []string{`"just a string"`, `{"id":"x"}`} {
			if err := db.DB.Create(&store.Message{AgentID: 1, ConversationID: "c-bad", Role: "assistant",
				Content: "calling", ToolCalls: tc, CreateTime: time.Now().UTC()}).Error; err != nil {
				t.Fatal(err)
			}
		}
		st, res, msg := r.post(t, 1, "c-bad", body("接下来呢？", 0, nil), false)
		if st != 200 {
			t.Fatalf("status %d: %s", st, msg)
		}
		if res.SkippedMessages != 2 || len(res.Warnings) < 2 || !strings.Contains(strings.Join(res.Warnings, " "), "tool_calls") {
			t.Fatalf("the unusable messages are not reported: skipped %d, warnings %q", res.SkippedMessages, res.Warnings)
		}
		for _, m := range res.Messages {
			if m.Content == "calling" {
				t.Fatal("an unusable message was sent to the model")
			}
		}
		if res.HistoryMessages != res.Kept+res.Summarized+res.Trimmed {
			t.Fatalf("accounting: %+v", res)
		}
	})
}
