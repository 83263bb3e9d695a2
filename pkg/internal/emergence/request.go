package emergence

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/tracing"
)

// Stream and consumer names.
const (
	// Stream holds emergence requests, mate.memory.emergence.<agentId> (limits retention).
	Stream = bus.StreamEmergence
	// Consumer is the emergence workers' shared durable pull consumer on Stream.
	Consumer = bus.ConsumerEmergence
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

// StreamConfig is MATE_EMERGENCE (bus.EmergenceStreamConfig): limits retention, and a
// duplicate window of at least dupWindow (the scheduler's grace period plus margin).
func StreamConfig(replicas int, maxAge, dupWindow time.Duration) jetstream.StreamConfig {
	return bus.EmergenceStreamConfig(replicas, maxAge, dupWindow)
}

// DupWindow bounds a wanted duplicate window (bus.DupWindow).
func DupWindow(maxAge, want time.Duration) time.Duration { return bus.DupWindow(maxAge, want) }

// Publish stores req on MATE_EMERGENCE with its request id as Nats-Msg-Id. It reports
// whether the server had already stored a request with that id (a duplicate, dropped).
// The trace context of ctx travels in the message headers (tracing.With adds a producer span).
func Publish(ctx context.Context, js jetstream.JetStream, req Request, opts ...tracing.PublishOption) (duplicate bool, err error) {
	return PublishWith(ctx, bus.PublisherOn(js, tracing.From(opts)), req)
}

// PublishWith is Publish through pub.
func PublishWith(ctx context.Context, pub *bus.Publisher, req Request) (duplicate bool, err error) {
	if req.AgentID <= 0 || req.RequestID == "" {
		return false, fmt.Errorf("emergence request needs an agent and a request id: %+v", req)
	}
	ack, err := pub.PublishJSON(ctx, req, bus.Message{Subject: bus.AgentSubject(bus.SubjectEmergence, req.AgentID),
		MsgID: req.RequestID, Stream: Stream})
	if err != nil {
		return false, fmt.Errorf("publish emergence request %s for agent %d: %w", req.RequestID, req.AgentID, err)
	}
	return ack.Duplicate, nil
}
