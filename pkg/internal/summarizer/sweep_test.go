package summarizer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// Events coalesced behind a waiter that was dead-lettered while the model was down, for an
// agent that sends nothing more: once the model is back, a worker's sweep finds them and
// publishes one request, which extracts them and writes their ledger rows. A sweep that
// fails is neither retried nor dead-lettered; the events stay listed for the next one.
func TestStrandedEventsAreSweptUp(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		h, svc, down, res := deadLetterTheWaiter(t, db)
		if !res.DeadLetter {
			t.Fatalf("waiter: %+v, want it dead-lettered", res)
		}
		ctx := context.Background()
		if x, err := svc.Stranded(ctx); err != nil || len(x) != 0 {
			t.Fatalf("stranded while the waiter is still expected back: %+v %v", x, err)
		}
		// The waiter's deadline passes; nothing else comes for the agent.
		if _, err := svc.d.Leases.Update(ctx, 1, h.record(svc, 1), func(r *lease.Record) { r.WaiterUntil = time.Now().Add(-time.Second) }); err != nil {
			t.Fatal(err)
		}
		x, err := svc.Stranded(ctx)
		if err != nil || len(x) != 1 || x[0].AgentID != 1 || x[0].Events != 2 {
			t.Fatalf("stranded: %+v %v; want agent 1 with 2 events", x, err)
		}

		// A sweep while the model is still down fails once, and stays failed.
		sweep := JobFromRequest(ptr(sweepRequest(x[0])))
		if sweep.Kind != KindSweep || sweep.policy().Urgent || sweep.policy().Retried {
			t.Fatalf("sweep job %+v", sweep)
		}
		res = svc.Handle(ctx, sweep)
		if res.Retry || res.DeadLetter || res.Status != store.RunFailed || !strings.Contains(res.Reason, "the next sweep tries again") {
			t.Fatalf("failed sweep: %+v; want failed, not retried, not dead-lettered", res)
		}
		if st := h.record(svc, 1); len(st.Coalesced) != 2 {
			t.Fatalf("record after a failed sweep: %+v; the events must stay listed", st)
		}

		// The model is back: the worker's own sweep publishes the request, and it extracts.
		down.Store(false)
		svc.set.SweepEvery = 100 * time.Millisecond
		h.worker(svc)
		poll.Until(t, 20*time.Second, "the coalesced events' ledger rows", func() bool {
			return len(h.runs("e-3")) == 1 && len(h.runs("e-4")) == 1
		})
		for _, e := range []string{"e-3", "e-4"} {
			if runs := h.runs(e); runs[0].Status != store.RunCompleted || !strings.Contains(runs[0].Reason, "coalesced") {
				t.Fatalf("%s: runs %+v", e, runs)
			}
		}
		note := h.daily(1)
		for c := 1; c <= 4; c++ {
			if k := strings.Count(note, fmt.Sprintf("covered t1-%d\n", c)); k != 1 {
				t.Fatalf("conversation c%d is %d times in the daily note:\n%s", c, k, note)
			}
		}
		// The record is cleared when the lease is released, just after the ledger rows commit.
		poll.Until(t, 10*time.Second, "the record cleared after the sweep", func() bool {
			return len(h.record(svc, 1).Coalesced) == 0
		})
		if x, err := svc.Stranded(ctx); err != nil || len(x) != 0 {
			t.Fatalf("stranded after the sweep: %+v %v", x, err)
		}
	})
}

func ptr[T any](v T) *T { return &v }
