package summarizer

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// An event in: PROFILE.md and MEMORY.md replaced, the daily note of the agent's day
// created with its header, secrets redacted, the prompt built as the spec says, and one
// ledger row that says so.
func TestEventWritesFilesAsTheSpecSays(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		// 20:30 UTC is already the next day in Shanghai.
		clock := func() time.Time { return time.Date(2026, 4, 3, 20, 30, 0, 0, time.UTC) }
		var seen atomic.Value
		fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
			seen.Store(r)
			mem := section(userPrompt(r), "memory")
			return answer(map[string]any{
				"should_update":  true,
				"reason":         "the user shared their name and a deadline",
				"daily_entry":    "- Alice plans the release; deadline May 1.\n- She pasted her key sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz012345 by mistake.",
				"memory_update":  mem + "\n- Release deadline: 2026-05-01.",
				"profile_update": "# PROFILE.md\n\n- Name: Alice\n- Role: release manager",
			})
		})
		h := newHarness(t, db, withLLM(fake), withClock(clock))
		ctx := context.Background()
		if _, err := h.ws.UpdateAgent(ctx, 7, "en", "Asia/Shanghai"); err != nil {
			t.Fatal(err)
		}
		msgs := []conversation.Message{
			{AgentID: 7, ConversationID: "c1", Role: "system", Content: "SYSTEM PROMPT MUST NOT APPEAR"},
			{AgentID: 7, ConversationID: "c1", Role: "user", Content: "Hi, I am Alice and I run the release."},
			{AgentID: 7, ConversationID: "c1", Role: "assistant", Content: "Nice to meet you, Alice."},
			{AgentID: 7, ConversationID: "c1", Role: "user", Content: strings.Repeat("长", 2500)},
			{AgentID: 7, ConversationID: "c1", Role: "tool", ToolCallID: "call1", Content: "TOOL OUTPUT MUST NOT APPEAR"},
			{AgentID: 7, ConversationID: "c1", Role: "assistant", Content: "Deadline noted: May 1."},
		}
		if _, err := h.msgs.Add(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
		h.worker(h.service("w1"))
		ack := h.publish(completed(7, "c1", "evt-files", 6))
		if ack.Stream != bus.StreamEvents || ack.Seq == 0 || ack.Duplicate {
			t.Fatalf("ack %+v", ack)
		}
		poll.Until(t, 20*time.Second, "the event to be settled", func() bool {
			return h.settled() && len(h.runs("evt-files")) > 0
		})

		prof, _ := h.file(7, "PROFILE.md")
		if prof.Content != "# PROFILE.md\n\n- Name: Alice\n- Role: release manager\n" {
			t.Fatalf("PROFILE.md = %q", prof.Content)
		}
		mem, _ := h.file(7, "MEMORY.md")
		if !strings.HasSuffix(mem.Content, "- Release deadline: 2026-05-01.\n") || !strings.HasPrefix(mem.Content, workspace.DefaultContent("en", "MEMORY.md")[:10]) {
			t.Fatalf("MEMORY.md = %q", mem.Content)
		}
		daily, ok := h.file(7, "memory/2026-04-04.md")
		if !ok {
			t.Fatal("daily note memory/2026-04-04.md (the agent's day in Asia/Shanghai) missing")
		}
		want := "# 2026-04-04\n\n- Alice plans the release; deadline May 1.\n- She pasted her key [REDACTED] by mistake.\n"
		if daily.Content != want {
			t.Fatalf("daily note\n got %q\nwant %q", daily.Content, want)
		}
		if daily.Enabled {
			t.Fatal("a new daily note must start disabled")
		}

		runs := h.runs("evt-files")
		if len(runs) != 1 {
			t.Fatalf("want one ledger row, got %d: %+v", len(runs), runs)
		}
		r := runs[0]
		if r.Status != store.RunCompleted || r.Provider != ProviderLLM || r.Model != "fake-model" || r.TokensIn != 100 ||
			r.TokensOut != 50 || r.Attempt != 1 || r.AgentID != 7 || r.Kind != ledger.KindSummarize ||
			strings.Join(r.Conversations, ",") != "c1" ||
			strings.Join(r.FilesChanged, ",") != "PROFILE.md,MEMORY.md,memory/2026-04-04.md" {
			t.Fatalf("ledger row %+v", r)
		}

		req := seen.Load().(llmtest.Received)
		if req.ResponseFormat == nil || req.ResponseFormat.Type != "json_object" {
			t.Fatalf("JSON mode not requested: %+v", req.ResponseFormat)
		}
		if req.MaxTokens < 1000 {
			t.Fatalf("max_tokens %d below summary-max-tokens", req.MaxTokens)
		}
		up := userPrompt(req)
		tr := section(up, "transcript")
		for _, must := range []string{"User: Hi, I am Alice and I run the release.", "Assistant: Nice to meet you, Alice.",
			strings.Repeat("长", 2000) + "... [truncated]\n", "Assistant: Deadline noted: May 1."} {
			if !strings.Contains(tr, must) {
				t.Fatalf("transcript lacks %q:\n%s", must, tr)
			}
		}
		if strings.Contains(tr, strings.Repeat("长", 2001)) || strings.Contains(up, "MUST NOT APPEAR") {
			t.Fatalf("transcript not truncated or includes tool/system messages:\n%s", tr)
		}
		if !strings.Contains(up, "Today's date: 2026-04-04") || !strings.Contains(section(up, "memory"), "MEMORY") {
			t.Fatalf("user prompt lacks the date or the current MEMORY.md:\n%s", up)
		}
		if !strings.Contains(req.Messages[0].Content, `"should_update"`) {
			t.Fatal("system prompt does not state the JSON contract")
		}
	})
}

