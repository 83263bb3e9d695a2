package window

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

const filler = "我们讨论一下 context window 的压缩策略，以及 token 预算怎么分配比较合理。"

func body(user string, budget int, extra map[string]any) map[string]any {
	b := map[string]any{"systemPrompt": "你是一个乐于助人的助手。", "userMessage": user}
	if budget > 0 {
		b["maxInputTokens"] = budget
	}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

func TestAssembleWithoutCompaction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		e := newEnv(t, db)
		r := e.replica("a", replicaOpts{})
		stored := e.store(1, "conv-small", 0, 3, filler)
		st, res, msg := r.post(t, 1, "conv-small", body("现在怎么办？", 0, map[string]any{"model": "gpt-4o"}), false)
		if st != 200 {
			t.Fatalf("status %d: %s", st, msg)
		}
		checkWindow(t, res, "现在怎么办？")
		if res.Compacted || res.LLMCalls != 0 || res.Kept != len(stored) || res.Tokenizer != "o200k_base" || !res.Exact {
			t.Fatalf("unexpected result: %+v", res)
		}
		sys := res.Messages[0]
		if sys.Role != RoleSystem || !strings.HasPrefix(sys.Content, "你是一个乐于助人的助手。\n\n--- AGENTS.md ---") {
			t.Fatalf("system message is not the prompt followed by the workspace files: %.120q", sys.Content)
		}
		for i, m := range stored {
			got := res.Messages[1+i]
			if got.Role != m.Role || got.Content != m.Content || got.ToolCallID != m.ToolCallID {
				t.Fatalf("history message %d changed: %+v vs %+v", i, got, m)
			}
		}
		if n := e.llm.Calls.Load(); n != 0 {
			t.Fatalf("%d LLM calls without compaction", n)
		}
	})
}

func TestCompactionCacheAndIncrementalSummary(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		e := newEnv(t, db)
		r := e.replica("a", replicaOpts{})
		stored := e.store(1, "conv-long", 0, 40, filler)
		const q = "请总结一下我们的进展"
		_, probe, _ := r.post(t, 1, "conv-long", body(q, 1_000_000, nil), false)
		budget := probe.Tokens.Before * 2 / 3

		_, res, msg := r.post(t, 1, "conv-long", body(q, budget, nil), false)
		if res == nil {
			t.Fatal(msg)
		}
		checkWindow(t, res, q)
		// The last 2 exchanges: 38 (user, assistant) and 39 (user, call, result, assistant).
		if !res.Compacted || res.SummaryKind != "llm" || res.LLMCalls != 1 || res.CacheHit || res.Kept != 6 ||
			res.Summarized != len(stored)-6 || res.Trimmed != 0 || res.Degraded {
			t.Fatalf("first compaction: %+v", res)
		}
		sum := res.Messages[1]
		if sum.Role != RoleUser || !strings.HasPrefix(sum.Content, MarkerZH+"\n摘要：") {
			t.Fatalf("summary message: %+v", sum)
		}
		// The original goal (the first user message) is anchored at the end of the summary.
		goal := "\n\n[原始目标]\n" + stored[0].Content
		if stored[0].Role != RoleUser || !strings.HasSuffix(sum.Content, goal) {
			t.Fatalf("summary message lacks the original-goal anchor %q: %q", goal, sum.Content)
		}
		for i, m := range stored[len(stored)-6:] {
			if got := res.Messages[2+i]; got.Content != m.Content || got.Role != m.Role {
				t.Fatalf("recent message %d not verbatim: %+v", i, got)
			}
		}
		rec := e.llm.Received()
		if len(rec) != 1 || rec[0].MaxTokens != windowConfig().SummaryMaxTokens ||
			!strings.Contains(rec[0].Messages[0].Content, "对话上下文压缩") ||
			!strings.Contains(rec[0].Messages[1].Content, "第0个问题") || strings.Contains(rec[0].Messages[1].Content, "第38个问题") ||
			strings.Contains(rec[0].Messages[0].Content+rec[0].Messages[1].Content, "{{") {
			t.Fatalf("summarizer request: %+v", rec)
		}

		// The same request again: no new LLM call.
		_, again, _ := r.post(t, 1, "conv-long", body(q, budget, nil), false)
		checkWindow(t, again, q)
		if again.LLMCalls != 0 || !again.CacheHit || again.Messages[1].Content != sum.Content || e.llm.Calls.Load() != 1 ||
			again.HistoryRead != 6 || again.HistoryMessages != len(stored) {
			t.Fatalf("repeat was not a cache hit: %+v (calls %d)", again, e.llm.Calls.Load())
		}

		// One more exchange: the cached summary plus a little more verbatim history still
		// fits under the trigger, so no call.
		e.store(1, "conv-long", 40, 1, filler)
		_, grown, _ := r.post(t, 1, "conv-long", body(q, budget, nil), false)
		checkWindow(t, grown, q)
		if grown.LLMCalls != 0 || !grown.CacheHit || grown.Kept != 8 || grown.HistoryRead != 8 {
			t.Fatalf("one more exchange: %+v", grown)
		}

		// Many more: the new part is summarized on top of the cached summary only.
		e.store(1, "conv-long", 41, 30, filler)
		_, inc, _ := r.post(t, 1, "conv-long", body(q, budget, nil), false)
		checkWindow(t, inc, q)
		if inc.LLMCalls != 1 || inc.CacheHit {
			t.Fatalf("incremental compaction: %+v", inc)
		}
		// The goal survives an incremental compaction, whose messages no longer include it.
		if !strings.HasSuffix(inc.Messages[1].Content, goal) {
			t.Fatalf("incremental summary lost the original goal: %q", inc.Messages[1].Content)
		}
		rec = e.llm.Received()
		user := rec[len(rec)-1].Messages[1].Content
		if !strings.Contains(user, "<existing_summary>\n摘要：") || strings.Contains(user, "第10个问题") ||
			!strings.Contains(user, "第38个问题") || !strings.Contains(user, "第60个问题") {
			t.Fatalf("incremental summarizer prompt does not extend the cached summary with the new part only:\n%s", user)
		}

		// Served from the cached prefix, the window is the same as from the full history.
		_, resumed, _ := r.post(t, 1, "conv-long", body(q, budget, nil), false)
		checkWindow(t, resumed, q)
		if resumed.HistoryRead >= resumed.HistoryMessages || !resumed.CacheHit || resumed.LLMCalls != 0 ||
			!reflect.DeepEqual(resumed.Messages, inc.Messages) || resumed.Summarized != inc.Summarized {
			t.Fatalf("resumed window differs: read %d of %d", resumed.HistoryRead, resumed.HistoryMessages)
		}
		// A budget large enough for everything gets everything, verbatim.
		_, full, _ := r.post(t, 1, "conv-long", body(q, 1_000_000, nil), false)
		if full.Compacted || full.Kept != full.HistoryMessages || full.HistoryRead != full.HistoryMessages {
			t.Fatalf("large budget: %+v", full.Tokens)
		}
	})
}

