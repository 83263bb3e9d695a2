package bus_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/bus/bustest"
)

func jetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	_, d := bustest.Server(t)
	_, js := bustest.Connect(t, d, "provision-test")
	return js
}

func TestEnsureStreamIdempotentAndConcurrent(t *testing.T) {
	ctx := context.Background()
	js := jetStream(t)
	cfg := jetstream.StreamConfig{Name: "T_EVENTS", Subjects: []string{"t.events.>"}, MaxAge: time.Hour, Duplicates: time.Minute}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := bus.EnsureStream(ctx, js, cfg)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent EnsureStream: %v", err)
		}
	}
	cfg.MaxAge = 2 * time.Hour
	s, err := bus.EnsureStream(ctx, js, cfg)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if got := s.CachedInfo().Config.MaxAge; got != 2*time.Hour {
		t.Fatalf("max age not updated: %v", got)
	}
	cfg.Storage = jetstream.MemoryStorage
	if _, err := bus.EnsureStream(ctx, js, cfg); err == nil {
		t.Fatal("changing the storage type in place should fail")
	}

	ccfg := jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy, MaxDeliver: 3}
	if _, err := bus.EnsureConsumer(ctx, js, "T_EVENTS", ccfg); err != nil {
		t.Fatal(err)
	}
	ccfg.MaxDeliver = 5
	c, err := bus.EnsureConsumer(ctx, js, "T_EVENTS", ccfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.CachedInfo().Config.MaxDeliver != 5 {
		t.Fatalf("consumer not updated")
	}
	if _, err := bus.EnsureConsumer(ctx, js, "T_EVENTS", jetstream.ConsumerConfig{Durable: "x", AckPolicy: jetstream.AckNonePolicy}); err == nil {
		t.Fatal("a consumer without explicit acks must be refused")
	}
}

func TestDeadLetterListRetry(t *testing.T) {
	ctx := context.Background()
	js := jetStream(t)
	if _, err := bus.EnsureStream(ctx, js, jetstream.StreamConfig{Name: "T_EVENTS", Subjects: []string{"t.events.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.EnsureStream(ctx, js, bus.DLQStreamConfig(1, 24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: "t.events.7", Data: []byte("poison"),
		Header: nats.Header{nats.MsgIdHdr: {"evt-1"}, "X-Trace": {"abc"}}}); err != nil {
		t.Fatal(err)
	}
	c, err := bus.EnsureConsumer(ctx, js, "T_EVENTS", jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	l := bus.LetterFrom(msg, "cannot decode:\n not JSON")
	seq1, err := bus.DeadLetter(ctx, js, l)
	if err != nil {
		t.Fatal(err)
	}
	// A second dead-lettering of the same message (crash before the ack) is stored once.
	seq2, err := bus.DeadLetter(ctx, js, l)
	if err != nil {
		t.Fatal(err)
	}
	if seq1 != seq2 {
		t.Fatalf("same message dead-lettered twice: seq %d and %d", seq1, seq2)
	}
	if err := msg.Term(); err != nil {
		t.Fatal(err)
	}

	list, err := bus.ListDeadLetters(ctx, js, 0, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("want 1 dead letter, got %d", len(list))
	}
	e := list[0]
	if e.Subject != "t.events.7" || e.Reason != "cannot decode: not JSON" || e.Stream != "T_EVENTS" || e.StreamSeq != 1 ||
		e.Deliveries != 1 || e.Consumer != "w" || e.MsgID != "evt-1" || string(e.Data) != "poison" || e.Header.Get("X-Trace") != "abc" {
		t.Fatalf("dead letter entry: %+v", e)
	}

	r, err := bus.RetryDeadLetter(ctx, js, e.Seq)
	if err != nil {
		t.Fatal(err)
	}
	if r.Subject != "t.events.7" || r.Stream != "T_EVENTS" || r.Seq != 2 || r.Duplicate {
		t.Fatalf("retry: %+v", r)
	}
	again, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if string(again.Data()) != "poison" || again.Headers().Get(bus.HeaderRetryOf) == "" || again.Headers().Get(bus.HeaderDLQReason) != "" ||
		again.Headers().Get("X-Trace") != "abc" {
		t.Fatalf("retried message headers: %v", again.Headers())
	}
	if _, err := bus.GetDeadLetter(ctx, js, e.Seq); !errors.Is(err, bus.ErrDeadLetterNotFound) {
		t.Fatalf("retried dead letter should be removed, got %v", err)
	}
	if _, err := bus.RetryDeadLetter(ctx, js, 999); !errors.Is(err, bus.ErrDeadLetterNotFound) {
		t.Fatalf("unknown seq: %v", err)
	}
}

// Issue 9 point 17: concurrent retries of one dead letter republish it once; a caller that
// loses the race gets the answer for a letter already retried (not found), not a failure.
func TestConcurrentRetriesOfOneDeadLetter(t *testing.T) {
	ctx := context.Background()
	js := jetStream(t)
	if _, err := bus.EnsureStream(ctx, js, jetstream.StreamConfig{Name: "T_EVENTS", Subjects: []string{"t.events.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.EnsureStream(ctx, js, bus.DLQStreamConfig(1, 24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 10; round++ {
		seq, err := bus.DeadLetter(ctx, js, bus.Letter{Subject: "t.events.7", Data: []byte("x"),
			Header: nats.Header{nats.MsgIdHdr: {fmt.Sprintf("evt-%d", round)}}, Reason: "test"})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var ok atomic.Int32
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := bus.RetryDeadLetter(ctx, js, seq)
				switch {
				case err == nil:
					ok.Add(1)
				case !errors.Is(err, bus.ErrDeadLetterNotFound):
					t.Errorf("round %d: concurrent retry: %v", round, err)
				}
			}()
		}
		wg.Wait()
		if ok.Load() < 1 {
			t.Fatalf("round %d: no retry succeeded", round)
		}
	}
	s, _ := js.Stream(ctx, "T_EVENTS")
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs != 10 {
		t.Fatalf("republished %d messages for 10 letters: %v", info.State.Msgs, err)
	}
}
