package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Provisioning conventions (DESIGN.md §8): every process creates the streams and durable
// consumers it uses at start-up, idempotently, and never lets a client library create them
// implicitly (watermill's AutoProvision names a stream after the topic; a durable created
// by a subscription is deleted when the subscription closes). Workers then bind to the
// durable by name.

// EnsureStream creates the stream or updates it to cfg. It is idempotent and safe when
// several processes start at once, and waits for a cluster that does not answer yet
// (Retry). Settings the server cannot change in place (storage type, retention of a
// work-queue stream, ...) fail at once with an error naming the stream.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	if cfg.Name == "" {
		return nil, errors.New("ensure stream: a stream name is required")
	}
	return Retry(ctx, fmt.Sprintf("provision stream %s (subjects %s)", cfg.Name, strings.Join(cfg.Subjects, ", ")),
		func(ctx context.Context) (jetstream.Stream, error) { return js.CreateOrUpdateStream(ctx, cfg) })
}

// EnsureConsumer creates the durable consumer cfg.Durable on stream, or updates it to cfg,
// waiting for the cluster like EnsureStream. The consumer must be durable with explicit
// acks: a worker that dies mid-message leaves it unacknowledged and JetStream redelivers
// it after AckWait.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	if cfg.Durable == "" {
		return nil, fmt.Errorf("provision consumer on %s: a durable name is required", stream)
	}
	if cfg.AckPolicy != jetstream.AckExplicitPolicy {
		return nil, fmt.Errorf("provision consumer %s on %s: AckPolicy must be explicit (acks are manual)", cfg.Durable, stream)
	}
	return Retry(ctx, fmt.Sprintf("provision consumer %s on stream %s", cfg.Durable, stream),
		func(ctx context.Context) (jetstream.Consumer, error) {
			return js.CreateOrUpdateConsumer(ctx, stream, cfg)
		})
}

// EnsureKeyValue creates the KV bucket or updates it to cfg, waiting for the cluster like
// EnsureStream.
func EnsureKeyValue(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("ensure kv bucket: a bucket name is required")
	}
	return Retry(ctx, "provision kv bucket "+cfg.Bucket,
		func(ctx context.Context) (jetstream.KeyValue, error) { return js.CreateOrUpdateKeyValue(ctx, cfg) })
}

// Dead-letter headers. The original message's headers are kept as they were, except
// Nats-Msg-Id, which moves to HeaderDLQMsgID (the dead letter gets its own id).
const (
	HeaderDLQReason     = "Mate-Dlq-Reason"
	HeaderDLQSubject    = "Mate-Dlq-Subject"
	HeaderDLQStream     = "Mate-Dlq-Stream"
	HeaderDLQSeq        = "Mate-Dlq-Stream-Seq"
	HeaderDLQConsumer   = "Mate-Dlq-Consumer"
	HeaderDLQDeliveries = "Mate-Dlq-Deliveries"
	HeaderDLQTime       = "Mate-Dlq-Time"
	HeaderDLQMsgID      = "Mate-Dlq-Msg-Id"
)

// Letter is a message given up on.
type Letter struct {
	// Subject is the original subject (mate.conversation.completed.7, ...).
	Subject string
	Data    []byte
	// Header is the original message's headers (copied, not modified).
	Header nats.Header
	// Reason says why it was given up on; operators read it.
	Reason string
	// Stream, Seq, Consumer and Deliveries locate the original (zero when unknown).
	Stream     string
	Seq        uint64
	Consumer   string
	Deliveries uint64
}

// LetterFrom builds a Letter from a message received through the jetstream package.
func LetterFrom(msg jetstream.Msg, reason string) Letter {
	l := Letter{Subject: msg.Subject(), Data: msg.Data(), Header: msg.Headers(), Reason: reason}
	if md, err := msg.Metadata(); err == nil {
		l.Stream, l.Seq, l.Consumer, l.Deliveries = md.Stream, md.Sequence.Stream, md.Consumer, md.NumDelivered
	}
	return l
}

// LetterFromNATS builds a Letter from a message received through nats.go's legacy
// JetStreamContext (what watermill-nats' pkg/nats hands its unmarshaler).
func LetterFromNATS(msg *nats.Msg, reason string) Letter {
	l := Letter{Subject: msg.Subject, Data: msg.Data, Header: msg.Header, Reason: reason}
	if md, err := msg.Metadata(); err == nil {
		l.Stream, l.Seq, l.Consumer, l.Deliveries = md.Stream, md.Sequence.Stream, md.Consumer, md.NumDelivered
	}
	return l
}

// DeadLetterSubject is mate.dlq.<original subject>.
func DeadLetterSubject(original string) string { return SubjectDeadLetter + "." + original }

// DeadLetter stores l on the dead-letter stream (MATE_DLQ, which must exist) and returns
// its sequence there. The reason, original stream, sequence and delivery count go in
// Mate-Dlq-* headers. When the original sequence is known the dead letter's Nats-Msg-Id is
// "dlq:<stream>:<seq>", so dead-lettering the same message twice (a crash between this call
// and the ack of the original) stores it once.
//
// Call it before acknowledging (or terminating) the original: if it fails, leave the
// original unacknowledged so it is redelivered, never drop it.
func DeadLetter(ctx context.Context, js jetstream.JetStream, l Letter) (uint64, error) {
	if l.Subject == "" {
		return 0, errors.New("dead letter: the original subject is required")
	}
	h := nats.Header{}
	for k, v := range l.Header {
		// The publish preconditions were for the original stream.
		if k == nats.MsgIdHdr || strings.HasPrefix(k, "Nats-Expected-") {
			continue
		}
		h[k] = append([]string(nil), v...)
	}
	if id := l.Header.Get(nats.MsgIdHdr); id != "" {
		h.Set(HeaderDLQMsgID, id)
	}
	reason := l.Reason
	if reason == "" {
		reason = "unspecified"
	}
	// Header values must be one line.
	h.Set(HeaderDLQReason, strings.Join(strings.Fields(reason), " "))
	h.Set(HeaderDLQSubject, l.Subject)
	h.Set(HeaderDLQTime, time.Now().UTC().Format(time.RFC3339Nano))
	if l.Stream != "" {
		h.Set(HeaderDLQStream, l.Stream)
	}
	if l.Seq > 0 {
		h.Set(HeaderDLQSeq, strconv.FormatUint(l.Seq, 10))
	}
	if l.Consumer != "" {
		h.Set(HeaderDLQConsumer, l.Consumer)
	}
	if l.Deliveries > 0 {
		h.Set(HeaderDLQDeliveries, strconv.FormatUint(l.Deliveries, 10))
	}
	opts := []jetstream.PublishOpt{jetstream.WithExpectStream(StreamDLQ)}
	if l.Seq > 0 && l.Stream != "" {
		opts = append(opts, jetstream.WithMsgID(fmt.Sprintf("dlq:%s:%d", l.Stream, l.Seq)))
	}
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: DeadLetterSubject(l.Subject), Data: l.Data, Header: h}, opts...)
	if err != nil {
		return 0, fmt.Errorf("dead-letter %s (seq %d) to %s: %w", l.Subject, l.Seq, StreamDLQ, err)
	}
	return ack.Sequence, nil
}
