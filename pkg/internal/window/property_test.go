package window

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/tokens"
)

var (
	zhWords = []string{"上下文", "窗口", "压缩", "摘要", "模型", "用户", "问题", "我们", "今天", "数据库", "记忆", "工具", "调用", "结果", "预算", "北京", "天气", "代码", "测试", "部署"}
	enWords = []string{"the", "context", "window", "summary", "model", "token", "budget", "deploy", "NATS", "replica", "cache", "tool", "call", "result", "goroutine", "database", "42", "3.14", "{", "}"}
)

func randText(rng *rand.Rand) string {
	n := rng.Intn(40)
	if rng.Intn(25) == 0 {
		n = 300 + rng.Intn(900) // now and then a very long message (a pasted log, a tool dump)
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		if rng.Intn(2) == 0 {
			b.WriteString(zhWords[rng.Intn(len(zhWords))])
		} else {
			b.WriteString(" " + enWords[rng.Intn(len(enWords))])
		}
		if rng.Intn(12) == 0 {
			b.WriteString("。\n")
		}
	}
	return b.String()
}

// randomConversation: exchanges of a user message, 0-2 rounds of tool calls (1-3 calls each,
// every call answered), usually an assistant answer (sometimes none: two user messages in a
// row), now and then a system note, sometimes an assistant greeting before any user message.
func randomConversation(rng *rand.Rand) []Message {
	var out []Message
	if rng.Intn(5) == 0 {
		out = append(out, Message{Role: RoleAssistant, Content: "你好！有什么可以帮你？"})
	}
	exchanges := rng.Intn(30)
	if rng.Intn(6) == 0 {
		exchanges += 60
	}
	for i := 0; i < exchanges; i++ {
		out = append(out, Message{Role: RoleUser, Content: randText(rng) + "?"})
		for r := rng.Intn(3); r > 0; r-- {
			k := 1 + rng.Intn(3)
			call := Message{Role: RoleAssistant}
			if rng.Intn(3) == 0 {
				call.Content = "让我查一下。"
			}
			for j := 0; j < k; j++ {
				call.ToolCalls = append(call.ToolCalls, ToolCall{ID: fmt.Sprintf("call_%d_%d_%d", i, r, j), Type: "function",
					Function: FunctionCall{Name: "lookup", Arguments: fmt.Sprintf(`{"q":%q}`, randText(rng))}})
			}
			out = append(out, call)
			for j := 0; j < k; j++ {
				out = append(out, Message{Role: RoleTool, ToolCallID: call.ToolCalls[j].ID, Content: randText(rng)})
			}
		}
		if rng.Intn(6) != 0 {
			out = append(out, Message{Role: RoleAssistant, Content: randText(rng)})
		}
		if rng.Intn(20) == 0 {
			out = append(out, Message{Role: RoleSystem, Content: "note: " + randText(rng)})
		}
	}
	return out
}