// The spec's pre-checks: each skipped event is acknowledged and ledgered as skipped with
// its reason; nothing is written and the LLM is not called.
func TestPreChecksSkip(t *testing.T) {
	fake := llmtest.New(t, echoLLM)
	h := newHarness(t, storetest.SQLite(t), withLLM(fake))
	h.conversation(1, "cron-conv", "t1-1", 6)
	h.conversation(1, "short", "t1-2", 6)
	h.conversation(1, "few", "t1-3", 2)
	h.conversation(1, "missing", "t1-4", 2)
	h.worker(h.service("w1"))
	cases := []struct {
		name   string
		ev     *event.ConversationCompletedEvent
		reason string
	}{
		{"cron", func() *event.ConversationCompletedEvent {
			e := completed(1, "cron-conv", "e-cron", 6)
			e.TriggerSource = event.TriggerCron
			return e
		}(), "skip-cron-conversations"},
		// Nine Chinese characters are 27 bytes but 9 characters: below 10.
		{"short user message in characters", func() *event.ConversationCompletedEvent {
			e := completed(1, "short", "e-short", 6)
			e.UserMessage = "请帮我规划一下发布"
			return e
		}(), "has 9 characters; min-user-message-length is 10"},
		{"message count", completed(1, "few", "e-few", 2), "messageCount 2 is below min-messages-for-summarize 4"},
		{"stored messages re-checked", completed(1, "missing", "e-missing", 6), "has 2 stored messages; min-messages-for-summarize is 4"},
	}
	for _, c := range cases {
		h.publish(c.ev)
	}
	poll.Until(t, 20*time.Second, "all pre-check events settled", h.settled)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runs := h.runs(c.ev.EventID)
			if len(runs) == 0 {
				t.Fatal("no ledger row")
			}
			last := runs[0]
			if last.Status != store.RunSkipped || !strings.Contains(last.Reason, c.reason) {
				t.Fatalf("last run %s %q, want skipped with %q", last.Status, last.Reason, c.reason)
			}
		})
	}
	// The event whose messages were missing waited for them before giving up.
	if n := len(h.runs("e-missing")); n != waitForMessages {
		t.Fatalf("e-missing: %d attempts, want %d (deferred while messages may still arrive)", n, waitForMessages)
	}
	if fake.Calls.Load() != 0 {
		t.Fatalf("LLM called %d times for skipped events", fake.Calls.Load())
	}
	if files, _ := h.ws.List(context.Background(), 1, "memory/"); len(files) != 0 {
		t.Fatalf("daily notes written for skipped events: %+v", files)
	}
}

