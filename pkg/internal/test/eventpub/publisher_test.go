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

func TestPublisherAcksAndDeduplicates(t *testing.T) {
	d, js := setup(t)
	nc, _ := d.Connect("pub")
	p, err := eventpub.NewPublisher(nc)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
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

func TestPublisherUnavailable(t *testing.T) {
	ns, d := bustest.Server(t)
	nc, _ := d.Connect("pub")
	p, _ := eventpub.NewPublisher(nc, eventpub.WithTimeout(300*time.Millisecond))
	defer p.Close()
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
