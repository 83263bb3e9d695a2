package summarizer

import (
	"context"
	"errors"
	"github.com/nats-io/nats.go/jetstream"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// An LLM answering garbage, 500, 429 or hanging: retried with backoff up to MaxDeliver,
// then dead-lettered with the reason; files untouched. A 400 is permanent: dead-lettered
// at once.
func TestLLMFailuresRetryThenDeadLetter(t *testing.T) {
	cases := []struct {
		name     string
		reply    llmtest.Reply
		attempts int
		reason   string
	}{
		{"garbage", llmtest.Reply{Content: "Sure! Here are my thoughts on the conversation."}, 4, "no JSON object"},
		{"wrong shape", llmtest.Reply{Content: `{"should_update": "maybe", "daily_entry": 3}`}, 4, "not the expected shape"},
		{"500", llmtest.Reply{Status: 500, Content: "upstream exploded"}, 4, "500"},
		{"429", llmtest.Reply{Status: 429, Content: "rate limited"}, 4, "429"},
		{"hang", llmtest.Reply{Hang: true}, 4, "llm call"},
		{"400 is permanent", llmtest.Reply{Status: 400, Content: "invalid model"}, 1, "400"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := llmtest.New(t, func(llmtest.Received) llmtest.Reply { return c.reply })
			h := newHarness(t, storetest.SQLite(t), withLLM(fake), withLLMTimeout(300*time.Millisecond))
			h.conversation(3, "c1", "t3-1", 4)
			if _, err := h.ws.EnsureAgent(context.Background(), 3); err != nil {
				t.Fatal(err)
			}
			before := h.fileSnapshot()
			h.worker(h.service("w1"))
			h.publish(completed(3, "c1", "e-fail", 4))
			poll.Until(t, 30*time.Second, "the event to be dead-lettered", h.settled)

			if got := fake.Calls.Load(); got != int64(c.attempts) {
				t.Fatalf("LLM called %d times, want %d", got, c.attempts)
			}
			if after := h.fileSnapshot(); after != before {
				t.Fatalf("files or watermarks changed:\nbefore %s\nafter %s", before, after)
			}
			dl, err := bus.ListDeadLetters(context.Background(), h.js, 0, "", 10)
			if err != nil || len(dl) != 1 {
				t.Fatalf("dead letters %+v %v", dl, err)
			}
			if dl[0].Subject != "mate.conversation.completed.3" || dl[0].StreamSeq != 1 ||
				dl[0].Deliveries != uint64(c.attempts) || !strings.Contains(dl[0].Reason, c.reason) || dl[0].MsgID != "3:e-fail" {
				t.Fatalf("dead letter %+v", dl[0])
			}
			runs := h.runs("e-fail")
			if len(runs) != c.attempts {
				t.Fatalf("%d ledger rows, want one per attempt (%d)", len(runs), c.attempts)
			}
			for _, r := range runs {
				if r.Status != store.RunFailed {
					t.Fatalf("run %+v", r)
				}
			}
			if c.attempts > 1 && !strings.Contains(runs[0].Reason, "gave up after 4 deliveries") {
				t.Fatalf("last run reason %q", runs[0].Reason)
			}
		})
	}
}

