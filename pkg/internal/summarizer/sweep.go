package summarizer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/panics"
)

// The stranded sweep. Events acknowledged into an agent's coming extraction during its
// cooldown (coalesce.go) are extracted by the agent's waiter, or, once the waiter is
// overdue, by the agent's next extraction, whichever job runs it. When the waiter was
// dead-lettered (the model down at each of its deliveries, say) and the agent sends nothing
// more, nothing would run that extraction until someone retried the dead letter. So every
// worker looks, every Settings.SweepEvery, for agents whose record lists coalesced events
// behind a waiter that is overdue, with no lease held and no cooldown running, and
// publishes one summarize request for each (without a reply subject: not urgent). Its
// message id is the agent and the record's revision, so the workers that see the same
// record publish one request in the stream's duplicate window. A sweep that fails is not
// retried or dead-lettered: the events stay listed, and a later sweep tries again.

// sweepReason marks a summarize request of the sweep.
const sweepReason = "stranded-sweep"

// Stranded is an agent whose coalesced events wait for an extraction nobody will run.
type Stranded struct {
	AgentID int64
	// ConversationID is one of the coalesced events' conversations (the request names one).
	ConversationID string
	// Events is how many events are listed; Revision is the record's revision.
	Events   int
	Revision uint64
}

// Stranded lists the agents whose record lists coalesced events behind a waiter that is
// not expected back, while no lease is held and no cooldown runs.
func (s *Service) Stranded(ctx context.Context) ([]Stranded, error) {
	now := time.Now()
	var out []Stranded
	err := s.d.Leases.Scan(ctx, func(agentID int64, st lease.State) {
		if len(st.Coalesced) == 0 || s.waiterLive(st) || st.Held(now) || now.Before(st.CooldownUntil) {
			return
		}
		out = append(out, Stranded{AgentID: agentID, ConversationID: st.Coalesced[0].ConversationID,
			Events: len(st.Coalesced), Revision: st.Revision})
	})
	return out, err
}

// sweepRequest is the summarize request that sweeps x's coalesced events up.
func sweepRequest(x Stranded) event.SummarizeRequest {
	return event.SummarizeRequest{RequestID: "sweep-" + strconv.FormatUint(x.Revision, 10), AgentID: x.AgentID,
		ConversationID: x.ConversationID, RequestedAt: time.Now().UTC(), Reason: sweepReason}
}

// sweep publishes a sweep request for each stranded agent and says how many it published.
func (s *Service) sweep(ctx context.Context, publish func(context.Context, *event.SummarizeRequest) error) (int, error) {
	stranded, err := s.Stranded(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, x := range stranded {
		req := sweepRequest(x)
		if err := publish(ctx, &req); err != nil {
			return n, fmt.Errorf("publish the sweep of agent %d: %w", x.AgentID, err)
		}
		s.d.Log.Info("swept up events coalesced behind a waiter that is not coming back", "agent", x.AgentID, "events", x.Events)
		n++
	}
	return n, nil
}

// sweepLoop runs the sweep every Settings.SweepEvery (±20%, so workers started together
// spread out) until ctx ends. A panic in one sweep is recovered, logged and counted by g
// (where "summarizer.sweep"): the next sweep runs as usual.
func (s *Service) sweepLoop(ctx context.Context, g *panics.Guard, publish func(context.Context, *event.SummarizeRequest) error) {
	if s.set.SweepEvery <= 0 {
		return
	}
	for {
		d := time.Duration(float64(s.set.SweepEvery) * (0.8 + 0.4*rand.Float64()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		var err error
		if perr := g.Do("summarizer.sweep", func() { _, err = s.sweep(ctx, publish) }); perr != nil {
			err = perr
		}
		if err != nil && ctx.Err() == nil {
			s.d.Log.Warn("stranded sweep", "err", err)
		}
	}
}