func TestEnglishAgentMarker(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t))
	r := e.replica("a", replicaOpts{})
	if _, err := r.ws.UpdateAgent(context.Background(), 2, "en", ""); err != nil {
		t.Fatal(err)
	}
	e.store(2, "c-en", 0, 30, "Let us talk about how the context window should be compacted.")
	_, probe, _ := r.post(t, 2, "c-en", body("and now?", 1_000_000, nil), false)
	_, res, _ := r.post(t, 2, "c-en", body("and now?", probe.Tokens.Before/2, nil), false)
	checkWindow(t, res, "and now?")
	if res.Language != "en" || !strings.HasPrefix(res.Messages[1].Content, MarkerEN+"\n") {
		t.Fatalf("English summary marker missing: %+v", res.Messages[1])
	}
	rec := e.llm.Received()
	if !strings.Contains(rec[0].Messages[0].Content, "You compress conversation context") ||
		!strings.Contains(rec[0].Messages[1].Content, "User: ") {
		t.Fatalf("summarizer prompts are not English: %+v", rec[0].Messages)
	}
}

func TestLLMFailureDegradesVisibly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		e := newEnv(t, db)
		clk := newClock()
		var logs syncBuf
		r := e.replica("a", replicaOpts{opts: []Option{WithClock(clk.Now), WithFailureTTL(30 * time.Second)},
			log: slog.New(slog.NewTextHandler(&logs, nil))})
		e.llm.SetHandler(func(llmtest.Received) llmtest.Reply {
			return llmtest.Reply{Status: 503, Content: "upstream overloaded"}
		})
		stored := e.store(1, "c-fail", 0, 30, filler)
		_, probe, _ := r.post(t, 1, "c-fail", body("继续", 1_000_000, nil), false)
		budget := probe.Tokens.Before / 2

		_, res, _ := r.post(t, 1, "c-fail", body("继续", budget, nil), false)
		checkWindow(t, res, "继续")
		if !res.Degraded || res.SummaryKind != "extractive" || !strings.Contains(res.DegradedReason, "503") ||
			res.Summarized == 0 || res.Summarized+res.Trimmed+res.Kept != len(stored) || e.llm.Calls.Load() != 1 {
			t.Fatalf("degraded result: %+v", res)
		}
		sum := res.Messages[1].Content
		if !strings.HasPrefix(sum, MarkerZH+"\n（LLM 摘要不可用") || !strings.Contains(sum, "第27个问题") {
			t.Fatalf("extractive summary: %s", sum)
		}
		// The failure is in the log too, at WARN, with the agent, conversation and cause.
		if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "agent=1") ||
			!strings.Contains(l, "conversation=c-fail") || !strings.Contains(l, "503") {
			t.Fatalf("no WARN line for the failed summary:\n%s", l)
		}

		// Within the failure TTL every replica degrades at once, without calling the LLM again.
		_, res2, _ := r.post(t, 1, "c-fail", body("继续", budget, nil), false)
		if !res2.Degraded || !strings.Contains(res2.DegradedReason, "moments ago") || e.llm.Calls.Load() != 1 {
			t.Fatalf("second request during failure TTL: %+v (calls %d)", res2, e.llm.Calls.Load())
		}

		// After it, the LLM is tried again; once it recovers, the summary is real.
		clk.Advance(31 * time.Second)
		e.llm.SetHandler(func(llmtest.Received) llmtest.Reply { return llmtest.Reply{Content: "恢复后的摘要。"} })
		_, res3, _ := r.post(t, 1, "c-fail", body("继续", budget, nil), false)
		checkWindow(t, res3, "继续")
		if res3.Degraded || res3.SummaryKind != "llm" || !strings.Contains(res3.Messages[1].Content, "恢复后的摘要。") || e.llm.Calls.Load() != 2 {
			t.Fatalf("after recovery: %+v", res3)
		}
	})
}

