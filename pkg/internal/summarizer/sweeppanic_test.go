package summarizer

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/panics"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// A panic in one stranded sweep is recovered and counted, and the loop goes on: the next
// sweep publishes the request (a panic used to end the sweeps for the process's life).
func TestSweepPanicIsRecovered(t *testing.T) {
	h, svc, _, res := deadLetterTheWaiter(t, storetest.SQLite(t))
	if !res.DeadLetter {
		t.Fatalf("waiter: %+v, want it dead-lettered", res)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := svc.d.Leases.Update(ctx, 1, h.record(svc, 1), func(r *lease.Record) { r.WaiterUntil = time.Now().Add(-time.Second) }); err != nil {
		t.Fatal(err)
	}
	svc.set.SweepEvery = 20 * time.Millisecond
	g := panics.New(slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	var calls, published atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		svc.sweepLoop(ctx, g, func(_ context.Context, r *event.SummarizeRequest) error {
			if calls.Add(1) == 1 {
				panic("publish exploded")
			}
			if r.AgentID == 1 {
				published.Add(1)
			}
			return nil
		})
	}()
	poll.Until(t, 20*time.Second, "a sweep after the panic publishing agent 1's request", func() bool { return published.Load() > 0 })
	cancel()
	<-done
	if got := g.Count("summarizer.sweep"); got != 1 {
		t.Fatalf("recovered sweep panics = %v, want 1", got)
	}
}
