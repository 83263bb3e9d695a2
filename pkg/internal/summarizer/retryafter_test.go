package summarizer

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// Issue 9 point 13: a 429 with Retry-After is retried no sooner than the endpoint asked,
// within the backoff cap.
func TestRetryAfterIsHonoured(t *testing.T) {
	db := storetest.SQLite(t)
	var retryAfter atomic.Value
	retryAfter.Store("3")
	fake := llmtest.New(t, func(llmtest.Received) llmtest.Reply {
		return llmtest.Reply{Status: 429, Content: "rate limited", Header: http.Header{"Retry-After": {retryAfter.Load().(string)}}}
	})
	h := newHarness(t, db, withLLM(fake), withSettings(func(s *Settings) { s.BackoffMax = 10 * time.Second }))
	h.conversation(11, "c1", "t11-1", 4)
	svc := h.service("w1")
	res := svc.Handle(context.Background(), JobFromEvent(completed(11, "c1", "e11", 4)))
	if !res.Retry || res.Delay < 3*time.Second || res.Delay > 10*time.Second {
		t.Fatalf("429 with Retry-After 3: %+v", res)
	}
	// A longer wait than the cap is capped.
	retryAfter.Store("600")
	res = svc.Handle(context.Background(), Job{EventID: "e11", AgentID: 11, ConversationID: "c1",
		Event: completed(11, "c1", "e11", 4), Delivery: Delivery{Attempt: 2}})
	if !res.Retry || res.Delay != 10*time.Second {
		t.Fatalf("429 with Retry-After 600: %+v, want the 10s cap", res)
	}
}