// Two workers, many agents: every conversation reaches its agent's daily note exactly once
// and every event ends completed. The lease keeps one agent's LLM calls from overlapping
// while its holder's renewals land in time (1 s here); a renewal late on a loaded machine
// lets the next holder in, and then two extractions of the agent may overlap. What must
// hold is that at most one of them writes: fencing and the watermarks refuse the other
// (its lease lost, its commit fenced out or stale), whose attempt fails and is retried. So
// an overlap is allowed only on an agent whose ledger shows such a failed attempt.
func TestTwoWorkersNeverOverlapOnAnAgent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		var mu sync.Mutex
		inflight := map[string]int{}
		overlaps := map[string]int{} // by agent
		fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
			tg := tags(userPrompt(r))
			agents := map[string]bool{}
			for _, x := range tg {
				agents[strings.TrimPrefix(strings.Split(x, "-")[0], "t")] = true
			}
			mu.Lock()
			for a := range agents {
				inflight[a]++
				if inflight[a] > 1 {
					overlaps[a]++
				}
			}
			mu.Unlock()
			time.Sleep(30 * time.Millisecond)
			mu.Lock()
			for a := range agents {
				inflight[a]--
			}
			mu.Unlock()
			return echoLLM(r)
		})
		h := newHarness(t, db, withLLM(fake))
		const agents, convs = 12, 3
		for a := 1; a <= agents; a++ {
			for c := 1; c <= convs; c++ {
				h.conversation(int64(a), fmt.Sprintf("c%d", c), fmt.Sprintf("t%d-%d", a, c), 4)
			}
		}
		h.worker(h.service("w1"))
		h.worker(h.service("w2"))
		for c := 1; c <= convs; c++ {
			for a := 1; a <= agents; a++ {
				h.publish(completed(int64(a), fmt.Sprintf("c%d", c), fmt.Sprintf("e-%d-%d", a, c), 4))
			}
		}
		poll.Until(t, 60*time.Second, "all events settled", h.settled)
		for a := 1; a <= agents; a++ {
			notes, err := h.ws.ListContent(context.Background(), int64(a), "memory/", 0)
			if err != nil || len(notes) != 1 {
				t.Fatalf("agent %d: daily notes %v %v", a, notes, err)
			}
			for c := 1; c <= convs; c++ {
				tg := fmt.Sprintf("covered t%d-%d\n", a, c)
				if n := strings.Count(notes[0].Content, tg); n != 1 {
					t.Fatalf("agent %d: %q appears %d times in\n%s", a, tg, n, notes[0].Content)
				}
				ev := fmt.Sprintf("e-%d-%d", a, c)
				if runs := h.runs(ev); len(runs) == 0 || runs[0].Status != store.RunCompleted {
					t.Fatalf("event %s: final run %+v", ev, runs)
				}
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(inflight) != agents {
			t.Fatalf("the LLM saw calls for %d agents, want %d: %v", len(inflight), agents, inflight)
		}
		for a, n := range overlaps {
			id, _ := strconv.ParseInt(a, 10, 64)
			failed, err := h.ledger.List(context.Background(), ledger.Filter{AgentID: id, Kind: ledger.KindSummarize, Status: store.RunFailed, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			if len(failed) == 0 {
				t.Fatalf("agent %s: %d overlapping LLM calls, yet no attempt failed: two extractions ran at once and neither was refused", a, n)
			}
			t.Logf("agent %s: %d overlapping LLM calls (a lease renewal came late); the attempt refused: %s", a, n, failed[0].Reason)
		}
	})
}

// 50 conversations of one agent completed inside one cooldown: every one reaches the daily
// note, once, and the LLM is called at most once per cooldown window.
func TestCooldownCoalescesWithoutDropping(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		var mu sync.Mutex
		var starts, ends []time.Time
		fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			rep := echoLLM(r)
			mu.Lock()
			ends = append(ends, time.Now())
			mu.Unlock()
			return rep
		})
		h := newHarness(t, db, withLLM(fake), withSettings(func(s *Settings) {
			s.Memory.CooldownMinutes = 0.02 // 1.2 s
			s.Memory.MaxTranscriptMessages = 60
			s.MaxDeliver = 30
		}))
		const n = 50
		for c := 1; c <= n; c++ {
			h.conversation(1, fmt.Sprintf("c%d", c), fmt.Sprintf("t1-%d", c), 4)
		}
		h.worker(h.service("w1"))
		h.worker(h.service("w2"))
		for c := 1; c <= n; c++ {
			h.publish(completed(1, fmt.Sprintf("c%d", c), fmt.Sprintf("e-%d", c), 4))
		}
		poll.Until(t, 90*time.Second, "all 50 events settled", h.settled)
		notes, err := h.ws.ListContent(context.Background(), 1, "memory/", 0)
		if err != nil || len(notes) != 1 {
			t.Fatalf("daily notes %v %v", notes, err)
		}
		for c := 1; c <= n; c++ {
			if k := strings.Count(notes[0].Content, fmt.Sprintf("covered t1-%d\n", c)); k != 1 {
				t.Fatalf("conversation c%d appears %d times in the daily note", c, k)
			}
		}
		cooldown := h.set.Memory.CooldownMinutes.Duration()
		mu.Lock()
		defer mu.Unlock()
		// 200 messages, 100 of them user and 100 assistant, 60 per transcript: at least 4 calls.
		if len(starts) < 4 || len(starts) > 8 {
			t.Fatalf("%d LLM calls for 200 messages with a 60-message transcript", len(starts))
		}
		for i := 1; i < len(starts); i++ {
			if gap := starts[i].Sub(ends[i-1]); gap < cooldown-50*time.Millisecond {
				t.Fatalf("LLM call %d started %s after the previous one ended; cooldown is %s", i+1, gap, cooldown)
			}
		}
		for c := 1; c <= n; c++ {
			runs := h.runs(fmt.Sprintf("e-%d", c))
			if len(runs) == 0 || runs[0].Status != store.RunCompleted {
				t.Fatalf("event e-%d: final run %+v", c, runs)
			}
		}
	})
}