func TestNoLLMConfiguredDegrades(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t))
	r := e.replica("a", replicaOpts{noLLM: true})
	e.store(1, "c", 0, 30, filler)
	_, probe, _ := r.post(t, 1, "c", body("好", 1_000_000, nil), false)
	_, res, _ := r.post(t, 1, "c", body("好", probe.Tokens.Before/2, nil), false)
	checkWindow(t, res, "好")
	if !res.Degraded || !strings.Contains(res.DegradedReason, "no LLM endpoint") || res.SummaryKind != "extractive" {
		t.Fatalf("%+v", res)
	}
}

func TestTooLargeIs413(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t))
	r := e.replica("a", replicaOpts{})
	st, _, msg := r.post(t, 1, "c", map[string]any{"systemPrompt": strings.Repeat("很长的系统提示词。", 500),
		"userMessage": "你好", "maxInputTokens": 1000}, false)
	if st != http.StatusRequestEntityTooLarge || !strings.Contains(msg, "maxInputTokens 1000") ||
		!strings.Contains(msg, "workspace files take") || !strings.Contains(msg, "current user message (") {
		t.Fatalf("status %d: %s", st, msg)
	}
}

func TestValidation(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t))
	r := e.replica("a", replicaOpts{})
	cases := []struct {
		name string
		body any
		want string
	}{
		{"no user message", map[string]any{"systemPrompt": "x"}, "userMessage is required"},
		{"blank user message", map[string]any{"userMessage": "  "}, "userMessage is empty"},
		{"negative budget", map[string]any{"userMessage": "x", "maxInputTokens": -1}, "maxInputTokens must be a whole number of at least 0, got -1"},
		{"null user message", map[string]any{"userMessage": nil}, "userMessage must be a string, got null"},
		{"huge budget", map[string]any{"userMessage": "x", "maxInputTokens": 1 << 40}, "maxInputTokens must be between"},
		{"unknown field", map[string]any{"userMessage": "x", "max_tokens": 5}, "unknown field"},
		{"bad role", map[string]any{"userMessage": "x", "messages": []any{map[string]any{"role": "bot", "content": "hi"}}}, `messages[0]: role "bot"`},
		{"tool without id", map[string]any{"userMessage": "x", "messages": []any{map[string]any{"role": "tool", "content": "1"}}}, "needs tool_call_id"},
		{"call without name", map[string]any{"userMessage": "x", "messages": []any{map[string]any{"role": "assistant",
			"tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"arguments": "{}"}}}}}}, "messages[0].tool_calls[0].function.name is required"},
		{"call with an empty name", map[string]any{"userMessage": "x", "messages": []any{map[string]any{"role": "assistant",
			"tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "", "arguments": "{}"}}}}}}, "function.name is empty"},
		{"calls on user", map[string]any{"userMessage": "x", "messages": []any{map[string]any{"role": "user", "content": "a",
			"tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "f", "arguments": "{}"}}}}}}, "only allowed on assistant"},
		{"multipart content", map[string]any{"userMessage": "x", "messages": []any{map[string]any{"role": "user",
			"content": []any{map[string]any{"type": "text", "text": "a"}}}}}, "content must be a string or null"},
		{"misspelt field", map[string]any{"userMessage": "x", "messages": []any{map[string]any{"role": "assistant", "toolCalls": []any{}}}}, "unknown field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, _, msg := r.post(t, 1, "c", tc.body, false)
			if st != http.StatusBadRequest || !strings.Contains(msg, tc.want) {
				t.Fatalf("status %d, message %q; want 400 containing %q", st, msg, tc.want)
			}
		})
	}
	// maxInputTokens 0 is the default, as in MateClaw (and as when it is absent).
	if st, res, msg := r.post(t, 1, "c", map[string]any{"userMessage": "x", "maxInputTokens": 0}, false); st != 200 || res.Tokens.Budget != windowConfig().DefaultMaxInputTokens {
		t.Fatalf("maxInputTokens 0: status %d %s, budget %+v; want the default %d", st, msg, res, windowConfig().DefaultMaxInputTokens)
	}
	long := strings.Repeat("x", 200)
	if st, _, msg := r.post(t, 1, long, map[string]any{"userMessage": "x"}, false); st != http.StatusBadRequest || !strings.Contains(msg, "conversationId") {
		t.Fatalf("long conversation id: %d %s", st, msg)
	}
	if st, _, _ := r.post(t, 0, "c", map[string]any{"userMessage": "x"}, false); st != http.StatusBadRequest {
		t.Fatalf("agent 0: %d", st)
	}
}

func TestInlineHistoryWithToolCalls(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t))
	r := e.replica("a", replicaOpts{})
	inline := []any{
		map[string]any{"role": "user", "content": "北京天气？"},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
			"function": map[string]any{"name": "get_weather", "arguments": `{"city":"北京"}`}}}},
		map[string]any{"role": "tool", "tool_call_id": "c1", "content": `{"t":30}`},
		map[string]any{"role": "assistant", "content": "30 度。"},
	}
	st, res, msg := r.post(t, 1, "inline-1", body("上海呢？", 0, map[string]any{"messages": inline}), false)
	if st != 200 {
		t.Fatal(msg)
	}
	checkWindow(t, res, "上海呢？")
	if res.HistorySource != "inline" || res.Kept != 4 || res.Messages[2].ToolCalls[0].Function.Name != "get_weather" {
		t.Fatalf("%+v", res)
	}
	// A tool-only assistant message goes out with content null, as OpenAI sends it.
	raw, _ := json.Marshal(res.Messages[2])
	if !strings.Contains(string(raw), `"content":null`) {
		t.Fatalf("tool call message: %s", raw)
	}
	// An empty inline history is a history (not "use the store").
	e.store(1, "inline-2", 0, 3, filler)
	_, res, _ = r.post(t, 1, "inline-2", body("x", 0, map[string]any{"messages": []any{}}), false)
	if res.HistoryMessages != 0 || res.HistorySource != "inline" {
		t.Fatalf("empty inline history: %+v", res)
	}
}

func TestCurrentMessageStoredFirstIsUsedOnce(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t))
	r := e.replica("a", replicaOpts{})
	e.store(1, "c", 0, 2, filler)
	if _, err := e.msgs.Add(context.Background(), storeMsg(1, "c", "user", "最新的问题")); err != nil {
		t.Fatal(err)
	}
	_, res, _ := r.post(t, 1, "c", body("最新的问题", 0, nil), false)
	checkWindow(t, res, "最新的问题")
	if !res.CurrentFromHistory || res.HistoryMessages != 6 || res.Messages[len(res.Messages)-2].Content == "最新的问题" {
		t.Fatalf("current message duplicated: %+v", res)
	}
}

// TestOversizedLastExchangeIsTruncatedNotDropped: when the last exchange alone exceeds the
// budget, it is kept with its oversized message cut and marked, instead of leaving the
// window with no history at all.
func TestOversizedLastExchangeIsTruncatedNotDropped(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		e := newEnv(t, db)
		r := e.replica("a", replicaOpts{})
		e.store(1, "c-big", 0, 3, filler)
		huge := "日志开头：" + strings.Repeat(filler, 400)
		if _, err := e.msgs.Add(context.Background(), storeMsg(1, "c-big", "user", "帮我看看这段日志"),
			storeMsg(1, "c-big", "assistant", huge)); err != nil {
			t.Fatal(err)
		}
		const budget = 3000
		st, res, msg := r.post(t, 1, "c-big", body("然后呢？", budget, nil), false)
		if st != 200 {
			t.Fatalf("status %d: %s", st, msg)
		}
		checkWindow(t, res, "然后呢？")
		n := len(res.Messages)
		if res.Kept != 2 || n < 3 || res.Messages[n-3].Content != "帮我看看这段日志" {
			t.Fatalf("last exchange not kept (kept %d): %+v", res.Kept, res.Messages)
		}
		got := res.Messages[n-2].Content
		if !strings.HasPrefix(got, "日志开头：") || !strings.HasSuffix(got, "\n... [截断]") || len(got) >= len(huge) {
			t.Fatalf("oversized reply not truncated and marked: %d bytes, ends %q", len(got), got[max(0, len(got)-40):])
		}
		// Cut to fit, not to nothing: most of the room is used.
		if res.Tokens.Total < budget*3/4 {
			t.Fatalf("total %d of budget %d: truncated more than needed", res.Tokens.Total, budget)
		}
		// The stored message itself is unchanged.
		rows, err := e.msgs.List(context.Background(), 1, "c-big", 0, 0)
		if err != nil || rows[len(rows)-1].Content != huge {
			t.Fatalf("stored message changed (%v)", err)
		}
	})
}

func TestRetryKeepsLastTwoExchanges(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		e := newEnv(t, db)
		r := e.replica("a", replicaOpts{})
		stored := e.store(1, "c-ptl", 0, 10, filler)
		_, res, msg := r.post(t, 1, "c-ptl", body("再试一次", 0, nil), true)
		if res == nil {
			t.Fatal(msg)
		}
		checkWindow(t, res, "再试一次")
		// Exchanges 8 (2 messages) and 9 (call and result: 4 messages).
		if !res.Emergency || res.Kept != 6 || res.Trimmed != len(stored)-6 || res.Summarized != 0 || res.LLMCalls != 0 {
			t.Fatalf("%+v", res)
		}
		if res.Messages[1].Content != stored[len(stored)-6].Content || e.llm.Calls.Load() != 0 {
			t.Fatalf("retry window does not start at the second-to-last exchange: %+v", res.Messages[1])
		}
	})
}

