package client

import (
	"context"
	"net/http"
	"time"
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
// events have no run in the ledger until their extraction.
type Pending struct {
	AgentID int64 `json:"agentId"`
	// State is one of the Pending* constants; Summary says why in a sentence.
	State   string `json:"state"`
	Summary string `json:"summary"`
	// Now is the server's clock the view was judged on.
	Now time.Time `json:"now"`
	// Lease, Cooldown and Waiter are nil when no lease is held, no cooldown runs, no
	// delivery waits for the cooldown's end.
	Lease    *PendingLease    `json:"lease,omitempty"`
	Cooldown *PendingCooldown `json:"cooldown,omitempty"`
	Waiter   *PendingWaiter   `json:"waiter,omitempty"`
	// Coalesced are events acknowledged into the agent's next extraction.
	Coalesced []PendingEvent `json:"coalesced"`
	// Conversations have messages not yet extracted, oldest first (at most 100;
	// MoreConversations when more wait).
	Conversations     []PendingConversation `json:"conversations"`
	MoreConversations bool                  `json:"moreConversations,omitempty"`
}

// PendingLease is who holds an agent's lease, and until when unless renewed.
type PendingLease struct {
	Owner    string    `json:"owner"`
	Purpose  string    `json:"purpose"`
	Acquired time.Time `json:"acquired"`
	Expires  time.Time `json:"expires"`
}

// PendingCooldown is an agent's running cooldown and the run that started it.
type PendingCooldown struct {
	Until time.Time `json:"until"`
	RunID string    `json:"runId,omitempty"`
}

// PendingWaiter is the delivery waiting for the cooldown's end, expected back by
// ExpectedBy (Overdue once that passed).
type PendingWaiter struct {
	EventID    string    `json:"eventId"`
	ExpectedBy time.Time `json:"expectedBy"`
	Overdue    bool      `json:"overdue"`
}

// PendingEvent is an event acknowledged into the agent's next extraction.
type PendingEvent struct {
	EventID        string `json:"eventId"`
	ConversationID string `json:"conversationId"`
}

// PendingConversation is a conversation with Messages not yet extracted (those above
// ExtractedThrough), the oldest of them stored at Since.
type PendingConversation struct {
	ConversationID   string    `json:"conversationId"`
	ExtractedThrough int64     `json:"extractedThrough"`
	Messages         int64     `json:"messages"`
	LastMessageID    int64     `json:"lastMessageId"`
	Since            time.Time `json:"since"`
}

// Pending reads what of the agent waits for an extraction (the answer to "why hasn't my
// conversation been extracted?"). It writes nothing, and does not seed a new agent.
func (c *Client) Pending(ctx context.Context, agentID int64) (*Pending, error) {
	var p Pending
	if _, err := c.do(ctx, request{method: http.MethodGet, path: agentPath(agentID) + "/pending"}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}
