package summarizer

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// TestLostAnswerReadFromTheLedger: a worker's answer to a manual summarize is a plain NATS
// message, lost when it crosses a cluster before the caller's interest did; the caller
// then finds the outcome in the run ledger at its next check instead of waiting out its
// whole timeout. A deferral in the ledger is not an outcome; another agent's row of the
// same id is not this caller's.
func TestLostAnswerReadFromTheLedger(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		h := newHarness(t, db)
		api := API{Ledger: h.ledger, NC: h.nc}
		ctx := context.Background()
		sub, err := h.nc.SubscribeSync(nats.NewInbox()) // nobody answers here
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		const id = "req-lost-answer"
		for _, r := range []ledger.Run{
			{Kind: ledger.KindSummarize, AgentID: 8, EventID: id, Status: store.RunCompleted, Reason: "someone else's"},
			{Kind: ledger.KindSummarize, AgentID: 7, EventID: id, Status: store.RunDeferred, Reason: "lease held"},
		} {
			if _, err := h.ledger.Record(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		wctx, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
		_, _, err = api.awaitOutcome(wctx, sub, 7, id)
		cancel()
		if err == nil {
			t.Fatal("a deferral or another agent's run was taken for the outcome")
		}

		run, err := h.ledger.Record(ctx, ledger.Run{Kind: ledger.KindSummarize, AgentID: 7, EventID: id,
			Status: store.RunFailed, Reason: "gave up after 4 deliveries: boom (dead-lettered)"})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		wctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		out, idle, err := api.awaitOutcome(wctx, sub, 7, id)
		if err != nil || idle {
			t.Fatalf("awaitOutcome: idle=%v err=%v; want the ledger's outcome", idle, err)
		}
		if out.RunID != run.RunID || out.Status != store.RunFailed || out.Retrying {
			t.Fatalf("outcome %+v; want run %s, failed, not retrying", out, run.RunID)
		}
		if d := time.Since(start); d > 10*idleCheckEvery { // far below the wait, even on a loaded machine
			t.Fatalf("the ledger's outcome took %s", d)
		}
	})
}
