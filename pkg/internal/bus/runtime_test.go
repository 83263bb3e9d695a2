package bus_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/bus/bustest"
)

// rtRig is a stream, its durable (MaxDeliver 3) and MATE_DLQ on an embedded server.
type rtRig struct {
	js jetstream.JetStream
	d  bus.Dialer
}

func newRTRig(t *testing.T, dlq bool) rtRig {
	t.Helper()
	_, d := bustest.Server(t)
	nc, err := d.Connect("runtime-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if _, err := bus.EnsureStream(ctx, js, jetstream.StreamConfig{Name: "T_RT", Subjects: []string{"t.rt.>"}}); err != nil {
		t.Fatal(err)
	}
	if dlq {
		if _, err := bus.EnsureStream(ctx, js, bus.DLQStreamConfig(1, time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bus.EnsureConsumer(ctx, js, "T_RT", jetstream.ConsumerConfig{Durable: "rt", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 3 * time.Second, MaxDeliver: 3}); err != nil {
		t.Fatal(err)
	}
	return rtRig{js: js, d: d}
}

func (r rtRig) bind(t *testing.T, h bus.Handler[string], opts ...bus.Option) *bus.Runtime[string] {
	t.Helper()
	nc, err := r.d.Connect("runtime-worker")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	opts = append([]bus.Option{bus.WithLogger(slog.New(slog.DiscardHandler)), bus.WithConcurrency(2),
		bus.WithBackoff(bus.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond})}, opts...)
	rt, err := bus.Bind(context.Background(), nc, "T_RT", "rt", h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Stop)
	return rt
}

func decodeText(msg jetstream.Msg) (string, error) {
	if s := string(msg.Data()); s != "poison" {
		return s, nil
	}
	return "", errors.New("bad payload")
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// The runtime maps each outcome to JetStream in one place: ack, NAK with a delay, dead
// letter then terminate; a poison message and a panic on every delivery end on MATE_DLQ with
// their reason, a panic before the last delivery is retried, and a handler can settle early.
func TestRuntimeSettlesOutcomes(t *testing.T) {
	r := newRTRig(t, true)
	var mu sync.Mutex
	actions := map[string][]string{}
	causes := map[string]string{}
	early := map[string]bool{}
	h := bus.Handler[string]{
		Decode: decodeText,
		Where:  "test.handle",
		Handle: func(ctx context.Context, d *bus.Delivery[string]) bus.Outcome {
			switch d.Value {
			case "retry-then-ok":
				if d.Attempt == 1 {
					return bus.RetryAfter(10*time.Millisecond, "not yet")
				}
			case "reject":
				return bus.OutcomeOf(bus.Permanent(errors.New("no good")), d.Attempt, bus.Backoff{})
			case "panic":
				panic("boom")
			case "early":
				d.Settle(bus.Done())
				mu.Lock()
				early["early"] = len(actions["early"]) == 1
				mu.Unlock()
				return bus.Reject("ignored: settled already")
			}
			return bus.Done()
		},
		Settled: func(d *bus.Delivery[string], o bus.Outcome, a bus.Action) {
			mu.Lock()
			defer mu.Unlock()
			key := d.Value
			if o.Cause == bus.CauseInvalid {
				key = "poison"
			}
			actions[key] = append(actions[key], string(a))
			if o.IsDeadLetter() {
				causes[key] = o.Cause
			}
		},
	}
	r.bind(t, h)
	ctx := context.Background()
	for i, data := range []string{"ok", "retry-then-ok", "reject", "panic", "early", "poison"} {
		if _, err := r.js.PublishMsg(ctx, &nats.Msg{Subject: "t.rt.1", Data: []byte(data),
			Header: nats.Header{nats.MsgIdHdr: {data}}}); err != nil {
			t.Fatal(i, err)
		}
	}
	want := map[string]string{"ok": "ack", "retry-then-ok": "nak ack", "reject": "dead_letter", "panic": "nak nak dead_letter",
		"early": "ack", "poison": "dead_letter"}
	waitUntil(t, "every message settled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for k, v := range want {
			if strings.Join(actions[k], " ") != v {
				return false
			}
		}
		return true
	})
	mu.Lock()
	if causes["poison"] != bus.CauseInvalid || causes["reject"] != bus.CausePermanent || causes["panic"] != bus.CauseExhausted {
		t.Errorf("dead-letter causes: %v", causes)
	}
	if !early["early"] {
		t.Error("an early settlement was not done before the handler returned")
	}
	mu.Unlock()
	dl, err := bus.ListDeadLetters(ctx, r.js, 0, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, e := range dl {
		reasons[e.MsgID] = e.Reason
	}
	if len(dl) != 3 || reasons["poison"] != "bad payload" || reasons["reject"] != "no good" ||
		!strings.HasPrefix(reasons["panic"], "the worker failed on every delivery: ") {
		t.Fatalf("dead letters: %v", reasons)
	}
}

// A dead letter that cannot be stored (no MATE_DLQ) is NAKed, never dropped: the message
// comes back.
func TestRuntimeNaksWhenTheDeadLetterFails(t *testing.T) {
	r := newRTRig(t, false)
	var mu sync.Mutex
	var acts []string
	r.bind(t, bus.Handler[string]{
		Decode: decodeText,
		Handle: func(context.Context, *bus.Delivery[string]) bus.Outcome { return bus.Reject("give up") },
		Settled: func(_ *bus.Delivery[string], _ bus.Outcome, a bus.Action) {
			mu.Lock()
			acts = append(acts, string(a))
			mu.Unlock()
		},
	}, bus.WithoutAdvisory())
	if _, err := r.js.Publish(context.Background(), "t.rt.1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the message delivered again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acts) >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	if acts[0] != string(bus.ActionNak) || acts[1] != string(bus.ActionNak) {
		t.Fatalf("actions: %v", acts)
	}
}

// Stop interrupts in-flight work and hands it back without delay: another worker takes it
// at once, however long the handler asked to wait.
func TestRuntimeStopHandsWorkBack(t *testing.T) {
	r := newRTRig(t, true)
	started := make(chan struct{}, 1)
	first := r.bind(t, bus.Handler[string]{
		Decode: decodeText,
		Handle: func(ctx context.Context, _ *bus.Delivery[string]) bus.Outcome {
			started <- struct{}{}
			<-ctx.Done()
			return bus.RetryAfter(time.Hour, "interrupted")
		},
	})
	if _, err := r.js.Publish(context.Background(), "t.rt.1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("not delivered")
	}
	first.Stop()
	got := make(chan int, 1)
	r.bind(t, bus.Handler[string]{
		Decode: decodeText,
		Handle: func(_ context.Context, d *bus.Delivery[string]) bus.Outcome {
			got <- d.Attempt
			return bus.Done()
		},
	})
	select {
	case n := <-got:
		if n != 2 {
			t.Fatalf("attempt %d, want 2", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the interrupted delivery was not handed back")
	}
}
