package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/eventpub"
	"github.com/matememory/matememory/pkg/internal/tracing"
)

// Publisher is the one publisher of MateMemory's own code: event intake and the stranded
// sweep (through pkg/eventpub, the publisher chat services use, so an event published by
// the API is the same message a chat service would publish), the context window's flush,
// the emergence requests and the scheduler's triggers. Every publish waits for JetStream's
// acknowledgement, names the stream it expects and carries the trace context of ctx.
type Publisher struct {
	js     jetstream.JetStream
	events *eventpub.Publisher
	tr     tracing.Messaging
}

// NewPublisher publishes over nc, which stays the caller's; tr adds producer spans.
func NewPublisher(nc *nats.Conn, tr tracing.Messaging) (*Publisher, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream context: %w", err)
	}
	events, err := eventpub.NewPublisher(nc, eventpub.WithSharedConn(), eventpub.WithTracing(tr))
	if err != nil {
		return nil, err
	}
	return &Publisher{js: js, events: events, tr: tr}, nil
}

// PublisherOn publishes with js (no events: Events is nil); for the emergence request and
// trigger publishers that share a caller's JetStream context.
func PublisherOn(js jetstream.JetStream, tr tracing.Messaging) *Publisher {
	return &Publisher{js: js, tr: tr}
}

// Events is the event publisher (pkg/eventpub): ConversationCompletedEvent and summarize
// requests with eventpub's validation, message ids and errors.
func (p *Publisher) Events() *eventpub.Publisher { return p.events }

// Message is a message for one of MateMemory's streams.
type Message struct {
	Subject string
	// MsgID is the Nats-Msg-Id: a second publish within the stream's duplicate window is
	// dropped (PubAck.Duplicate).
	MsgID string
	// Stream is the stream expected to store it (a publish no stream takes fails).
	Stream string
	Data   []byte
	Header nats.Header
	// Watermill marks the message as pkg/eventpub does (the watermill UUID header set to
	// MsgID, Content-Type application/json), so watermill consumers read it alike.
	Watermill bool
	// Timeout bounds the publish (0: ctx alone); NoRetry makes one attempt (no retry on "no
	// responders").
	Timeout time.Duration
	NoRetry bool
}

// Publish stores m and returns JetStream's acknowledgement.
func (p *Publisher) Publish(ctx context.Context, m Message) (*jetstream.PubAck, error) {
	h := m.Header
	if h == nil {
		h = nats.Header{}
	}
	if m.Watermill {
		h.Set(event.HeaderWatermillUUID, m.MsgID)
		h.Set(event.HeaderContentType, "application/json")
	}
	if m.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, m.Timeout)
		defer cancel()
	}
	opts := []jetstream.PublishOpt{jetstream.WithMsgID(m.MsgID), jetstream.WithExpectStream(m.Stream)}
	if m.NoRetry {
		opts = append(opts, jetstream.WithRetryAttempts(0))
	}
	return p.tr.PublishMsg(ctx, p.js, &nats.Msg{Subject: m.Subject, Data: m.Data, Header: h}, opts...)
}

// PublishJSON is Publish with v encoded as the data.
func (p *Publisher) PublishJSON(ctx context.Context, v any, m Message) (*jetstream.PubAck, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", m.Subject, err)
	}
	m.Data = data
	return p.Publish(ctx, m)
}
