package summarizer

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/panics"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// panicOnce wraps the real model client and panics on its first call: a defect reached by
// one delivery.
type panicOnce struct {
	llm.Client
	done atomic.Bool
}

func (p *panicOnce) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	if p.done.CompareAndSwap(false, true) {
		panic("extraction exploded")
	}
	return p.Client.Complete(ctx, req)
}

// A panic while a delivery is handled is recovered and counted; the delivery is retried and
// the next attempt extracts it once. The worker keeps consuming.
func TestPanicWhileHandlingIsRetried(t *testing.T) {
	fake := llmtest.New(t, echoLLM)
	h := newHarness(t, storetest.SQLite(t), withLLM(fake))
	h.conversation(4, "c1", "t4-1", 4)
	h.conversation(4, "c2", "t4-2", 4)
	svc := h.service("w1")
	svc.d.LLM = &panicOnce{Client: svc.d.LLM}
	g := panics.New(slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	nc, err := h.dialer.Connect("test-worker")
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWorker(context.Background(), svc, nc, WithGuard(g))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	h.publish(completed(4, "c1", "e-panic", 4))
	poll.Until(t, 30*time.Second, "the event extracted after the panic", func() bool {
		for _, r := range h.runs("e-panic") {
			if r.Status == store.RunCompleted {
				return true
			}
		}
		return false
	})
	if got := g.Count("summarizer.handle"); got != 1 {
		t.Fatalf("recovered panics = %v, want 1", got)
	}
	if got := strings.Count(h.daily(4), "covered t4-1"); got != 1 {
		t.Fatalf("the daily note holds the extraction %d times, want once:\n%s", got, h.daily(4))
	}
	// The worker goes on with the next event.
	h.publish(completed(4, "c2", "e-after", 4))
	poll.Until(t, 60*time.Second, "the next event extracted", func() bool {
		return strings.Contains(h.daily(4), "covered t4-2")
	})
}