// Two API instances on one NATS compact the same conversation with one LLM call between them.
func TestTwoReplicasOneLLMCall(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		e := newEnv(t, db)
		a := e.replica("replica-a", replicaOpts{})
		b := e.replica("replica-b", replicaOpts{})
		e.store(7, "shared", 0, 40, filler)
		_, probe, _ := a.post(t, 7, "shared", body("下一步？", 1_000_000, nil), false)
		budget := probe.Tokens.Before / 2

		// The LLM answers only once both replicas have entered the compaction, so the
		// second one must find the first one's in-flight marker and wait on it.
		e.llm.SetHandler(func(llmtest.Received) llmtest.Reply {
			deadline := time.Now().Add(10 * time.Second)
			tick := time.NewTicker(2 * time.Millisecond)
			defer tick.Stop()
			for a.svc.Stats().Flights < 1 || b.svc.Stats().Flights < 1 {
				if time.Now().After(deadline) {
					return llmtest.Reply{Status: 500, Content: "both replicas never compacted at once"}
				}
				<-tick.C
			}
			return llmtest.Reply{Content: "共享的摘要。"}
		})
		var wg sync.WaitGroup
		results := make([]*Result, 2)
		for i, r := range []*replica{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, results[i], _ = r.post(t, 7, "shared", body("下一步？", budget, nil), false)
			}()
		}
		wg.Wait()
		if n := e.llm.Calls.Load(); n != 1 {
			t.Fatalf("%d LLM calls between two replicas, want 1", n)
		}
		calls, hits := 0, 0
		for _, res := range results {
			if res == nil {
				t.Fatal("a replica failed")
			}
			checkWindow(t, res, "下一步？")
			if res.Degraded || !strings.HasPrefix(res.Messages[1].Content, MarkerZH+"\n共享的摘要。\n\n[原始目标]\n第0个问题") {
				t.Fatalf("replica result: %+v", res)
			}
			calls += res.LLMCalls
			if res.CacheHit {
				hits++
			}
		}
		if calls != 1 || hits != 1 || a.svc.Stats().SharedHits+b.svc.Stats().SharedHits != 1 {
			t.Fatalf("calls %d, cache hits %d; stats a %+v b %+v", calls, hits, a.svc.Stats(), b.svc.Stats())
		}
		// And a third request on either replica is a plain cache hit.
		_, res, _ := b.post(t, 7, "shared", body("下一步？", budget, nil), false)
		if !res.CacheHit || res.LLMCalls != 0 || e.llm.Calls.Load() != 1 {
			t.Fatalf("third request: %+v", res)
		}
	})
}

