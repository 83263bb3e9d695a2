package summarizer

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/bus/bustest"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// Replaying 100 processed events changes nothing: no file, version, watermark or effect,
// and no LLM call. Republishing them (same ids) is deduplicated.
func TestReplayOfProcessedEventsChangesNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		fake := llmtest.New(t, echoLLM)
		h := newHarness(t, db, withLLM(fake))
		const agents, convs = 10, 10
		for a := 1; a <= agents; a++ {
			for c := 1; c <= convs; c++ {
				h.conversation(int64(a), fmt.Sprintf("c%d", c), fmt.Sprintf("t%d-%d", a, c), 4)
			}
		}
		svc := h.service("w1")
		h.worker(svc)
		h.worker(h.service("w2"))
		for a := 1; a <= agents; a++ {
			for c := 1; c <= convs; c++ {
				h.publish(completed(int64(a), fmt.Sprintf("c%d", c), fmt.Sprintf("e-%d-%d", a, c), 4))
			}
		}
		poll.Until(t, 60*time.Second, "100 events settled", h.settled)
		h.stopWorkers()
		before := h.snapshot()
		calls := fake.Calls.Load()

		var dry bytes.Buffer
		rep, err := svc.Replay(context.Background(), h.js, ReplayOptions{DryRun: true, Out: &dry})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Events != 100 || rep.ByStatus[store.RunCompleted] != 100 {
			t.Fatalf("dry run: %s\n%s", rep, dry.String())
		}
		rep, err = svc.Replay(context.Background(), h.js, ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Events != 100 || rep.ByStatus[store.RunCompleted] != 100 {
			t.Fatalf("replay: %s", rep)
		}
		if after := h.snapshot(); after != before {
			t.Fatalf("replay changed state:\nbefore %s\nafter %s", before, after)
		}
		if fake.Calls.Load() != calls {
			t.Fatalf("replay called the LLM %d times", fake.Calls.Load()-calls)
		}

		// By agent and by sequence.
		rep, err = svc.Replay(context.Background(), h.js, ReplayOptions{AgentID: 3, DryRun: true})
		if err != nil || rep.Events != convs {
			t.Fatalf("replay of agent 3: %s %v", rep, err)
		}
		rep, err = svc.Replay(context.Background(), h.js, ReplayOptions{FromSeq: 91, ToSeq: 95, DryRun: true})
		if err != nil || rep.Events != 5 {
			t.Fatalf("replay of seq 91-95: %s %v", rep, err)
		}
		rep, err = svc.Replay(context.Background(), h.js, ReplayOptions{Since: time.Now().Add(time.Hour), DryRun: true})
		if err != nil || rep.Events != 0 {
			t.Fatalf("replay since the future: %s %v", rep, err)
		}

		ack := h.publish(completed(1, "c1", "e-1-1", 4))
		if !ack.Duplicate {
			t.Fatalf("republished event not deduplicated: %+v", ack)
		}
	})
}

// An event that was dead-lettered (the LLM was down) is extracted by a replay once the LLM
// is back, and a DLQ retry afterwards changes nothing more.
func TestReplayExtractsWhatWasNeverExtracted(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
		if down.Load() {
			return llmtest.Reply{Status: 503, Content: "maintenance"}
		}
		return echoLLM(r)
	})
	h := newHarness(t, storetest.SQLite(t), withLLM(fake), withSettings(func(s *Settings) { s.MaxDeliver = 2 }))
	h.conversation(2, "c1", "t2-1", 4)
	svc := h.service("w1")
	h.worker(svc)
	h.publish(completed(2, "c1", "e-dl", 4))
	poll.Until(t, 20*time.Second, "dead-lettered", h.settled)
	h.stopWorkers()
	down.Store(false)
	var out bytes.Buffer
	rep, err := svc.Replay(context.Background(), h.js, ReplayOptions{AgentID: 2, Out: &out})
	if err != nil || rep.ByStatus[store.RunCompleted] != 1 {
		t.Fatalf("replay %s %v\n%s", rep, err, out.String())
	}
	if !strings.Contains(out.String(), "seq 1  mate.conversation.completed.2  completed: replay: extracted") {
		t.Fatalf("replay output:\n%s", out.String())
	}
	before := h.snapshot()
	dl, _ := bus.ListDeadLetters(context.Background(), h.js, 0, "", 10)
	if len(dl) != 1 {
		t.Fatalf("dead letters %+v", dl)
	}
	if _, err := bus.RetryDeadLetter(context.Background(), h.js, dl[0].Seq); err != nil {
		t.Fatal(err)
	}
	h.worker(svc)
	poll.Until(t, 20*time.Second, "retried event settled", h.settled)
	if after := h.snapshot(); after != before {
		t.Fatalf("retry after replay changed state:\nbefore %s\nafter %s", before, after)
	}
}

// Issue 9 point 21: a replay against a cluster that is still recovering (two of three nodes
// down: no leader for the stream) waits and retries instead of exiting part-way.
func TestReplayWaitsForARecoveringCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	c := bustest.StartCluster(t, 3)
	h := newHarness(t, storetest.SQLite(t), func(h *harness) { h.cluster = c },
		withSettings(func(s *Settings) { s.Replicas = 3 }))
	for i := 1; i <= 5; i++ {
		h.conversation(21, fmt.Sprintf("c%d", i), fmt.Sprintf("t21-%d", i), 4)
		h.publish(completed(21, fmt.Sprintf("c%d", i), fmt.Sprintf("e21-%d", i), 4))
	}
	svc := h.service("replayer")
	c.Kill(1)
	c.Kill(2)
	go func() {
		time.Sleep(2 * time.Second)
		c.Restart(1)
		c.Restart(2)
	}()
	ctx := bus.WithProvisionRetry(context.Background(), bus.ProvisionRetry{Log: quietLog(), MaxWait: time.Minute,
		Attempt: 2 * time.Second, Initial: 100 * time.Millisecond, Max: time.Second})
	rep, err := svc.Replay(ctx, h.js, ReplayOptions{AgentID: 21, DryRun: true})
	if err != nil || rep.Events != 5 {
		t.Fatalf("replay while the cluster recovers: %s %v", rep, err)
	}
}
