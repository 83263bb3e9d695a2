package bus_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/panics"
)

// A panic while the runtime handles a max-deliveries advisory (here in the DeadLettered
// hook) is recovered, logged and counted; the subscription goes on and the next advisory
// is dead-lettered too.
func TestAdvisoryPanicIsRecovered(t *testing.T) {
	r := newRTRig(t, true)
	g := panics.New(slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	var hooks atomic.Int64
	h := bus.Handler[string]{
		Decode: decodeText,
		Where:  "test.handle",
		Handle: func(context.Context, *bus.Delivery[string]) bus.Outcome { return bus.Done() },
		DeadLettered: func(string) {
			if hooks.Add(1) == 1 {
				panic("hook exploded")
			}
		},
	}
	r.bind(t, h, bus.WithGuard(g))
	ctx := context.Background()
	for _, data := range []string{"a", "b"} {
		if _, err := r.js.Publish(ctx, "t.rt.1", []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	nc, err := r.d.Connect("advisor")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for seq := 1; seq <= 2; seq++ {
		adv := fmt.Sprintf(`{"stream":"T_RT","consumer":"rt","stream_seq":%d,"deliveries":3}`, seq)
		if err := nc.Publish("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.T_RT.rt", []byte(adv)); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, fmt.Sprintf("advisory %d handled", seq), func() bool { return hooks.Load() == int64(seq) })
	}
	if got := g.Count("rt.advisory"); got != 1 {
		t.Fatalf("recovered advisory panics = %v, want 1", got)
	}
	dlq, err := r.js.Stream(ctx, bus.StreamDLQ)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := dlq.Info(ctx); err != nil || info.State.Msgs != 2 {
		t.Fatalf("dead letters %+v %v; want both messages", info, err)
	}
}