func storeMsg(agent int64, conv, role, content string) conversation.Message {
	return conversation.Message{AgentID: agent, ConversationID: conv, Role: role, Content: content}
}

func TestFlushBeforeEviction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		e := newEnv(t, db)
		r := e.replica("a", replicaOpts{})
		stored := e.store(3, "c-flush", 0, 30, filler)
		_, probe, _ := r.post(t, 3, "c-flush", body("嗯", 1_000_000, nil), false)
		budget := probe.Tokens.Before / 2

		// No stream for summarize requests yet: tolerated, and said.
		_, res, _ := r.post(t, 3, "c-flush", body("嗯", budget, nil), false)
		if res.FlushRequested || !strings.Contains(res.FlushReason, "no stream accepts mate.memory.summarize.3") {
			t.Fatalf("without a stream: %+v", res)
		}

		ctx := context.Background()
		stream, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: bus.StreamEvents,
			Subjects: []string{bus.SubjectSummarize + ".>"}, Duplicates: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ { // the second publish is de-duplicated
			_, res, _ = r.post(t, 3, "c-flush", body("嗯", budget, nil), false)
			if !res.FlushRequested || res.FlushID == "" {
				t.Fatalf("flush not requested: %+v", res)
			}
		}
		info, _ := stream.Info(ctx)
		if info.State.Msgs != 1 {
			t.Fatalf("%d summarize requests stored, want 1", info.State.Msgs)
		}
		m, err := stream.GetMsg(ctx, info.State.FirstSeq)
		if err != nil {
			t.Fatal(err)
		}
		var fr FlushRequest
		_ = json.Unmarshal(m.Data, &fr)
		lastEvicted := stored[len(stored)-res.Kept-1].ID
		if m.Subject != "mate.memory.summarize.3" || m.Header.Get("Nats-Msg-Id") != res.FlushID ||
			fr.AgentID != 3 || fr.ConversationID != "c-flush" || fr.Reason != "context-eviction" || fr.RequestID != res.FlushID ||
			res.FlushID != flushID(3, "c-flush", lastEvicted) {
			t.Fatalf("summarize request %s %v %s", m.Subject, m.Header, m.Data)
		}

		// Once the summarizer's watermark covers the evicted messages, nothing is published.
		if err := db.DB.Create(&store.ExtractionWatermark{AgentID: 3, ConversationID: "c-flush",
			LastMessageID: lastEvicted, UpdateTime: time.Now()}).Error; err != nil {
			t.Fatal(err)
		}
		_, res, _ = r.post(t, 3, "c-flush", body("嗯", budget, nil), false)
		if res.FlushRequested || !strings.Contains(res.FlushReason, "already extracted") {
			t.Fatalf("after the watermark: %+v", res)
		}
	})
}