// TestPropertiesRandomConversations checks, over random conversations and budgets, with a
// working LLM, a failing one and none: the window fits whenever the system prompt and the
// current message do (413 otherwise); the current message is last; the history kept is a
// verbatim suffix starting at a unit boundary (no message merged, reordered or split from
// its tool call); the summary, if any, is a user message with the marker right after the
// system prompt; the last exchange is kept whole whenever it fits; every history message is
// accounted for.
func TestPropertiesRandomConversations(t *testing.T) {
	e := newEnv(t, storetest.SQLite(t))
	e.llm.SetHandler(func(r llmtest.Received) llmtest.Reply {
		if strings.Contains(r.Messages[1].Content, "FAIL-SUMMARY") {
			return llmtest.Reply{Status: 500, Content: "scripted failure"}
		}
		return llmtest.Reply{Content: "摘要：" + strings.Repeat("要点。", 1+len(r.Messages[1].Content)%20)}
	})
	cfg := windowConfig()
	cfg.SummaryMaxTokens = 120
	withLLM := e.replica("with-llm", replicaOpts{cfg: cfg, opts: []Option{WithChunkTokens(2500)}})
	noLLM := e.replica("no-llm", replicaOpts{cfg: cfg, noLLM: true})
	ctx := context.Background()
	rng := rand.New(rand.NewSource(20260301))
	models := []string{"", "gpt-4o", "gpt-4", "deepseek-chat"}
	cases := 250
	if testing.Short() {
		cases = 60
	}
	stats := map[string]int{}
	for c := 0; c < cases; c++ {
		hist := randomConversation(rng)
		svc := withLLM.svc
		if rng.Intn(4) == 0 {
			svc = noLLM.svc
		}
		if len(hist) > 0 && rng.Intn(8) == 0 {
			hist[0].Content += " FAIL-SUMMARY"
		}
		req := Request{AgentID: 1 + int64(rng.Intn(3)), ConversationID: fmt.Sprintf("prop-%d", c),
			SystemPrompt: "你是助手。" + strings.Repeat("规则。", rng.Intn(200)), UserMessage: randText(rng) + "现在呢？",
			Model: models[rng.Intn(len(models))], MaxInputTokens: 300 + rng.Intn(9000), Inline: true, Messages: hist}
		if rng.Intn(10) == 0 {
			req.MaxInputTokens = 50 + rng.Intn(400)
		}
		emergency := rng.Intn(6) == 0
		var res *Result
		var err error
		if emergency {
			res, err = svc.Retry(ctx, req)
		} else {
			res, err = svc.Assemble(ctx, req)
		}
		name := fmt.Sprintf("case %d (%d messages, budget %d, model %q, emergency %v)", c, len(hist), req.MaxInputTokens, req.Model, emergency)
		var tl *TooLargeError
		if errors.As(err, &tl) {
			if tl.System+tl.Current+tl.Priming <= tl.Budget {
				t.Fatalf("%s: 413 although system %d + current %d fit in %d", name, tl.System, tl.Current, tl.Budget)
			}
			stats["413"]++
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if checkProperties(t, name, req, res, emergency) {
			stats["last exchange truncated"]++
		}
		switch {
		case res.Degraded:
			stats["degraded"]++
		case res.SummaryKind == "llm":
			stats["summarized"]++
		case res.Compacted:
			stats["trimmed only"]++
		default:
			stats["untouched"]++
		}
	}
	t.Logf("outcomes over %d random conversations: %v", cases, stats)
	for _, k := range []string{"413", "degraded", "summarized", "trimmed only", "untouched", "last exchange truncated"} {
		if stats[k] == 0 {
			t.Errorf("no case ended %q: the generator does not cover it", k)
		}
	}
}

// checkProperties reports whether a message of the history was truncated to fit.
func checkProperties(t *testing.T, name string, req Request, res *Result, emergency bool) (truncated bool) {
	t.Helper()
	checkWindow(t, res, req.UserMessage)
	msgs := res.Messages
	i := 0
	if msgs[0].Role == RoleSystem {
		i = 1
	}
	hasSummary := i < len(msgs) && msgs[i].Role == RoleUser && strings.HasPrefix(msgs[i].Content, Marker(res.Language))
	if hasSummary {
		i++
		if emergency {
			t.Fatalf("%s: emergency window has a summary", name)
		}
	}
	if hasSummary != (res.Summarized > 0) {
		t.Fatalf("%s: summary present %v but summarized %d", name, hasSummary, res.Summarized)
	}
	kept := msgs[i : len(msgs)-1]
	hist := req.Messages
	if len(kept) != res.Kept || len(kept) > len(hist) {
		t.Fatalf("%s: kept history is not a suffix of the input (%d kept)", name, len(kept))
	}
	start := len(hist) - len(kept)
	if start > 0 && start < len(hist) && hist[start].Role == RoleTool {
		t.Fatalf("%s: the kept history starts with a tool result whose call was dropped", name)
	}
	items := make([]item, len(hist))
	tk, _ := counter.ByEncoding(res.Tokenizer)
	for j, m := range hist {
		items[j] = item{Message: m, tokens: tokens.MessageTokens(tk, counted(m))}
	}
	lastEx := buildLayout(items).exchangeStartItem(1)
	need := res.Tokens.System + res.Tokens.Current + res.Tokens.Priming
	for _, it := range items[lastEx:] {
		need += it.tokens
	}
	oversized := need > res.Tokens.Budget
	// Verbatim, except messages of an oversized last exchange cut to fit: their beginning,
	// marked as truncated. Whole older units are dropped first, so a cut message means
	// nothing before the last exchange is kept (and no summary: it goes before any cut).
	for j, m := range kept {
		at := start + j
		want := hist[at]
		if reflect.DeepEqual(m, want) {
			continue
		}
		cut := m
		cut.Content = want.Content
		marker := truncatedMarker(res.Language)
		if !strings.HasSuffix(m.Content, marker) || !strings.HasPrefix(want.Content, strings.TrimSuffix(m.Content, marker)) || !reflect.DeepEqual(cut, want) {
			t.Fatalf("%s: kept history is not a verbatim suffix of the input (%d kept; message %d differs: %.80q vs %.80q)", name, len(kept), j, m.Content, want.Content)
		}
		truncated = true
		switch {
		case !oversized:
			t.Fatalf("%s: message %d of the history was truncated although the last exchange (%d tokens with system and current) fits whole in %d", name, at, need, res.Tokens.Budget)
		case start < lastEx:
			t.Fatalf("%s: message %d was truncated while %d older messages before the last exchange (from %d) were kept", name, at, lastEx-start, lastEx)
		case hasSummary:
			t.Fatalf("%s: message %d was truncated while the summary was kept", name, at)
		}
	}
	// The last exchange is kept whole whenever it fits next to the system prompt and the
	// current message.
	if !oversized && start > lastEx {
		t.Fatalf("%s: the last exchange (%d tokens with system and current) fits in %d but was cut", name, need, res.Tokens.Budget)
	}
	if emergency {
		if two := buildLayout(items).exchangeStartItem(2); start < two {
			t.Fatalf("%s: emergency window keeps more than the last 2 exchanges", name)
		}
		if res.LLMCalls != 0 {
			t.Fatalf("%s: emergency window called the LLM", name)
		}
	}
	if res.Degraded && (res.DegradedReason == "" || res.SummaryKind != "extractive" && res.Summarized > 0) {
		t.Fatalf("%s: degraded without a reason or an extractive summary: %+v", name, res)
	}
	if !res.Compacted && res.Kept != len(hist) {
		t.Fatalf("%s: history dropped without compaction", name)
	}
	return truncated
}

// TestPropertiesGrowingStoredConversations stores random conversations a few exchanges at a
// time and asks for the window after each step, so that requests resume from the summary
// cached by the previous step: the same properties must hold as for a full read.
func TestPropertiesGrowingStoredConversations(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		e := newEnv(t, db)
		cfg := windowConfig()
		cfg.SummaryMaxTokens = 120
		r := e.replica("grow", replicaOpts{cfg: cfg, opts: []Option{WithChunkTokens(3000)}})
		ctx := context.Background()
		rng := rand.New(rand.NewSource(7))
		convs := 12
		if testing.Short() {
			convs = 4
		}
		resumed := 0
		for c := 0; c < convs; c++ {
			conv := fmt.Sprintf("grow-%d", c)
			all := randomConversation(rng)
			for len(all) < 40 {
				all = append(all, randomConversation(rng)...)
			}
			var stored []Message
			budget := 1500 + rng.Intn(4000)
			for len(stored) < len(all) {
				// Store up to the next few user messages (never splitting a tool unit).
				next := len(stored) + 1
				for users := 0; next < len(all) && (all[next].Role != RoleUser || users < 2); next++ {
					if all[next].Role == RoleUser {
						users++
					}
				}
				var rows []conversation.Message
				for _, m := range all[len(stored):next] {
					rows = append(rows, toStored(1, conv, m))
				}
				if _, err := e.msgs.Add(ctx, rows...); err != nil {
					t.Fatal(err)
				}
				stored = all[:next]
				req := Request{AgentID: 1, ConversationID: conv, SystemPrompt: "你是助手。", UserMessage: "继续？",
					Model: "gpt-4o", MaxInputTokens: budget}
				res, err := r.svc.Assemble(ctx, req)
				if err != nil {
					var tl *TooLargeError
					if errors.As(err, &tl) {
						continue
					}
					t.Fatal(err)
				}
				if res.HistoryRead < res.HistoryMessages {
					resumed++
				}
				name := fmt.Sprintf("%s after %d messages (budget %d)", conv, len(stored), budget)
				req.Messages = normalize(stored)
				checkProperties(t, name, req, res, false)
			}
		}
		if resumed == 0 {
			t.Fatal("no request resumed from a cached summary: the test does not cover it")
		}
		t.Logf("%d requests resumed from a cached summary", resumed)
	})
}

func toStored(agent int64, conv string, m Message) conversation.Message {
	out := conversation.Message{AgentID: agent, ConversationID: conv, Role: m.Role, Content: m.Content,
		ToolCallID: m.ToolCallID, Name: m.Name}
	if len(m.ToolCalls) > 0 {
		out.ToolCalls, _ = json.Marshal(m.ToolCalls)
	}
	return out
}

// normalize makes messages compare equal to their stored round trip.
func normalize(ms []Message) []Message {
	out := make([]Message, len(ms))
	for i, m := range ms {
		row := toStored(1, "x", m)
		out[i], _ = fromStored(row)
	}
	return out
}
