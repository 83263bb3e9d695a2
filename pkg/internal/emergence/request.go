package emergence

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/tracing"
)

// Stream and consumer names.
const (
	// Stream holds emergence requests, mate.memory.emergence.<agentId> (limits retention).
	Stream = "MATE_EMERGENCE"
	// Consumer is the emergence workers' shared durable pull consumer on Stream.
	Consumer = "emergence"
)

// Sources of a request.
const (
	SourceCron   = "cron"
	SourceManual = "manual"
)

// Request asks the emergence worker to consolidate an agent's daily notes into MEMORY.md.
// The scheduler publishes one per cron slot; the API publishes one per manual trigger.
type Request struct {
	// RequestID is also the message's Nats-Msg-Id and the ledger row's event id:
	// "cron:<jobId>:<slot RFC 3339>" for a cron slot, "manual:<uuid>" for a manual trigger.
	RequestID string `json:"requestId"`
	AgentID   int64  `json:"agentId"`
	// Source is "cron" or "manual".
	Source string `json:"source"`
	// JobID and Slot name the cron job and slot that fired (cron requests).
	JobID int64      `json:"jobId,omitempty"`
	Slot  *time.Time `json:"slot,omitempty"`
	// ReplyTo, when set, is a core NATS subject the worker publishes each attempt's Outcome
	// on (the manual trigger waits there).
	ReplyTo   string    `json:"replyTo,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// CronRequestID is the request id (and message id) of a cron slot.
func CronRequestID(jobID int64, slot time.Time) string {
	return fmt.Sprintf("cron:%d:%s", jobID, slot.UTC().Format(time.RFC3339))
}

// Outcome is what an attempt did, as the manual trigger reports it.
type Outcome struct {
	RequestID string `json:"requestId"`
	RunID     string `json:"runId"`
	// Status is the ledger status: completed, skipped, refused, failed.
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Retrying is true when the attempt failed transiently and the request will be
	// delivered again.
	Retrying bool `json:"retrying,omitempty"`
}

// StreamConfig is MATE_EMERGENCE: limits retention so requests stay replayable for maxAge,
// and a duplicate window of at least dupWindow (the scheduler's grace period plus margin):
// a slot re-published after a scheduler crash between publishing and recording it is
// stored once.
func StreamConfig(replicas int, maxAge, dupWindow time.Duration) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        Stream,
		Description: "MateMemory emergence requests (cron slots and manual triggers)",
		Subjects:    []string{bus.SubjectEmergence + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
		MaxAge:      maxAge,
		Discard:     jetstream.DiscardOld,
		Duplicates:  DupWindow(maxAge, dupWindow),
	}
}

// DupWindow bounds a wanted duplicate window: at least 2 minutes, at most maxAge (the
// server refuses a window longer than the stream keeps messages).
func DupWindow(maxAge, want time.Duration) time.Duration {
	w := max(want, 2*time.Minute)
	if maxAge > 0 && w > maxAge {
		w = maxAge
	}
	return w
}

// Publish stores req on MATE_EMERGENCE with its request id as Nats-Msg-Id. It reports
// whether the server had already stored a request with that id (a duplicate, dropped).
// The trace context of ctx travels in the message headers (tracing.With adds a producer span).
func Publish(ctx context.Context, js jetstream.JetStream, req Request, opts ...tracing.PublishOption) (duplicate bool, err error) {
	if req.AgentID <= 0 || req.RequestID == "" {
		return false, fmt.Errorf("emergence request needs an agent and a request id: %+v", req)
	}
	data, err := json.Marshal(req)
	if err != nil {
		return false, err
	}
	msg := &nats.Msg{Subject: bus.AgentSubject(bus.SubjectEmergence, req.AgentID), Data: data, Header: nats.Header{}}
	ack, err := tracing.From(opts).PublishMsg(ctx, js, msg, jetstream.WithMsgID(req.RequestID), jetstream.WithExpectStream(Stream))
	if err != nil {
		return false, fmt.Errorf("publish emergence request %s for agent %d: %w", req.RequestID, req.AgentID, err)
	}
	return ack.Duplicate, nil
}