// The single-flight protocol on the bucket, step by step.
func TestSingleFlightProtocol(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t))
	ctx := context.Background()
	kv, err := openCache(ctx, e.js, "test_sf", time.Hour, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := &kvCache{kv: kv, ttl: time.Hour, owner: "me", lockTTL: time.Minute, failTTL: time.Minute, wait: 5 * time.Second, now: time.Now}
	computed := 0
	compute := func(ctx context.Context, renew func(context.Context) error) (summaryEntry, error) {
		computed++
		if err := renew(ctx); err != nil {
			return summaryEntry{}, err
		}
		return summaryEntry{Text: "s", Covers: 4}, nil
	}
	lock := func(h string, expires time.Time) uint64 {
		b, _ := json.Marshal(lockValue{Owner: "ghost", Expires: expires})
		rev, err := kv.Put(ctx, lockKey("c", h), b)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}

	t.Run("free", func(t *testing.T) {
		got, mine, err := c.singleFlight(ctx, "c", "h1", compute)
		if err != nil || !mine || got.Text != "s" || computed != 1 {
			t.Fatalf("%v %v %+v", err, mine, got)
		}
		if _, err := kv.Get(ctx, lockKey("c", "h1")); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatalf("marker left behind: %v", err)
		}
		got, mine, err = c.singleFlight(ctx, "c", "h1", compute)
		if err != nil || mine || computed != 1 {
			t.Fatalf("second flight recomputed: %v %v", err, mine)
		}
	})
	t.Run("stale marker is taken over", func(t *testing.T) {
		lock("h2", time.Now().Add(-time.Second))
		_, mine, err := c.singleFlight(ctx, "c", "h2", compute)
		if err != nil || !mine {
			t.Fatalf("%v %v", err, mine)
		}
	})
	t.Run("waits for the holder's result", func(t *testing.T) {
		lock("h3", time.Now().Add(time.Minute))
		done := make(chan error, 1)
		var mine bool
		go func() {
			var err error
			_, mine, err = c.singleFlight(ctx, "c", "h3", compute)
			done <- err
		}()
		before := computed
		b, _ := json.Marshal(summaryEntry{Text: "theirs", Covers: 4})
		if _, err := kv.Put(ctx, summaryKey("c", "h3"), b); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil || mine || computed != before {
			t.Fatalf("%v %v", err, mine)
		}
	})
	t.Run("holder vanishes without a result", func(t *testing.T) {
		rev := lock("h4", time.Now().Add(time.Minute))
		done := make(chan error, 1)
		var mine bool
		go func() {
			var err error
			_, mine, err = c.singleFlight(ctx, "c", "h4", compute)
			done <- err
		}()
		if err := kv.Delete(ctx, lockKey("c", "h4"), jetstream.LastRevision(rev)); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil || !mine {
			t.Fatalf("%v %v", err, mine)
		}
	})
	t.Run("fresh failure is shared", func(t *testing.T) {
		b, _ := json.Marshal(failValue{Owner: "other", Reason: "boom", Expires: time.Now().Add(time.Minute)})
		_, _ = kv.Put(ctx, failKey("c", "h5"), b)
		_, _, err := c.singleFlight(ctx, "c", "h5", compute)
		var sf *sharedFailure
		if !errors.As(err, &sf) || sf.reason != "boom" {
			t.Fatalf("%v", err)
		}
	})
	t.Run("compute failure is recorded", func(t *testing.T) {
		_, _, err := c.singleFlight(ctx, "c", "h6", func(context.Context, func(context.Context) error) (summaryEntry, error) {
			return summaryEntry{}, fmt.Errorf("llm down")
		})
		var ce *computeError
		if !errors.As(err, &ce) {
			t.Fatalf("%v", err)
		}
		if _, err := kv.Get(ctx, failKey("c", "h6")); err != nil {
			t.Fatalf("failure not recorded: %v", err)
		}
	})
	t.Run("wait times out", func(t *testing.T) {
		short := *c
		short.wait = 150 * time.Millisecond
		lock("h7", time.Now().Add(time.Minute))
		_, _, err := short.singleFlight(ctx, "c", "h7", compute)
		if !errors.Is(err, errWaitTimeout) {
			t.Fatalf("%v", err)
		}
	})
}

