package summarizer

import (
	"context"
	"fmt"
	"github.com/matememory/matememory/pkg/api"
	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/fault"
	"strings"
	"time"

	"github.com/matememory/matememory/pkg/internal/lease"
)

// The pending view. A deferral (cooldown, held lease) and a coalesced event write no
// ledger row, so the run ledger cannot say that an event waits. What waits is in two
// places the workers keep anyway: the agent's record in the lease bucket (the lease's
// holder, the cooldown, the waiter and the events coalesced behind it) and the watermarks
// (every registered conversation with messages above its watermark is what the agent's
// next extraction covers, whichever delivery runs it, an event deferred for a held lease
// included). PendingReader reads both, for operators: one KV Get and two SQL reads, no
// write, so the hot path pays nothing for it.

// States of an agent's pending work (Pending.State), the first that applies.
const (
	// PendingStateLeased: a worker holds the agent's lease (an extraction or an emergence runs);
	// events that arrive meanwhile are redelivered after it.
	PendingStateLeased = "leased"
	// PendingStateIdle: nothing waits to be extracted.
	PendingStateIdle = "idle"
	// PendingStateCooldown: the agent's cooldown runs; its waiter extracts everything after it.
	PendingStateCooldown = "cooldown"
	// PendingStateWaiting: the cooldown is over and the waiter's redelivery is due.
	PendingStateWaiting = "waiting"
	// PendingStateStranded: events coalesced behind a waiter that did not come back; the workers'
	// stranded sweep or the agent's next event extracts them.
	PendingStateStranded = "stranded"
	// PendingStateQueued: conversations have messages not yet extracted and nothing in the
	// record holds them: a deferred delivery comes back, or nothing will until the agent's
	// next event or a manual summarize (a dead-lettered event).
	PendingStateQueued = "queued"
)

// MaxPendingConversations bounds the conversations one pending view lists.
const MaxPendingConversations = 100

// Pending is an agent's work waiting for an extraction, as the pending view answers it (the
// wire type, pkg/api, is the view's one declaration).
type (
	Pending             = api.Pending
	PendingLease        = api.PendingLease
	PendingCooldown     = api.PendingCooldown
	PendingWaiter       = api.PendingWaiter
	PendingEvent        = api.PendingEvent
	PendingConversation = api.PendingConversation
)

// PendingReader reads agents' pending work (API processes use it; it writes nothing).
type PendingReader struct {
	leases *lease.Manager
	msgs   *conversation.Store
	// sweepEvery is how often the workers' stranded sweep runs (named in the summary).
	sweepEvery time.Duration
	now        func() time.Time
}

// NewPendingReader reads records from leases (the bus.BucketLease manager) and the pending
// messages above the watermarks from msgs; sweepEvery is the workers' Settings.SweepEvery.
func NewPendingReader(leases *lease.Manager, msgs *conversation.Store, sweepEvery time.Duration) *PendingReader {
	return &PendingReader{leases: leases, msgs: msgs, sweepEvery: sweepEvery, now: time.Now}
}

// Pending reads agentID's pending work. An agent never seen has none (nothing is created).
func (p *PendingReader) Pending(ctx context.Context, agentID int64) (Pending, error) {
	st, err := p.leases.Read(ctx, agentID)
	if err != nil {
		return Pending{}, leaseReadError{err}
	}
	// Judged on the clock the workers judge the record on (wall time, as in lease.State.Held).
	now := p.now()
	out := Pending{AgentID: agentID, Now: now.UTC(), Coalesced: []PendingEvent{}}
	if st.Held(now) {
		out.Lease = &PendingLease{Owner: st.Owner, Purpose: st.Purpose, Acquired: st.Acquired, Expires: st.Expires}
	}
	if now.Before(st.CooldownUntil) {
		out.Cooldown = &PendingCooldown{Until: st.CooldownUntil, RunID: st.CooldownRun}
	}
	if st.Waiter != "" {
		out.Waiter = &PendingWaiter{EventID: st.Waiter, ExpectedBy: st.WaiterUntil, Overdue: !now.Before(st.WaiterUntil)}
	}
	for _, c := range st.Coalesced {
		out.Coalesced = append(out.Coalesced, PendingEvent{EventID: c.EventID, ConversationID: c.ConversationID})
	}
	if out.Conversations, out.MoreConversations, err = p.conversations(ctx, agentID); err != nil {
		return Pending{}, err
	}
	out.State, out.Summary = p.explain(out)
	return out, nil
}

