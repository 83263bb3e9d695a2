package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/bus/bustest"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/window"
)

// windowApp starts an API process against db with the fake LLM; natsURL "" starts the
// embedded server (make run), otherwise the process joins that NATS like a replica.
func windowApp(t *testing.T, db storetest.DB, dataDir string, fake *llmtest.Server, natsURL string, targets ...string) string {
	t.Helper()
	cfg := config.Default()
	cfg.Mate.DataDir = dataDir
	cfg.Mate.HTTP.Addr = "127.0.0.1:0"
	cfg.Mate.NATS.URL = natsURL
	cfg.Mate.LLM.BaseURL, cfg.Mate.LLM.APIKey, cfg.Mate.LLM.Model = fake.URL+"/v1/", "test-key", "fake-model"
	if db.Driver == "mysql" {
		cfg.Mate.Database = config.Database{Driver: "mysql", DSN: db.DSN}
	}
	ctx := context.Background()
	a, err := app.New(ctx, app.Options{Config: cfg, Log: slog.New(slog.DiscardHandler), Targets: targets})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return "http://" + a.Addr
}

func postJSON(t *testing.T, url string, body any, out any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env struct {
		Msg  string          `json:"msg"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("POST %s: %d %q", url, resp.StatusCode, raw)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, env.Msg)
	}
	if out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}

// postConversation stores n exchanges through the REST API and returns the messages.
func postConversation(t *testing.T, base string, agent int64, conv string, n int) []map[string]any {
	t.Helper()
	var all []map[string]any
	for i := 0; i < n; i++ {
		all = append(all,
			map[string]any{"role": "user", "content": fmt.Sprintf("第%d轮：我们的 context window 预算是多少？顺便看看 deploy 的进度。", i)},
			map[string]any{"role": "assistant", "content": fmt.Sprintf("Round %d: 预算是 8000 tokens；deploy 已完成 %d%%。", i, i%100)})
	}
	for start := 0; start < len(all); start += 1000 {
		end := min(start+1000, len(all))
		postJSON(t, fmt.Sprintf("%s/api/v1/conversations/%s/messages", base, conv),
			map[string]any{"agentId": agent, "messages": all[start:end]}, nil)
	}
	return all
}

// TestContextWindowDoneWhen is issue 5's acceptance check against the real process: a
// 2,000-message conversation, a context request with maxInputTokens 8000, the same request
// again without an LLM call, and the emergency retry.
func TestContextWindowDoneWhen(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
			return llmtest.Reply{Content: "摘要：用户反复询问 context window 预算（8000 tokens）和 deploy 进度。"}
		})
		base := windowApp(t, db, t.TempDir(), fake, "")
		all := postConversation(t, base, 1, "conv-2000", 1000)
		url := base + "/api/v1/agents/1/conversations/conv-2000/context"
		req := map[string]any{"systemPrompt": "你是 MateClaw 助手。", "userMessage": "现在进度如何？", "maxInputTokens": 8000}

		var res window.Result
		postJSON(t, url, req, &res)
		m := res.Messages
		if res.Tokens.Total > 8000 || res.HistoryMessages != 2000 || !res.Compacted || res.Degraded {
			t.Fatalf("result: %+v", res.Tokens)
		}
		if m[0].Role != "system" || !strings.HasPrefix(m[0].Content, "你是 MateClaw 助手。\n\n--- AGENTS.md ---") {
			t.Fatalf("first message is not the system prompt with workspace files: %.80q", m[0].Content)
		}
		if m[1].Role != "user" || !strings.HasPrefix(m[1].Content, window.MarkerZH+"\n摘要：") {
			t.Fatalf("second message is not the marked summary: %+v", m[1])
		}
		recent := m[2 : len(m)-1]
		if len(recent) < 4 || len(recent) != res.Kept {
			t.Fatalf("%d recent messages kept", len(recent))
		}
		for i, msg := range recent {
			want := all[len(all)-len(recent)+i]
			if msg.Role != want["role"] || msg.Content != want["content"] {
				t.Fatalf("recent message %d is not verbatim: %+v", i, msg)
			}
		}
		if last := m[len(m)-1]; last.Role != "user" || last.Content != "现在进度如何？" {
			t.Fatalf("current message is not last: %+v", last)
		}
		// The all-in-one process also runs the summarizer, which the eviction flush wakes up
		// and which uses the same LLM: count the context-summary calls only.
		summaryCalls := func() int {
			n := 0
			for _, r := range fake.Received() {
				if len(r.Messages) > 0 && strings.Contains(r.Messages[0].Content, "对话上下文压缩助手") {
					n++
				}
			}
			return n
		}
		calls := summaryCalls()
		if calls == 0 || res.LLMCalls != calls || !res.FlushRequested {
			t.Fatalf("LLM calls: fake saw %d, result says %d; flush %v %s", calls, res.LLMCalls, res.FlushRequested, res.FlushReason)
		}

		var again window.Result
		postJSON(t, url, req, &again)
		if summaryCalls() != calls || again.LLMCalls != 0 || !again.CacheHit || again.Messages[1].Content != m[1].Content || again.HistoryRead >= 2000 {
			t.Fatalf("the same request made a new LLM call (%d → %d) or missed the cache", calls, summaryCalls())
		}

		var retry window.Result
		postJSON(t, url+"/retry", req, &retry)
		rm := retry.Messages
		if !retry.Emergency || retry.Kept != 4 || len(rm) != 6 || summaryCalls() != calls || retry.LLMCalls != 0 ||
			rm[1].Content != all[1996]["content"] || rm[4].Content != all[1999]["content"] {
			t.Fatalf("retry: kept %d, %d messages, calls %d", retry.Kept, len(rm), summaryCalls())
		}
	})
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestContextWindowTwoAPIProcesses: two API processes on one NATS compact the same
// conversation at the same moment with one LLM call between them.
func TestContextWindowTwoAPIProcesses(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		_, dialer := bustest.Server(t)
		var mu sync.Mutex
		gate := make(chan struct{})
		arrived := 0
		fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
			mu.Lock()
			arrived++
			mu.Unlock()
			select { // held until the other process is waiting (or the test gave up)
			case <-gate:
			case <-time.After(15 * time.Second):
			}
			return llmtest.Reply{Content: "共享摘要。"}
		})
		dir := t.TempDir()
		a := windowApp(t, db, dir, fake, dialer.URL, app.TargetAPI)
		b := windowApp(t, db, dir, fake, dialer.URL, app.TargetAPI)
		postConversation(t, a, 5, "shared", 200)
		req := map[string]any{"userMessage": "继续", "maxInputTokens": 4000}

		var wg sync.WaitGroup
		results := make([]window.Result, 2)
		ask := func(i int, base string) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				postJSON(t, base+"/api/v1/agents/5/conversations/shared/context", req, &results[i])
			}()
		}
		// a reaches the LLM (held there); b then finds a's in-flight marker and waits on
		// it, which its metrics show; only then does the LLM answer.
		ask(0, a)
		poll.Until(t, 10*time.Second, "the first request to reach the LLM", func() bool { mu.Lock(); defer mu.Unlock(); return arrived > 0 })
		ask(1, b)
		poll.Until(t, 10*time.Second, "the second process to wait on the first", func() bool {
			return strings.Contains(get(t, b+"/metrics"), "matememory_context_summary_waiting 1")
		})
		close(gate)
		wg.Wait()
		if n := fake.Calls.Load(); n != 1 {
			t.Fatalf("%d LLM calls between two API processes, want 1", n)
		}
		for _, r := range results {
			if !strings.HasPrefix(r.Messages[1].Content, window.MarkerZH+"\n共享摘要。\n\n[原始目标]\n") || r.Tokens.Total > 4000 {
				t.Fatalf("result: %+v", r.Messages[1])
			}
		}
		if results[0].LLMCalls+results[1].LLMCalls != 1 || !(results[0].CacheHit || results[1].CacheHit) {
			t.Fatalf("calls %d+%d", results[0].LLMCalls, results[1].LLMCalls)
		}
	})
}
