package summarizer

import (
	"github.com/matememory/matememory/pkg/event"
)

// Kind is what a job comes from; its Policy follows from it.
type Kind int

// Kinds of jobs.
const (
	// KindEvent is a ConversationCompletedEvent.
	KindEvent Kind = iota
	// KindManual is a summarize request someone waits for (the manual summarize endpoint,
	// the console's button): it carries a reply subject.
	KindManual
	// KindFlush is a summarize request nobody waits for (the context window's flush when it
	// evicts unextracted messages): it runs like an event's extraction.
	KindFlush
	// KindSweep is a request of the stranded sweep (sweep.go).
	KindSweep
	// KindReplayedEvent, KindReplayedRequest and KindReplayedSweep are an operator's replay
	// of a stored event, request or sweep request (summarizer replay).
	KindReplayedEvent
	KindReplayedRequest
	KindReplayedSweep
)

// Policy is how a job of a kind is handled.
type Policy struct {
	// Event: the job is an event, so the event pre-checks apply, it may wait for the
	// cooldown as the agent's waiter or be coalesced behind it, and it may wait for its
	// messages to be stored. A request only needs the stored-message minimum.
	Event bool
	// Urgent: someone waits for the outcome. The cooldown does not apply, a held lease is
	// retried soon, and the conversation is extracted completely (one transcript after
	// another). Not urgent: it honours the cooldown, and what one transcript cannot hold
	// waits for the next extraction.
	Urgent bool
	// Retried: a transient failure is retried (redelivered, then dead-lettered). A sweep's
	// is not: its events stay listed, and the next sweep tries again.
	Retried bool
	// Replay: the ledger records the outcome as a replay's.
	Replay bool
}

// policies are the kinds' policies.
var policies = map[Kind]Policy{
	KindEvent:           {Event: true, Retried: true},
	KindManual:          {Urgent: true, Retried: true},
	KindFlush:           {Retried: true},
	KindSweep:           {},
	KindReplayedEvent:   {Event: true, Urgent: true, Retried: true, Replay: true},
	KindReplayedRequest: {Urgent: true, Retried: true, Replay: true},
	KindReplayedSweep:   {Urgent: true, Replay: true},
}

// Job is one delivery to handle: an event or a summarize request.
type Job struct {
	// EventID is the event id or the request id.
	EventID        string
	AgentID        int64
	ConversationID string
	Kind           Kind
	// Event is the completed event (nil for a request).
	Event *event.ConversationCompletedEvent
	// Force (requests) re-extracts a conversation already extracted up to its end: its
	// last transcript's worth of messages, with the same effect key for the same range.
	Force bool
	Delivery
}

// Delivery is what the message runtime tells about the job's delivery and how it wants to
// hear its outcome.
type Delivery struct {
	// Attempt is the delivery number (1 for the first); LastAttempt is true when no
	// redelivery will follow, so a result that wants a retry is dead-lettered instead.
	Attempt     int
	LastAttempt bool
	// Settle, when set, may be called once with the outcome as soon as it is final and
	// recorded, while the agent's lease is still being released (when the outcome does not
	// depend on that release); Handle returns the same outcome after the release is done.
	// The worker acknowledges the delivery there, so that the ack and the release overlap;
	// when Settle was not called, it settles with what Handle returns.
	Settle func(Result)
}

// policy is the job's Policy.
func (j Job) policy() Policy { return policies[j.Kind] }

// forced reports whether the job is a request to re-extract what is extracted already.
func (j Job) forced() bool { return j.Force && !j.policy().Event }

// replayed is the job as an operator's replay runs it.
func (j Job) replayed() Job {
	switch {
	case j.policy().Event:
		j.Kind = KindReplayedEvent
	case j.Kind == KindSweep:
		j.Kind = KindReplayedSweep
	default:
		j.Kind = KindReplayedRequest
	}
	return j
}

// JobFromEvent builds the job of a completed event.
func JobFromEvent(e *event.ConversationCompletedEvent) Job {
	return Job{EventID: e.EventID, AgentID: e.AgentID, ConversationID: e.ConversationID, Kind: KindEvent, Event: e,
		Delivery: Delivery{Attempt: 1}}
}

// JobFromRequest builds the job of a summarize request.
func JobFromRequest(r *event.SummarizeRequest) Job {
	kind := KindFlush
	switch {
	case r.ReplyTo != "":
		kind = KindManual
	case r.Reason == sweepReason:
		kind = KindSweep
	}
	return Job{EventID: r.RequestID, AgentID: r.AgentID, ConversationID: r.ConversationID, Kind: kind, Force: r.Force,
		Delivery: Delivery{Attempt: 1}}
}
