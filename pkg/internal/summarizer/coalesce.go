package summarizer

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/store"
)

// Coalescing during the cooldown. While an agent's cooldown runs, one delivery waits for
// its end (the waiter, named in the agent's record) and the agent's other events are
// acknowledged into the extraction that follows it (listed in the record as coalesced).
//
// Why acknowledging is safe: an event is coalesced only after its messages are stored and
// its conversation registered (a watermark row), so any extraction of the agent that leaves
// none of its pending messages out covers them; the watermarks, not the deliveries, say what
// is extracted. The waiter is a delivery JetStream still holds: it is acknowledged only once
// such a complete extraction has committed (which also writes each coalesced event's ledger
// row, in the same transaction) and it has stood down from the record. Should the waiter not
// come back by its deadline (the cooldown's end plus AckWait and a minute: its worker died
// and AckWait ran out, or it was dead-lettered), the next event of the agent becomes the
// waiter, and the next extraction of the agent, whichever job runs it, sweeps the coalesced
// events up. A dead-lettered waiter stays visible on MATE_DLQ; retrying it runs that sweep,
// and so does the workers' stranded sweep (sweep.go) when the agent sends nothing more.

// deferralCoalesced is the Result.Deferral of an event acknowledged into the agent's next
// extraction.
const deferralCoalesced = "coalesced"

// maxCoalesced bounds the events one record lists; past it, events wait as deliveries.
const maxCoalesced = 256

// waiterGrace is how long past the cooldown's end the waiter is expected back.
func (s *Service) waiterGrace() time.Duration { return s.set.AckWait + time.Minute }

// waiterLive reports whether the record's waiter is expected back still.
func (s *Service) waiterLive(st lease.State) bool {
	return st.Waiter != "" && time.Now().Before(st.WaiterUntil)
}

// wait handles an event deferred by the cooldown (r): it becomes the agent's waiter, or,
// when another delivery waits already, it is acknowledged into the coming extraction. Any
// record write that loses a race leaves it a plain deferral.
func (s *Service) wait(ctx context.Context, job Job, st lease.State, r Result) Result {
	if !job.policy().Event || st.Held(time.Now()) {
		return r
	}
	me := job.EventID
	if st.Waiter != "" && st.Waiter != me && s.waiterLive(st) {
		coalesced := Result{Status: store.RunCompleted, Deferral: deferralCoalesced,
			Reason: fmt.Sprintf("coalesced into agent %d's extraction after its cooldown (until %s), which event %s waits for",
				job.AgentID, st.CooldownUntil.UTC().Format(time.RFC3339Nano), st.Waiter)}
		for _, c := range st.Coalesced {
			if c.EventID == me {
				return coalesced
			}
		}
		if len(st.Coalesced) >= maxCoalesced {
			return r
		}
		_, err := s.d.Leases.Update(ctx, job.AgentID, st, func(rec *lease.Record) {
			rec.Coalesced = append(rec.Coalesced, lease.Coalesced{EventID: me, ConversationID: job.ConversationID})
		})
		if err != nil {
			return r
		}
		return coalesced
	}
	until := st.CooldownUntil.Add(s.waiterGrace())
	if st.Waiter == me && st.WaiterUntil.Equal(until) {
		return r
	}
	_, _ = s.d.Leases.Update(ctx, job.AgentID, st, func(rec *lease.Record) { rec.Waiter, rec.WaiterUntil = me, until })
	return r
}

// stopWaiting lets the agent's waiter go whose work is done (r): it clears itself from the
// record first, or comes back soon when that write loses a race.
func (s *Service) stopWaiting(ctx context.Context, job Job, st lease.State, r Result) Result {
	_, err := s.d.Leases.Update(ctx, job.AgentID, st, func(rec *lease.Record) { rec.Waiter, rec.WaiterUntil = "", time.Time{} })
	if err != nil {
		return deferred("lease", fmt.Sprintf("agent %d's record changed while its waiter stood down: %v", job.AgentID, err),
			min(s.backoff(job.Attempt), 2*time.Second))
	}
	return r
}

// recordCoalesced writes, in the transaction of the extraction that covers them, the
// ledger row of each event acknowledged into it.
func (s *Service) recordCoalesced(tx *store.Tx, agentID int64, a *attempt) error {
	for _, c := range a.coalesced {
		run := ledger.Run{RunID: uuid.NewString(), Kind: ledger.KindSummarize, AgentID: agentID, EventID: c.EventID,
			Conversations: []string{c.ConversationID}, Status: store.RunCompleted, Attempt: 1,
			Reason: fmt.Sprintf("coalesced during the cooldown; covered by run %s", a.run.RunID)}
		if _, err := s.d.Ledger.RecordTx(tx, run); err != nil {
			return err
		}
	}
	return nil
}
