package summarizer

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// coalesceSetup extracts agent 1's conversation c1 (which starts the cooldown), then hands
// the events of c2…c<n> to the service while the cooldown runs.
func coalesceSetup(t *testing.T, db storetest.DB, n int) (*harness, *Service, []Result) {
	t.Helper()
	return coalesceSetupWith(t, db, n, echoLLM)
}

// coalesceSetupWith is coalesceSetup with the model answering llm.
func coalesceSetupWith(t *testing.T, db storetest.DB, n int, llm func(llmtest.Received) llmtest.Reply) (*harness, *Service, []Result) {
	t.Helper()
	fake := llmtest.New(t, llm)
	h := newHarness(t, db, withLLM(fake), withSettings(func(s *Settings) { s.Memory.CooldownMinutes = 0.02 })) // 1.2 s
	ctx := context.Background()
	for c := 1; c <= n; c++ {
		h.conversation(1, fmt.Sprintf("c%d", c), fmt.Sprintf("t1-%d", c), 4)
	}
	svc := h.service("w1")
	if res := svc.Handle(ctx, JobFromEvent(completed(1, "c1", "e-1", 4))); res.Status != store.RunCompleted {
		t.Fatalf("first extraction: %s %s", res.Status, res.Reason)
	}
	var out []Result
	for c := 2; c <= n; c++ {
		out = append(out, svc.Handle(ctx, JobFromEvent(completed(1, fmt.Sprintf("c%d", c), fmt.Sprintf("e-%d", c), 4))))
	}
	return h, svc, out
}

func (h *harness) record(svc *Service, agent int64) lease.State {
	h.t.Helper()
	st, err := svc.d.Leases.Read(context.Background(), agent)
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

func (h *harness) daily(agent int64) string {
	h.t.Helper()
	notes, err := h.ws.ListContent(context.Background(), agent, "memory/", 0)
	if err != nil || len(notes) != 1 {
		h.t.Fatalf("daily notes %+v %v", notes, err)
	}
	return notes[0].Content
}

func afterCooldown(t *testing.T, h *harness, svc *Service) {
	t.Helper()
	until := h.record(svc, 1).CooldownUntil
	poll.Until(t, 10*time.Second, "the cooldown's end", func() bool { return time.Now().After(until) })
}

// While the cooldown runs, the first deferred event waits and the others are acknowledged
// at once, with no ledger row; the waiter's extraction after the cooldown covers them all
// and commits their rows with its own.
func TestCoalescedEventsAreCoveredByTheWaiter(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		const n = 6
		h, svc, results := coalesceSetup(t, db, n)
		if r := results[0]; !r.Retry || r.Deferral != "cooldown" {
			t.Fatalf("first deferred event: %+v, want it to wait", r)
		}
		for i, r := range results[1:] {
			if r.Retry || r.Deferral != deferralCoalesced {
				t.Fatalf("event e-%d: %+v, want it acknowledged into the coming extraction", i+3, r)
			}
			if runs := h.runs(fmt.Sprintf("e-%d", i+3)); len(runs) != 0 {
				t.Fatalf("event e-%d has ledger rows before its extraction: %+v", i+3, runs)
			}
		}
		st := h.record(svc, 1)
		if st.Waiter != "e-2" || len(st.Coalesced) != n-2 {
			t.Fatalf("record %+v, want waiter e-2 and %d coalesced events", st, n-2)
		}
		if strings.Contains(h.daily(1), "t1-3") {
			t.Fatal("a coalesced conversation was extracted before the cooldown ended")
		}

		afterCooldown(t, h, svc)
		waiter := JobFromEvent(completed(1, "c2", "e-2", 4))
		waiter.Attempt = 2
		if res := svc.Handle(context.Background(), waiter); res.Retry || res.Status != store.RunCompleted || !res.Covered {
			t.Fatalf("waiter: %+v", res)
		}
		note := h.daily(1)
		for c := 1; c <= n; c++ {
			if k := strings.Count(note, fmt.Sprintf("covered t1-%d\n", c)); k != 1 {
				t.Fatalf("conversation c%d is %d times in the daily note:\n%s", c, k, note)
			}
		}
		for c := 3; c <= n; c++ {
			runs := h.runs(fmt.Sprintf("e-%d", c))
			if len(runs) != 1 || runs[0].Status != store.RunCompleted || !strings.Contains(runs[0].Reason, "coalesced") {
				t.Fatalf("event e-%d: runs %+v, want one completed run naming the coalescing", c, runs)
			}
		}
		if st := h.record(svc, 1); st.Waiter != "" || len(st.Coalesced) != 0 || st.Held(time.Now()) {
			t.Fatalf("record after the waiter's extraction: %+v", st)
		}
	})
}