// A cached summary is used for the stored prefix only while that prefix is exactly what it
// summarized. A warm request does not count the prefix (the memo, see prefixMemo): the
// oldest messages deleted are seen at once, by the conversation's first id; any other
// change to the prefix once the recheck interval has passed. Then the history is read in
// full again and the changed content gets its own summary.
func TestResumeFallsBackWhenStoredPrefixChanges(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		for _, tc := range []struct {
			name   string
			victim int
			wait   time.Duration
		}{
			{"oldest message deleted", 0, 0},
			{"middle message deleted", 5, DefaultPrefixRecheck},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var skew atomic.Int64
				now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
				e := newEnv(t, db)
				r := e.replica("a", replicaOpts{opts: []Option{WithClock(now)}})
				conv := fmt.Sprintf("c-prefix-%d", tc.victim)
				stored := e.store(1, conv, 0, 40, filler)
				_, probe, _ := r.post(t, 1, conv, body("嗯", 1_000_000, nil), false)
				budget := probe.Tokens.Before * 2 / 3
				_, first, _ := r.post(t, 1, conv, body("嗯", budget, nil), false)
				_, again, _ := r.post(t, 1, conv, body("嗯", budget, nil), false)
				if first.LLMCalls != 1 || again.HistoryRead >= again.HistoryMessages {
					t.Fatalf("setup: first %+v again read %d", first.LLMCalls, again.HistoryRead)
				}
				if st := r.svc.Stats(); st.PrefixesTrusted != 1 || st.PrefixesCounted != 0 {
					t.Fatalf("the warm request counted the prefix: %+v", st)
				}
				if err := db.DB.Delete(&store.Message{}, stored[tc.victim].ID).Error; err != nil {
					t.Fatal(err)
				}
				skew.Add(int64(tc.wait))
				_, res, _ := r.post(t, 1, conv, body("嗯", budget, nil), false)
				checkWindow(t, res, "嗯")
				if res.HistoryRead != len(stored)-1 || res.HistoryMessages != len(stored)-1 || res.LLMCalls != 1 || res.CacheHit {
					t.Fatalf("after the prefix changed: read %d of %d, calls %d, hit %v", res.HistoryRead, res.HistoryMessages, res.LLMCalls, res.CacheHit)
				}
			})
		}
	})
}

