package eventpub_test

import (
	"context"
	"errors"
	"testing"
	"time"

	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/eventpub"
	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/bus/bustest"
)

func valid() *event.ConversationCompletedEvent {
	return &event.ConversationCompletedEvent{EventID: "e1", AgentID: 7, ConversationID: "c1", UserMessage: "hello",
		AssistantReply: "hi", MessageCount: 4, TriggerSource: event.TriggerChannel}
}

func setup(t *testing.T) (bus.Dialer, jetstream.JetStream) {
	t.Helper()
	_, d := bustest.Server(t)
	nc, err := d.Connect("event-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	if _, err := bus.EnsureStream(context.Background(), js, jetstream.StreamConfig{Name: event.Stream,
		Subjects: []string{"mate.conversation.completed.>", "mate.memory.summarize.>"}, Duplicates: time.Minute}); err != nil {
		t.Fatal(err)
	}
	return d, js
}

// publisher connects a Publisher to d, closed with the test.
func publisher(t *testing.T, d bus.Dialer, opts ...eventpub.Option) *eventpub.Publisher {
	t.Helper()
	nc, err := d.Connect("pub")
	if err != nil {
		t.Fatal(err)
	}
	p, err := eventpub.NewPublisher(nc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestPublisherAcksAndDeduplicates(t *testing.T) {
	d, js := setup(t)
	p := publisher(t, d)
	ctx := context.Background()
	e := valid()
	e.EventID = ""
	ack, err := p.PublishCompleted(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	if e.EventID == "" || e.OccurredAt.IsZero() || ack.EventID != e.EventID || ack.Stream != event.Stream || ack.Seq != 1 || ack.Duplicate {
		t.Fatalf("ack %+v event %+v", ack, e)
	}
	again, err := p.PublishCompleted(ctx, e)
	if err != nil || !again.Duplicate || again.Seq != 1 {
		t.Fatalf("duplicate: %+v %v", again, err)
	}
	s, _ := js.Stream(ctx, event.Stream)
	m, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "mate.conversation.completed.7" || m.Header.Get(nats.MsgIdHdr) != "7:"+e.EventID || m.Header.Get(wmnats.WatermillUUIDHdr) != "7:"+e.EventID {
		t.Fatalf("stored %s %v", m.Subject, m.Header)
	}
	back, err := event.DecodeCompleted(m.Data)
	if err != nil || back.EventID != e.EventID || back.AgentID != 7 {
		t.Fatalf("decode %+v %v", back, err)
	}
	if _, err := p.PublishCompleted(ctx, &event.ConversationCompletedEvent{AgentID: 1}); err == nil {
		t.Fatal("invalid event published")
	}
	r := &event.SummarizeRequest{AgentID: 7, ConversationID: "c1"}
	if ack, err := p.PublishSummarize(ctx, r); err != nil || ack.Seq != 2 || r.RequestID == "" {
		t.Fatalf("summarize request %+v %v", ack, err)
	}
}

// TestPublisherCheck: WithCheck sees the event complete and valid, is not asked about an
// invalid one (which is refused as invalid), and its error keeps the event off the stream.
func TestPublisherCheck(t *testing.T) {
	d, js := setup(t)
	p := publisher(t, d)
	ctx := context.Background()
	refused := errors.New("not for this sender")
	var seen []event.ConversationCompletedEvent
	check := func(allow bool) eventpub.PublishOption {
		return eventpub.WithCheck(func(_ context.Context, e *event.ConversationCompletedEvent) error {
			seen = append(seen, *e)
			if !allow {
				return refused
			}
			return nil
		})
	}
	var bad *event.InvalidError
	if _, err := p.PublishCompleted(ctx, &event.ConversationCompletedEvent{AgentID: 0, ConversationID: "c1"}, check(false)); !errors.As(err, &bad) || len(seen) != 0 {
		t.Fatalf("invalid event: %v, checked %d times; want an *InvalidError, unchecked", err, len(seen))
	}
	e := valid()
	e.EventID = ""
	if _, err := p.PublishCompleted(ctx, e, check(false)); !errors.Is(err, refused) {
		t.Fatalf("refused by the check: %v", err)
	}
	if len(seen) != 1 || seen[0].EventID == "" || seen[0].OccurredAt.IsZero() {
		t.Fatalf("the check saw %+v; want one complete event", seen)
	}
	s, _ := js.Stream(ctx, event.Stream)
	if info, err := s.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Fatalf("stream after a refused event: %+v %v; want it empty", info, err)
	}
	if ack, err := p.PublishCompleted(ctx, e, check(true)); err != nil || ack.Seq != 1 || len(seen) != 2 {
		t.Fatalf("allowed by the check: %+v %v (checked %d times)", ack, err, len(seen))
	}
}

func TestPublisherUnavailable(t *testing.T) {
	ns, d := bustest.Server(t)
	p := publisher(t, d, eventpub.WithTimeout(300*time.Millisecond))
	// No stream: JetStream cannot store it.
	if _, err := p.PublishCompleted(context.Background(), valid()); !errors.Is(err, eventpub.ErrUnavailable) {
		t.Fatalf("no stream: %v", err)
	}
	ns.Shutdown()
	ns.WaitForShutdown()
	if _, err := p.PublishCompleted(context.Background(), valid()); !errors.Is(err, eventpub.ErrUnavailable) {
		t.Fatalf("server down: %v", err)
	}
}

// A chat service on watermill publishes with watermill-nats' own publisher; the message on
// the stream is the same: Nats-Msg-Id is "<agentId>:<eventId>", duplicates are dropped.
func TestWatermillPublisherInterop(t *testing.T) {
	d, js := setup(t)
	nc, _ := d.Connect("wm-pub")
	pub, err := wmnats.NewPublisherWithNatsConn(nc, eventpub.WatermillPublisherConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	e := valid()
	msg, err := eventpub.WatermillMessage(e)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := pub.Publish(e.Subject(), msg); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	s, _ := js.Stream(ctx, event.Stream)
	info, _ := s.Info(ctx)
	if info.State.Msgs != 1 {
		t.Fatalf("%d messages stored, want 1 (deduplicated by event id)", info.State.Msgs)
	}
	m, _ := s.GetMsg(ctx, 1)
	if m.Header.Get(nats.MsgIdHdr) != "7:e1" {
		t.Fatalf("Nats-Msg-Id %q", m.Header.Get(nats.MsgIdHdr))
	}
	if back, err := event.DecodeCompleted(m.Data); err != nil || back.ConversationID != "c1" {
		t.Fatalf("decode %+v %v", back, err)
	}
	if _, err := eventpub.WatermillMessage(&event.ConversationCompletedEvent{}); err == nil {
		t.Fatal("invalid event wrapped")
	}
}
