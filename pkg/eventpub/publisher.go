// Package eventpub publishes MateMemory events (pkg/event) on JetStream and returns once the
// stream has stored them. Chat services in Go import it; pkg/event, the contract, imports
// nothing but the standard library.
package eventpub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/tracing"
)

// ErrUnavailable: JetStream did not confirm it stored the event (no connection, no
// JetStream, stream missing, timeout). The event may or may not be stored; publishing it
// again with the same EventID is safe (deduplicated within the stream's window).
var ErrUnavailable = errors.New("jetstream unavailable: the event was not confirmed stored")

// ErrTooLarge: the event exceeds the server's maximum message size.
var ErrTooLarge = errors.New("event too large for the message bus")

// Publisher publishes events on JetStream and waits for the stream's acknowledgement.
//
// It uses nats.go's JetStream publish rather than watermill-nats' Publisher: watermill's
// Publish waits for the acknowledgement but discards it, and the stream sequence and the
// duplicate flag in it are what the API's 202 answer reports. The message on the wire is
// the one watermill would produce (Nats-Msg-Id and the watermill UUID header both equal
// the event id), so watermill publishers (WatermillPublisherConfig) and subscribers
// interoperate with it.
type Publisher struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	timeout time.Duration
	owned   bool
	tracing tracing.Messaging
}

// Option configures a Publisher.
type Option func(*Publisher)

// WithTimeout bounds how long a publish waits for the stream's acknowledgement (default 5s).
func WithTimeout(d time.Duration) Option { return func(p *Publisher) { p.timeout = d } }

// WithTracing starts a producer span per publish with t and carries its context in the
// message headers (W3C traceparent by default). Without it, the trace context already in
// ctx is still carried, but no span is recorded.
func WithTracing(t tracing.Messaging) Option { return func(p *Publisher) { p.tracing = t } }

// WithSharedConn makes Close leave the connection open (by default the publisher owns it).
func WithSharedConn() Option { return func(p *Publisher) { p.owned = false } }

// NewPublisher publishes over nc, which it owns and closes on Close unless WithSharedConn.
func NewPublisher(nc *nats.Conn, opts ...Option) (*Publisher, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream context: %w", err)
	}
	p := &Publisher{nc: nc, js: js, timeout: 5 * time.Second, owned: true}
	for _, o := range opts {
		o(p)
	}
	return p, nil
}

// Close closes the connection (if owned).
func (p *Publisher) Close() {
	if p.owned {
		p.nc.Close()
	}
}

// PublishCompleted completes (id, time), validates and publishes e, and returns once
// JetStream has stored it. An invalid event is an *InvalidError and is not published.
func (p *Publisher) PublishCompleted(ctx context.Context, e *event.ConversationCompletedEvent, opts ...PublishOption) (event.Ack, error) {
	e.Complete(time.Now())
	if err := e.Validate(); err != nil {
		return event.Ack{}, err
	}
	var o publishOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.check != nil {
		if err := o.check(ctx, e); err != nil {
			return event.Ack{}, err
		}
	}
	data, err := json.Marshal(e)
	if err != nil {
		return event.Ack{}, fmt.Errorf("encode event: %w", err)
	}
	return p.publish(ctx, e.Subject(), event.MsgID(e.AgentID, e.EventID), data, nil)
}

// PublishOption configures one PublishCompleted.
type PublishOption func(*publishOptions)

type publishOptions struct {
	check func(context.Context, *event.ConversationCompletedEvent) error
}

// WithCheck runs check on the event once it is complete and valid, before it is published;
// an error from check is returned and nothing is published. A service that takes events
// from others checks there what the event alone cannot say (may its sender publish for the
// agent?), so that an invalid event is refused as invalid whoever sent it, and validated once.
func WithCheck(check func(ctx context.Context, e *event.ConversationCompletedEvent) error) PublishOption {
	return func(o *publishOptions) { o.check = check }
}

// PublishSummarize publishes a manual summarize request (RequestID and RequestedAt are
// filled when empty).
func (p *Publisher) PublishSummarize(ctx context.Context, r *event.SummarizeRequest) (event.Ack, error) {
	if r.RequestID == "" {
		r.RequestID = uuid.NewString()
	}
	if r.RequestedAt.IsZero() {
		r.RequestedAt = time.Now().UTC()
	}
	if err := r.Validate(); err != nil {
		return event.Ack{}, err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return event.Ack{}, fmt.Errorf("encode summarize request: %w", err)
	}
	return p.publish(ctx, event.SummarizeSubject(r.AgentID), event.MsgID(r.AgentID, r.RequestID), data, nil)
}

// publish stores data under the message id msgID (see MsgID); the Ack reports the caller's
// own id (the part after the agent prefix).
func (p *Publisher) publish(ctx context.Context, subject, msgID string, data []byte, h nats.Header) (event.Ack, error) {
	_, id, _ := strings.Cut(msgID, ":")
	if h == nil {
		h = nats.Header{}
	}
	h.Set(event.HeaderWatermillUUID, msgID)
	h.Set(event.HeaderContentType, "application/json")
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	ack, err := p.tracing.PublishMsg(ctx, p.js, &nats.Msg{Subject: subject, Data: data, Header: h},
		jetstream.WithMsgID(msgID), jetstream.WithExpectStream(event.Stream))
	if err != nil {
		if errors.Is(err, nats.ErrMaxPayload) {
			return event.Ack{}, fmt.Errorf("%w: %d bytes, the server accepts at most %d", ErrTooLarge, len(data), p.nc.MaxPayload())
		}
		return event.Ack{}, fmt.Errorf("%w: publish %s on %s: %v", ErrUnavailable, id, subject, err)
	}
	return event.Ack{EventID: id, Stream: ack.Stream, Seq: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// WatermillPublisherConfig configures a watermill-nats (pkg/nats) publisher for chat
// services already built on watermill: JetStream on, AutoProvision off (the stream is
// MateMemory's, provisioned by its processes), TrackMsgId on so that Nats-Msg-Id is the
// message UUID, which WatermillMessage sets to event.MsgID(agentId, eventId). Publish it on the topic
// e.Subject(). Such a publish waits for JetStream's acknowledgement but does not return
// the stream sequence; use Publisher when you need it.
func WatermillPublisherConfig() wmnats.PublisherPublishConfig {
	return wmnats.PublisherPublishConfig{
		Marshaler:         &wmnats.NATSMarshaler{},
		SubjectCalculator: wmnats.DefaultSubjectCalculator,
		JetStream: wmnats.JetStreamConfig{
			AutoProvision: false,
			TrackMsgId:    true,
		},
	}
}

// WatermillMessage completes and validates e and wraps it as a watermill message whose
// UUID is event.MsgID(e.AgentID, e.EventID), the stream's deduplication id.
func WatermillMessage(e *event.ConversationCompletedEvent) (*message.Message, error) {
	e.Complete(time.Now())
	if err := e.Validate(); err != nil {
		return nil, err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	m := message.NewMessage(event.MsgID(e.AgentID, e.EventID), data)
	m.Metadata.Set(event.HeaderContentType, "application/json")
	return m, nil
}
