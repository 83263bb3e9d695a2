package client

import (
	"context"
	"github.com/matememory/matememory/pkg/api"
	"net/http"
)

// States of an agent's pending work (Pending.State).
const (
	// PendingStateLeased: a worker holds the agent's lease; events arriving meanwhile are
	// redelivered after it.
	PendingStateLeased = "leased"
	// PendingStateIdle: nothing waits to be extracted.
	PendingStateIdle = "idle"
	// PendingStateCooldown: the agent's cooldown runs; its waiter extracts everything after it.
	PendingStateCooldown = "cooldown"
	// PendingStateWaiting: the cooldown is over and the waiter's redelivery is due.
	PendingStateWaiting = "waiting"
	// PendingStateStranded: events coalesced behind a waiter that did not come back; the
	// workers' stranded sweep or the agent's next event extracts them.
	PendingStateStranded = "stranded"
	// PendingStateQueued: messages not yet extracted and nothing in the agent's record holds
	// them: a deferred delivery comes back, or a failed one needs the next event or a
	// manual summarize.
	PendingStateQueued = "queued"
)

// Pending is what of an agent waits for an extraction, and why: deferred and coalesced
// events have no run in the ledger until their extraction. State is one of the Pending*
// constants.
type Pending = api.Pending

// PendingLease is who holds an agent's lease, and until when unless renewed.
type PendingLease = api.PendingLease

// PendingCooldown is an agent's running cooldown and the run that started it.
type PendingCooldown = api.PendingCooldown

// PendingWaiter is the delivery waiting for the cooldown's end, expected back by
// ExpectedBy (Overdue once that passed).
type PendingWaiter = api.PendingWaiter

// PendingEvent is an event acknowledged into the agent's next extraction.
type PendingEvent = api.PendingEvent

// PendingConversation is a conversation with Messages not yet extracted (those above
// ExtractedThrough), the oldest of them stored at Since.
type PendingConversation = api.PendingConversation

// Pending reads what of the agent waits for an extraction (the answer to "why hasn't my
// conversation been extracted?"). It writes nothing, and does not seed a new agent.
func (c *Client) Pending(ctx context.Context, agentID int64) (*Pending, error) {
	var p Pending
	if _, err := c.do(ctx, request{method: http.MethodGet, path: agentPath(agentID) + "/pending"}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}