// A poison message (not JSON, or an invalid event) is dead-lettered on first sight, not
// redelivered.
func TestPoisonMessagesDeadLettered(t *testing.T) {
	h := newHarness(t, storetest.SQLite(t))
	h.worker(h.service("w1"))
	ctx := context.Background()
	if _, err := h.js.Publish(ctx, "mate.conversation.completed.5", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.js.Publish(ctx, "mate.conversation.completed.5", []byte(`{"eventId":"x","agentId":5,"conversationId":"c","triggerSource":"fax machine","messageCount":4}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := h.js.Publish(ctx, "mate.memory.summarize.5", []byte(`{"requestId":"r","agentId":6,"conversationId":"c"}`)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "poison settled", h.settled)
	dl, err := bus.ListDeadLetters(ctx, h.js, 0, "", 10)
	if err != nil || len(dl) != 3 {
		t.Fatalf("dead letters %+v %v", dl, err)
	}
	// Workers handle deliveries concurrently: match dead letters by original sequence.
	bySeq := map[uint64]bus.DeadLetterEntry{}
	for _, d := range dl {
		bySeq[d.StreamSeq] = d
	}
	for i, want := range []string{"not valid JSON", `triggerSource "fax machine" may not contain spaces`, "arrived on mate.memory.summarize.5"} {
		d := bySeq[uint64(i+1)]
		if !strings.Contains(d.Reason, want) || d.Deliveries != 1 {
			t.Fatalf("dead letter of seq %d: %+v, want reason with %q after 1 delivery", i+1, d, want)
		}
	}
}

// hangingLLM is an LLM whose calls hang until answer is called (then it answers as
// echoLLM); inCall returns once a call is hanging.
func hangingLLM(t *testing.T) (fake *llmtest.Server, inCall, answer func()) {
	started := make(chan struct{}, 1)
	var hang atomic.Bool
	hang.Store(true)
	fake = llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
		if hang.Load() {
			select {
			case started <- struct{}{}:
			default:
			}
			return llmtest.Reply{Hang: true}
		}
		return echoLLM(r)
	})
	inCall = func() {
		t.Helper()
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the LLM was never called")
		}
	}
	return fake, inCall, func() { hang.Store(false) }
}

// A worker stopped in the middle of an extraction (the LLM hangs): the event goes back to
// the stream at once, another worker processes it, and the daily entry appears once.
func TestWorkerStoppedMidExtraction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		fake, inCall, answer := hangingLLM(t)
		h := newHarness(t, db, withLLM(fake), withLLMTimeout(time.Minute))
		h.conversation(4, "c1", "t4-1", 4)
		w1 := h.worker(h.service("w1"))
		h.publish(completed(4, "c1", "e-kill", 4))
		inCall()
		answer()
		w1.Stop() // interrupts the hanging call; the delivery is NAKed, the lease released
		h.worker(h.service("w2"))
		poll.Until(t, 20*time.Second, "the event processed by the second worker", h.settled)
		notes, _ := h.ws.ListContent(context.Background(), 4, "memory/", 0)
		if len(notes) != 1 || strings.Count(notes[0].Content, "covered t4-1") != 1 {
			t.Fatalf("daily notes: %+v", notes)
		}
		runs := h.runs("e-kill")
		// The handed-back delivery can first be routed to the stopped worker's still-open pull
		// request and come back only after AckWait, so the completing attempt may be the 3rd.
		if len(runs) != 2 || runs[1].Status != store.RunFailed || runs[0].Status != store.RunCompleted || runs[0].Attempt < 2 {
			t.Fatalf("runs: %+v", runs)
		}
	})
}

// A worker process that dies in the middle of an extraction (its connections drop: no NAK,
// no lease release): the lease expires, JetStream redelivers after AckWait, another worker
// processes the event, and its daily entry appears once.
func TestWorkerCrashMidExtraction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		fake, inCall, answer := hangingLLM(t)
		h := newHarness(t, db, withLLM(fake), withLLMTimeout(time.Minute))
		h.conversation(4, "c1", "t4-1", 4)
		svc1, leaseConn := h.serviceConn("w1")
		_, workerConn := h.workerConn(svc1)
		h.publish(completed(4, "c1", "e-crash-mid", 4))
		inCall()
		answer()
		workerConn.Close()
		leaseConn.Close()
		h.worker(h.service("w2"))
		poll.Until(t, 30*time.Second, "the event processed by the second worker", func() bool {
			return h.settled() && len(h.runs("e-crash-mid")) > 0 && h.runs("e-crash-mid")[0].Status == store.RunCompleted
		})
		notes, _ := h.ws.ListContent(context.Background(), 4, "memory/", 0)
		if len(notes) != 1 || strings.Count(notes[0].Content, "covered t4-1") != 1 {
			t.Fatalf("daily notes: %+v", notes)
		}
		// The crashed worker wrote nothing: its call was cut when its lease could not be renewed.
		for _, r := range h.runs("e-crash-mid")[1:] {
			if r.Status == store.RunCompleted {
				t.Fatalf("a second completed run: %+v", h.runs("e-crash-mid"))
			}
		}
	})
}

// A worker that crashed just before committing its extraction (more messages arrived
// meanwhile) wrote nothing: the daily append and the watermarks commit in one transaction,
// and the next extraction appends each conversation once.
func TestCrashBeforeCommit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		fake := llmtest.New(t, echoLLM)
		h := newHarness(t, db, withLLM(fake))
		h.conversation(5, "c1", "t5-1", 4)
		svc := h.service("w1")
		var crashes atomic.Int32
		svc.hookBeforeCommit = func() error {
			if crashes.Add(1) == 1 {
				// New messages land in the conversation while the worker is "down".
				h.conversation(5, "c1", "t5-2", 2)
				return errors.New("simulated crash")
			}
			return nil
		}
		h.worker(svc)
		h.publish(completed(5, "c1", "e-crash", 4))
		poll.Until(t, 20*time.Second, "the event settled", h.settled)
		notes, _ := h.ws.ListContent(context.Background(), 5, "memory/", 0)
		if len(notes) != 1 {
			t.Fatalf("daily notes: %+v", notes)
		}
		if n := strings.Count(notes[0].Content, "covered t5-1"); n != 1 {
			t.Fatalf("t5-1 appended %d times:\n%s", n, notes[0].Content)
		}
		// The messages that arrived during the crash are extracted by a later event.
		h.publish(completed(5, "c1", "e-crash-2", 6))
		poll.Until(t, 20*time.Second, "the second event settled", func() bool {
			return h.settled() && len(h.runs("e-crash-2")) > 0
		})
		notes, _ = h.ws.ListContent(context.Background(), 5, "memory/", 0)
		if strings.Count(notes[0].Content, "covered t5-1") != 1 || strings.Count(notes[0].Content, "covered t5-2") != 1 {
			t.Fatalf("daily note:\n%s", notes[0].Content)
		}
		if _, err := h.js.KeyValue(context.Background(), bus.BucketIntent); !errors.Is(err, jetstream.ErrBucketNotFound) {
			t.Fatalf("the intent bucket of older versions is there (%v): nothing is to be kept in KV across the commit", err)
		}
	})
}

// A tool edit of MEMORY.md that lands while the LLM is thinking survives: the summarizer's
// compare-and-swap fails, it re-reads and asks again with the edited file.
func TestToolEditDuringExtractionSurvives(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		var h *harness
		var calls atomic.Int32
		fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
			mem := section(userPrompt(r), "memory")
			if calls.Add(1) == 1 {
				// The agent's tool edits MEMORY.md during the call.
				if _, err := h.ws.Append(context.Background(), 6, "MEMORY.md", "- TOOL: the user moved to Berlin.\n", "",
					workspace.Change{Actor: store.ActorTool}); err != nil {
					t.Errorf("tool edit: %v", err)
				}
			}
			return answer(map[string]any{"should_update": true, "reason": "r", "daily_entry": "- talked",
				"memory_update": mem + "\n- SUMMARIZER: the user likes tea.", "profile_update": ""})
		})
		h = newHarness(t, db, withLLM(fake))
		h.conversation(6, "c1", "t6-1", 4)
		h.worker(h.service("w1"))
		h.publish(completed(6, "c1", "e-tool", 4))
		poll.Until(t, 20*time.Second, "settled", func() bool { return h.settled() && len(h.runs("e-tool")) > 0 })
		mem, _ := h.file(6, "MEMORY.md")
		if !strings.Contains(mem.Content, "- TOOL: the user moved to Berlin.") || !strings.Contains(mem.Content, "- SUMMARIZER: the user likes tea.") {
			t.Fatalf("MEMORY.md lost an update:\n%s", mem.Content)
		}
		if calls.Load() != 2 {
			t.Fatalf("LLM called %d times, want 2 (re-run after the conflict)", calls.Load())
		}
		if r := h.runs("e-tool"); len(r) != 1 || r[0].Status != store.RunCompleted || r[0].TokensIn != 200 {
			t.Fatalf("runs %+v", r)
		}
	})
}

// A rewrite that would drop most of MEMORY.md is refused and recorded; the file stays as
// it was, the daily entry is still written.
func TestDestructiveRewriteRefused(t *testing.T) {
	fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
		return answer(map[string]any{"should_update": true, "reason": "r", "daily_entry": "- talked",
			"memory_update": "# MEMORY.md\n\n- The user likes tea.", "profile_update": ""})
	})
	h := newHarness(t, storetest.SQLite(t), withLLM(fake))
	ctx := context.Background()
	long := "# MEMORY.md\n\n" + strings.Repeat("- Project Apollo: the migration to MariaDB is planned for the second quarter.\n", 1) +
		"- Decision: SQLite for the embedded mode, MariaDB in production clusters.\n" +
		"- Alice owns the release checklist and Bob the benchmark report.\n" +
		"- The beta deadline is 2026-05-01 and must not slip.\n" +
		"- Daily notes follow the agent's time zone, Asia/Shanghai.\n"
	f, err := h.ws.Get(ctx, 8, "MEMORY.md")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.ws.Write(ctx, 8, "MEMORY.md", long, f.Version, workspace.Change{Actor: store.ActorAPI}); err != nil {
		t.Fatal(err)
	}
	h.conversation(8, "c1", "t8-1", 4)
	h.worker(h.service("w1"))
	h.publish(completed(8, "c1", "e-refuse", 4))
	poll.Until(t, 20*time.Second, "settled", func() bool { return h.settled() && len(h.runs("e-refuse")) > 0 })
	mem, _ := h.file(8, "MEMORY.md")
	if mem.Content != long {
		t.Fatalf("MEMORY.md changed:\n%s", mem.Content)
	}
	r := h.runs("e-refuse")[0]
	if r.Status != store.RunRefused || !strings.Contains(r.Reason, "MEMORY.md: rewrite refused") ||
		len(r.FilesChanged) != 1 || !strings.HasPrefix(r.FilesChanged[0], "memory/") {
		t.Fatalf("run %+v", r)
	}
}

// Without an LLM the offline provider writes an extractive digest to the daily note and
// never touches PROFILE.md or MEMORY.md; its runs say so.
func TestOfflineProvider(t *testing.T) {
	h := newHarness(t, storetest.SQLite(t))
	h.conversation(9, "c1", "t9-1", 4)
	before, _ := h.file(9, "MEMORY.md")
	beforeP, _ := h.file(9, "PROFILE.md")
	h.worker(h.service("w1"))
	h.publish(completed(9, "c1", "e-off", 4))
	poll.Until(t, 20*time.Second, "settled", func() bool { return h.settled() && len(h.runs("e-off")) > 0 })
	notes, _ := h.ws.ListContent(context.Background(), 9, "memory/", 0)
	if len(notes) != 1 || !strings.Contains(notes[0].Content, "离线摘要") || !strings.Contains(notes[0].Content, "用户: t9-1 question 0") ||
		!strings.Contains(notes[0].Content, "助手: t9-1 answer 3") {
		t.Fatalf("daily notes %+v", notes)
	}
	after, _ := h.file(9, "MEMORY.md")
	afterP, _ := h.file(9, "PROFILE.md")
	if after.Version != before.Version || afterP.Version != beforeP.Version {
		t.Fatal("the offline provider touched MEMORY.md or PROFILE.md")
	}
	r := h.runs("e-off")[0]
	if r.Provider != ProviderOffline || r.Status != store.RunCompleted || r.TokensIn != 0 || !strings.Contains(r.Reason, "offline") {
		t.Fatalf("run %+v", r)
	}
}
