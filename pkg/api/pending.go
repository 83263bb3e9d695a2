package api

import "time"

// Pending is an agent's work waiting for an extraction.
type Pending struct {
	AgentID int64  `json:"agentId"`
	State   string `json:"state" enum:"leased,idle,cooldown,waiting,stranded,queued" doc:"The first that applies: leased (a worker holds the agent's lease), idle (nothing waits), cooldown (the cooldown runs; its waiter extracts everything after it), waiting (the cooldown is over; the waiter's redelivery is due), stranded (events coalesced behind a waiter that did not come back: the stranded sweep or the next event extracts them), queued (messages not yet extracted and nothing in the agent's record holds them)."`
	Summary string `json:"summary" doc:"Why the agent's conversations are not extracted yet, in a sentence."`
	// Now is the server's clock the view was judged on (a lease is held, a cooldown runs).
	Now   time.Time     `json:"now"`
	Lease *PendingLease `json:"lease,omitempty" doc:"Who holds the agent's lease (absent when free)."`
	// Cooldown is absent when none runs.
	Cooldown *PendingCooldown `json:"cooldown,omitempty" doc:"The agent's extraction cooldown (absent when none runs)."`
	Waiter   *PendingWaiter   `json:"waiter,omitempty" doc:"The one delivery waiting for the cooldown's end (absent when none)."`
	// Coalesced are the events acknowledged into the agent's next extraction.
	Coalesced []PendingEvent `json:"coalesced" doc:"Events acknowledged into the agent's next extraction during the cooldown; their ledger rows are written by that extraction."`
	// Conversations are the registered conversations with messages not yet extracted,
	// oldest pending message first.
	Conversations []PendingConversation `json:"conversations" doc:"Conversations with messages not yet extracted (the agent's next extraction covers them), oldest first, at most 100."`
	// MoreConversations is set when more conversations wait than are listed.
	MoreConversations bool `json:"moreConversations,omitempty"`
}

// PendingLease is the holder of an agent's lease.
type PendingLease struct {
	Owner    string    `json:"owner" example:"summarizer@host/4242" doc:"The worker: its part, host and process id."`
	Purpose  string    `json:"purpose" example:"summarize" doc:"summarize or emergence."`
	Acquired time.Time `json:"acquired"`
	Expires  time.Time `json:"expires" doc:"When the lease ends unless its holder renews it."`
}

// PendingCooldown is an agent's running cooldown.
type PendingCooldown struct {
	Until time.Time `json:"until" doc:"When the agent's next LLM extraction may start."`
	RunID string    `json:"runId,omitempty" doc:"The run that started it."`
}

// PendingWaiter is the delivery waiting for the cooldown's end.
type PendingWaiter struct {
	EventID    string    `json:"eventId"`
	ExpectedBy time.Time `json:"expectedBy" doc:"When it is expected back by (the cooldown's end plus the ack wait and a minute)."`
	Overdue    bool      `json:"overdue" doc:"It did not come back in time (dead-lettered, or its worker died): the next event or the stranded sweep extracts what waits behind it."`
}

// PendingEvent is an event acknowledged into the agent's next extraction.
type PendingEvent struct {
	EventID        string `json:"eventId"`
	ConversationID string `json:"conversationId"`
}

// PendingConversation is a conversation with messages not yet extracted.
type PendingConversation struct {
	ConversationID string `json:"conversationId"`
	// ExtractedThrough is its watermark: messages up to this id are extracted (0: none).
	ExtractedThrough int64     `json:"extractedThrough" doc:"Messages up to this id are extracted (0: none yet)."`
	Messages         int64     `json:"messages" doc:"Messages above the watermark."`
	LastMessageID    int64     `json:"lastMessageId"`
	Since            time.Time `json:"since" doc:"When its oldest message not yet extracted was stored."`
}