// The context window's flush (a summarize request without a reply subject, reason
// context-eviction) registers and extracts its conversation, honouring the cooldown.
func TestFlushRequestExtractsUnderCooldown(t *testing.T) {
	fake := llmtest.New(t, echoLLM)
	h := newHarness(t, storetest.SQLite(t), withLLM(fake), withSettings(func(s *Settings) { s.Memory.CooldownMinutes = 0.01 }))
	h.conversation(2, "c1", "t2-1", 4)
	h.conversation(2, "long", "t2-2", 6)
	h.worker(h.service("w1"))
	h.publish(completed(2, "c1", "e-first", 4)) // starts a cooldown
	poll.Until(t, 10*time.Second, "first event settled", func() bool { return h.settled() && len(h.runs("e-first")) > 0 })
	// The same body the window publishes (pkg/internal/window FlushRequest).
	body := `{"agentId":2,"conversationId":"long","reason":"context-eviction","requestId":"ctx-evict-2-x-6","requestedAt":"2026-04-03T10:00:00Z"}`
	if _, err := h.js.Publish(context.Background(), "mate.memory.summarize.2", []byte(body)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "flush settled", func() bool {
		r := h.runs("ctx-evict-2-x-6")
		return h.settled() && len(r) > 0 && r[0].Status == store.RunCompleted
	})
	// A cooldown deferral leaves no ledger row: the one row is the extraction, on a later
	// delivery (the first was deferred: no failure left a row).
	runs := h.runs("ctx-evict-2-x-6")
	if len(runs) != 1 || runs[0].Attempt < 2 {
		t.Fatalf("the flush did not wait for the cooldown: %+v", runs)
	}
	notes, _ := h.ws.ListContent(context.Background(), 2, "memory/", 0)
	if len(notes) != 1 || !strings.Contains(notes[0].Content, "covered t2-2") {
		t.Fatalf("daily note %+v", notes)
	}
}
