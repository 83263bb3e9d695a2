package summarizer

import (
	"context"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// TestSettleOverlapsTheRelease: with Job.Settle, an extraction's outcome is settled once,
// before Handle returns and with the same outcome, and by the time Handle returns the
// lease is released with the cooldown; a job whose outcome depends on the release (the
// agent's waiter) is never settled early.
func TestSettleOverlapsTheRelease(t *testing.T) {
	ctx := context.Background()
	fake := llmtest.New(t, echoLLM)
	h := newHarness(t, storetest.SQLite(t), withLLM(fake), withSettings(func(s *Settings) { s.Memory.CooldownMinutes = 5 }))
	svc := h.service("w1")
	h.conversation(1, "c1", "t1-1", 4)
	var calls []Result
	job := JobFromEvent(completed(1, "c1", "e1", 4))
	job.Settle = func(r Result) { calls = append(calls, r) }
	res := svc.Handle(ctx, job)
	if res.Status != store.RunCompleted || len(calls) != 1 || calls[0].RunID != res.RunID || calls[0].Status != res.Status {
		t.Fatalf("Handle gave %s %q; Settle was called %d times: %+v", res.Status, res.Reason, len(calls), calls)
	}
	st, err := svc.d.Leases.Read(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.Held(time.Now()) || st.CooldownUntil.Before(time.Now().Add(4*time.Minute)) {
		t.Fatalf("after Handle the record is %+v: want it released with the cooldown", st.Record)
	}

	// A second event waits for the cooldown and names itself the waiter: a deferral, and no
	// lease to release, so nothing is settled early.
	h.conversation(1, "c2", "t1-2", 4)
	calls = nil
	job = JobFromEvent(completed(1, "c2", "e2", 4))
	job.Settle = func(r Result) { calls = append(calls, r) }
	if res := svc.Handle(ctx, job); res.Deferral != "cooldown" || len(calls) != 0 {
		t.Fatalf("waiter: %s %q (%s); Settle called %d times", res.Status, res.Reason, res.Deferral, len(calls))
	}
}