// conversations lists agentID's registered conversations with messages above their
// watermark, oldest pending message first: what the agent's next extraction covers.
func (p *PendingReader) conversations(ctx context.Context, agentID int64) ([]PendingConversation, bool, error) {
	rows, err := p.msgs.PendingConversations(ctx, agentID, MaxPendingConversations+1)
	if err != nil {
		return nil, false, fmt.Errorf("read the pending conversations of agent %d: %w", agentID, err)
	}
	more := len(rows) > MaxPendingConversations
	if more {
		rows = rows[:MaxPendingConversations]
	}
	out := make([]PendingConversation, len(rows))
	for i, r := range rows {
		out[i] = PendingConversation{ConversationID: r.ConversationID, ExtractedThrough: r.Extracted, Messages: r.Messages,
			LastMessageID: r.Last, Since: r.Since}
	}
	return out, more, nil
}

// explain names the state of v and says in a sentence why what waits is not extracted yet.
func (p *PendingReader) explain(v Pending) (string, string) {
	var waiting []string
	if n := len(v.Conversations); n > 0 {
		more := ""
		if v.MoreConversations {
			more = "more than "
		}
		waiting = append(waiting, more+plural(n, "conversation")+" with messages not yet extracted")
	}
	if n := len(v.Coalesced); n > 0 {
		waiting = append(waiting, plural(n, "event")+" coalesced into the next extraction")
	}
	what := "."
	if len(waiting) > 0 {
		what = ". Waiting: " + strings.Join(waiting, " and ") + "."
	}
	switch {
	case v.Lease != nil:
		return PendingStateLeased, fmt.Sprintf("%s holds the agent's lease (%s) until %s unless renewed; events arriving meanwhile are redelivered after it%s",
			v.Lease.Owner, v.Lease.Purpose, stamp(v.Lease.Expires), what)
	case len(waiting) == 0:
		s := "Nothing waits to be extracted"
		switch {
		case v.Waiter != nil && v.Waiter.Overdue:
			s += fmt.Sprintf("; the record still names event %s as the waiter, which did not come back by %s: harmless, the next event that waits replaces it",
				v.Waiter.EventID, stamp(v.Waiter.ExpectedBy))
		case v.Waiter != nil:
			s += fmt.Sprintf("; event %s still waits for the cooldown's end and will find its work done", v.Waiter.EventID)
		}
		return PendingStateIdle, s + "."
	case v.Cooldown != nil:
		then := "after it, an event deferred earlier comes back (or the agent's next event arrives) and extracts everything waiting"
		if v.Waiter != nil && !v.Waiter.Overdue {
			then = fmt.Sprintf("event %s is redelivered then and extracts everything waiting", v.Waiter.EventID)
		}
		return PendingStateCooldown, fmt.Sprintf("The agent's extraction cooldown runs until %s; %s%s", stamp(v.Cooldown.Until), then, what)
	case v.Waiter != nil && !v.Waiter.Overdue:
		return PendingStateWaiting, fmt.Sprintf("The cooldown is over; event %s is redelivered by %s and extracts everything waiting%s",
			v.Waiter.EventID, stamp(v.Waiter.ExpectedBy), what)
	case len(v.Coalesced) > 0:
		who := "No waiter stands for the coalesced events"
		if v.Waiter != nil {
			who = fmt.Sprintf("Waiter %s did not come back by %s (dead-lettered, or its worker died)", v.Waiter.EventID, stamp(v.Waiter.ExpectedBy))
		}
		sweep := "the workers' stranded sweep"
		if p.sweepEvery > 0 {
			sweep += fmt.Sprintf(" (every %s)", p.sweepEvery)
		}
		return PendingStateStranded, fmt.Sprintf("%s: %s or the agent's next event extracts everything waiting%s", who, sweep, what)
	default:
		return PendingStateQueued, "Nothing in the agent's record holds these back: an event deferred earlier (its lease was held, or it failed) comes back after its backoff; " +
			"if its run failed for good (see the run ledger and the dead letters), the agent's next event or a manual summarize extracts them" + what
	}
}

// leaseReadError is a failure to read the lease bucket (NATS unavailable); it matches
// fault.ErrUnavailable.
type leaseReadError struct{ error }

func (e leaseReadError) Unwrap() error { return e.error }

// Is makes errors.Is(err, fault.ErrUnavailable) true.
func (e leaseReadError) Is(target error) bool { return target == fault.ErrUnavailable }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