// A waiter that never comes back (its deliveries dead-lettered, say) does not strand the
// events acknowledged meanwhile: once it is overdue, the next event's extraction sweeps them
// up; the old waiter, back late, finds its work done and stands down.
func TestOverdueWaiterIsSweptByTheNextEvent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		h, svc, results := coalesceSetup(t, db, 4)
		if !results[0].Retry || results[1].Deferral != deferralCoalesced || results[2].Deferral != deferralCoalesced {
			t.Fatalf("results %+v", results)
		}
		// The waiter's deadline passes without it.
		ctx := context.Background()
		if _, err := svc.d.Leases.Update(ctx, 1, h.record(svc, 1), func(r *lease.Record) { r.WaiterUntil = time.Now().Add(-time.Second) }); err != nil {
			t.Fatal(err)
		}
		afterCooldown(t, h, svc)
		h.conversation(1, "c5", "t1-5", 4)
		if res := svc.Handle(ctx, JobFromEvent(completed(1, "c5", "e-5", 4))); res.Retry || res.Status != store.RunCompleted {
			t.Fatalf("next event: %+v", res)
		}
		note := h.daily(1)
		for c := 1; c <= 5; c++ {
			if k := strings.Count(note, fmt.Sprintf("covered t1-%d\n", c)); k != 1 {
				t.Fatalf("conversation c%d is %d times in the daily note:\n%s", c, k, note)
			}
		}
		for _, e := range []string{"e-3", "e-4"} {
			if runs := h.runs(e); len(runs) != 1 || runs[0].Status != store.RunCompleted {
				t.Fatalf("%s: runs %+v", e, runs)
			}
		}
		if st := h.record(svc, 1); len(st.Coalesced) != 0 || st.Waiter != "e-2" {
			t.Fatalf("record %+v: want the coalesced events gone, the old waiter still named", st)
		}
		late := JobFromEvent(completed(1, "c2", "e-2", 4))
		late.Attempt = 5
		afterCooldown(t, h, svc)
		if res := svc.Handle(ctx, late); res.Retry || !res.Covered {
			t.Fatalf("late waiter: %+v", res)
		}
		if st := h.record(svc, 1); st.Waiter != "" {
			t.Fatalf("the late waiter did not stand down: %+v", st)
		}
	})
}

// deadLetterTheWaiter coalesces the events of c3 and c4 behind agent 1's waiter (e-2), takes
// the model down and hands the waiter its last delivery: res is what became of it. Storing
// false in down brings the model back.
func deadLetterTheWaiter(t *testing.T, db storetest.DB) (h *harness, svc *Service, down *atomic.Bool, res Result) {
	t.Helper()
	down = new(atomic.Bool)
	h, svc, results := coalesceSetupWith(t, db, 4, func(r llmtest.Received) llmtest.Reply {
		if down.Load() {
			return llmtest.Reply{Status: 503, Content: "overloaded"}
		}
		return echoLLM(r)
	})
	if !results[0].Retry || results[1].Deferral != deferralCoalesced || results[2].Deferral != deferralCoalesced {
		t.Fatalf("results %+v", results)
	}
	down.Store(true)
	afterCooldown(t, h, svc)
	waiter := JobFromEvent(completed(1, "c2", "e-2", 4))
	waiter.Attempt, waiter.LastAttempt = h.set.MaxDeliver, true
	return h, svc, down, svc.Handle(context.Background(), waiter)
}

// A waiter dead-lettered while events were acknowledged into its extraction says so in its
// reason (the ledger's and the dead letter's): retrying it extracts them too.
func TestDeadLetteredWaiterNamesItsCoalescedEvents(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		h, svc, _, res := deadLetterTheWaiter(t, db)
		if !res.DeadLetter || !strings.Contains(res.Reason, "2 events were acknowledged into this extraction") ||
			!strings.HasSuffix(res.Reason, "(dead-lettered)") {
			t.Fatalf("dead-lettered waiter: %+v", res)
		}
		if runs := h.runs("e-2"); len(runs) != 1 || runs[0].Reason != res.Reason {
			t.Fatalf("the waiter's ledger row %+v, want the reason %q", runs, res.Reason)
		}
		if st := h.record(svc, 1); len(st.Coalesced) != 2 {
			t.Fatalf("record %+v: the coalesced events must stay listed for the retry", st)
		}
	})
}