// A prefix counted as exact (a summary another replica computed) is trusted from then on
// within the recheck interval, and counted again after it: a late change is never served
// for longer than that.
func TestPrefixCountedAgainAfterRecheck(t *testing.T) {
	db := storetest.SQLite(t)
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	e := newEnv(t, db)
	a := e.replica("a", replicaOpts{})
	b := e.replica("b", replicaOpts{opts: []Option{WithClock(now)}})
	e.store(1, "c-recheck", 0, 40, filler)
	_, probe, _ := a.post(t, 1, "c-recheck", body("嗯", 1_000_000, nil), false)
	budget := probe.Tokens.Before * 2 / 3
	if _, first, _ := a.post(t, 1, "c-recheck", body("嗯", budget, nil), false); first.LLMCalls != 1 {
		t.Fatalf("setup: %d calls", first.LLMCalls)
	}
	for i, want := range []Stats{{PrefixesCounted: 1}, {PrefixesCounted: 1, PrefixesTrusted: 1}} {
		_, res, _ := b.post(t, 1, "c-recheck", body("嗯", budget, nil), false)
		st := b.svc.Stats()
		if res.HistoryRead >= res.HistoryMessages || st.PrefixesCounted != want.PrefixesCounted || st.PrefixesTrusted != want.PrefixesTrusted {
			t.Fatalf("request %d on the other replica: read %d of %d, %+v", i, res.HistoryRead, res.HistoryMessages, st)
		}
	}
	skew.Add(int64(DefaultPrefixRecheck))
	if _, res, _ := b.post(t, 1, "c-recheck", body("嗯", budget, nil), false); res.HistoryRead >= res.HistoryMessages || b.svc.Stats().PrefixesCounted != 2 {
		t.Fatalf("after the recheck interval: read %d of %d, %+v", res.HistoryRead, res.HistoryMessages, b.svc.Stats())
	}
}

// syncBuf is a log sink safe for the service's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A preview (the console's) never calls the model, stores no summary and publishes no flush;
// it uses a summary a real request cached.
func TestPreviewHasNoSideEffects(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		e := newEnv(t, db)
		r := e.replica("a", replicaOpts{})
		e.store(4, "c-preview", 0, 30, filler)
		const q = "现在怎么样"
		_, probe, _ := r.post(t, 4, "c-preview", body(q, 1_000_000, nil), false)
		budget := probe.Tokens.Before / 2
		ctx := context.Background()
		stream, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: bus.StreamEvents,
			Subjects: []string{bus.SubjectSummarize + ".>"}, Duplicates: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		preview := func() *Result {
			t.Helper()
			res, err := r.svc.Assemble(ctx, Request{AgentID: 4, ConversationID: "c-preview", UserMessage: q,
				MaxInputTokens: budget, Preview: true})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}

		res := preview()
		if !res.Compacted || res.SummaryKind != "extractive" || res.CacheHit || res.FlushRequested ||
			!strings.Contains(res.FlushReason, "preview") || len(res.Warnings) == 0 || !strings.Contains(res.Warnings[0], "preview") {
			t.Fatalf("uncached preview: %+v", res)
		}
		if n := len(e.llm.Received()); n != 0 {
			t.Fatalf("a preview called the model %d times", n)
		}
		if info, _ := stream.Info(ctx); info.State.Msgs != 0 {
			t.Fatalf("a preview published %d summarize requests", info.State.Msgs)
		}

		// A real request computes the summary (one model call) and asks for a flush.
		_, real, _ := r.post(t, 4, "c-preview", body(q, budget, nil), false)
		if real.SummaryKind != "llm" || real.LLMCalls != 1 || !real.FlushRequested {
			t.Fatalf("real request: %+v", real)
		}
		// The preview now shows that cached summary, still without a call or a publish.
		res = preview()
		if res.SummaryKind != "llm" || !res.CacheHit || res.Summarized != real.Summarized || res.FlushRequested {
			t.Fatalf("cached preview: %+v", res)
		}
		if n := len(e.llm.Received()); n != 1 {
			t.Fatalf("the model was called %d times, want the real request's 1", n)
		}
		if info, _ := stream.Info(ctx); info.State.Msgs != 1 {
			t.Fatalf("%d summarize requests stored, want the real request's 1", info.State.Msgs)
		}
	})
}
