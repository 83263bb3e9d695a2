package bus

import (
	"context"
	"errors"
	"fmt"
	"github.com/matememory/matememory/pkg/api"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/tracing"
)

// ErrDeadLetterNotFound: no dead letter with that sequence.
var ErrDeadLetterNotFound = errors.New("dead letter not found")

// HeaderRetryOf is set on a message republished from the dead-letter stream: the dead
// letter's sequence.
const HeaderRetryOf = "Mate-Retry-Of"

// DeadLetterEntry is a stored dead letter.
type DeadLetterEntry struct {
	// Seq is the dead letter's sequence in MATE_DLQ (what retry takes).
	Seq uint64 `json:"seq"`
	// Subject is the original subject.
	Subject    string    `json:"subject"`
	Reason     string    `json:"reason"`
	Stream     string    `json:"stream,omitempty"`
	StreamSeq  uint64    `json:"streamSeq,omitempty"`
	Consumer   string    `json:"consumer,omitempty"`
	Deliveries uint64    `json:"deliveries,omitempty"`
	MsgID      string    `json:"msgId,omitempty"`
	Time       time.Time `json:"time"`
	// Data is the original payload.
	Data   []byte      `json:"-"`
	Header nats.Header `json:"-"`
}

func entryFrom(m *jetstream.RawStreamMsg) DeadLetterEntry {
	h := m.Header
	e := DeadLetterEntry{Seq: m.Sequence, Subject: h.Get(HeaderDLQSubject), Reason: h.Get(HeaderDLQReason),
		Stream: h.Get(HeaderDLQStream), Consumer: h.Get(HeaderDLQConsumer), MsgID: h.Get(HeaderDLQMsgID),
		Time: m.Time, Data: m.Data, Header: h}
	if e.Subject == "" {
		e.Subject = strings.TrimPrefix(m.Subject, SubjectDeadLetter+".")
	}
	e.StreamSeq, _ = strconv.ParseUint(h.Get(HeaderDLQSeq), 10, 64)
	e.Deliveries, _ = strconv.ParseUint(h.Get(HeaderDLQDeliveries), 10, 64)
	return e
}

// ListDeadLetters returns up to limit dead letters with a sequence above after, oldest
// first; subject, when set, filters by dead-letter subject (wildcards allowed, e.g.
// "mate.dlq.mate.conversation.completed.7").
func ListDeadLetters(ctx context.Context, js jetstream.JetStream, after uint64, subject string, limit int) ([]DeadLetterEntry, error) {
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	if subject == "" {
		subject = SubjectDeadLetter + ".>"
	}
	s, err := js.Stream(ctx, StreamDLQ)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", StreamDLQ, err)
	}
	var out []DeadLetterEntry
	seq := after + 1
	for len(out) < limit {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("read %s from seq %d: %w", StreamDLQ, seq, err)
		}
		out = append(out, entryFrom(m))
		seq = m.Sequence + 1
	}
	return out, nil
}

// GetDeadLetter reads one dead letter.
func GetDeadLetter(ctx context.Context, js jetstream.JetStream, seq uint64) (DeadLetterEntry, error) {
	s, err := js.Stream(ctx, StreamDLQ)
	if err != nil {
		return DeadLetterEntry{}, fmt.Errorf("open %s: %w", StreamDLQ, err)
	}
	m, err := s.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return DeadLetterEntry{}, fmt.Errorf("%w: seq %d", ErrDeadLetterNotFound, seq)
	}
	if err != nil {
		return DeadLetterEntry{}, fmt.Errorf("read dead letter %d: %w", seq, err)
	}
	return entryFrom(m), nil
}

// Retried is where a retried dead letter was stored again.
type Retried = api.RetriedLetter

// RetryDeadLetter publishes dead letter seq again on its original subject (with its
// original headers, HeaderRetryOf set and the Mate-Dlq-* headers removed), then deletes it
// from the dead-letter stream. The republished message's Nats-Msg-Id is
// "<original id>:retry:<seq>", so retrying the same dead letter twice (a lost answer, a
// double click) stores it once within the duplicate window. The original trace context is
// replaced by ctx's: the retry belongs to the request that asked for it.
func RetryDeadLetter(ctx context.Context, js jetstream.JetStream, seq uint64, opts ...tracing.PublishOption) (Retried, error) {
	e, err := GetDeadLetter(ctx, js, seq)
	if err != nil {
		return Retried{}, err
	}
	h := nats.Header{}
	for k, v := range e.Header {
		if strings.HasPrefix(k, "Mate-Dlq-") || k == nats.MsgIdHdr || strings.HasPrefix(k, "Nats-Expected-") {
			continue
		}
		h[k] = v
	}
	h.Set(HeaderRetryOf, strconv.FormatUint(seq, 10))
	tr := tracing.From(opts)
	tr.Strip(h)
	id := e.MsgID
	if id == "" {
		id = "dlq"
	}
	ack, err := tr.PublishMsg(ctx, js, &nats.Msg{Subject: e.Subject, Data: e.Data, Header: h},
		jetstream.WithMsgID(fmt.Sprintf("%s:retry:%d", id, seq)))
	if err != nil {
		return Retried{}, fmt.Errorf("republish dead letter %d on %s: %w", seq, e.Subject, err)
	}
	s, err := js.Stream(ctx, StreamDLQ)
	if err == nil {
		err = s.DeleteMsg(ctx, seq)
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			if _, gerr := s.GetMsg(ctx, seq); errors.Is(gerr, jetstream.ErrMsgNotFound) {
				// A concurrent retry of the same letter removed it first (its republish and
				// ours are one message, by Nats-Msg-Id): answer as for a letter already retried.
				return Retried{}, fmt.Errorf("%w: seq %d (retried meanwhile by another request)", ErrDeadLetterNotFound, seq)
			}
		}
	}
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return Retried{}, fmt.Errorf("republished dead letter %d as %s seq %d but could not remove it from %s: %w",
			seq, ack.Stream, ack.Sequence, StreamDLQ, err)
	}
	return Retried{Subject: e.Subject, Stream: ack.Stream, Seq: ack.Sequence, Duplicate: ack.Duplicate}, nil
}
