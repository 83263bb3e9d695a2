package summarizer

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/prompt"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/tokens"
)

func TestDailyTail(t *testing.T) {
	short := "# 2026-12-01\n\n- 一\n"
	if got := dailyTail("zh", short, 100); got != short {
		t.Fatalf("a short note changed: %q", got)
	}
	var b strings.Builder
	b.WriteString("# 2026-12-01\n\n")
	for i := range 100 {
		fmt.Fprintf(&b, "- 第 %d 条要点，讨论了上下文窗口的压缩。\n", i)
	}
	note := b.String()
	for _, lang := range []string{"zh", "en"} {
		got := dailyTail(lang, note, 200)
		head, rest, ok := strings.Cut(got, "\n")
		if !ok || !strings.HasPrefix(head, "…") || !strings.HasSuffix(note, rest) {
			t.Fatalf("%s: not a marked tail of the note: %q", lang, got)
		}
		if n := utf8.RuneCountInString(rest); n > 200 || n < 150 {
			t.Fatalf("%s: tail of %d runes, want at most 200 and whole lines", lang, n)
		}
		if !strings.HasPrefix(rest, "- 第 ") {
			t.Fatalf("%s: the tail does not start at a line: %q", lang, rest)
		}
		omitted := strings.Count(note[:len(note)-len(rest)], "\n")
		if !strings.Contains(head, fmt.Sprint(omitted)) {
			t.Fatalf("%s: marker %q does not say %d lines were left out", lang, head, omitted)
		}
	}
}

// TestExtractionPromptTokens measures the extraction prompt (issue 14, point 5) against the
// spec's on the same data, and fails if it grows past the goals: at most 1.0× the spec's
// tokens per extraction and 0.4× per covered conversation.
//
// The data: one agent's day of 24 conversations (6 messages each, Chinese), one every 2
// minutes, with a 5-minute cooldown; PROFILE.md and MEMORY.md of a few hundred characters.
// The spec's extraction (its templates as they were, testdata/spec-prompt, with the whole
// daily note and one conversation's transcript) runs once per conversation; ours once per
// cooldown, covering every conversation that arrived meanwhile, with the tail of the daily
// note. Both see the same daily note, grown by a 3-line entry per conversation covered.
// Tokens are o200k (gpt-4o), counted as the chat messages sent.
func TestExtractionPromptTokens(t *testing.T) {
	for _, lang := range []string{"zh", "en"} {
		t.Run(lang, func(t *testing.T) { measurePromptTokens(t, lang) })
	}
}

func measurePromptTokens(t *testing.T, lang string) {
	tk, err := tokens.NewCounter().For("gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	fake := llmtest.New(t, func(llmtest.Received) llmtest.Reply {
		return llmtest.Reply{Content: `{"should_update":false,"reason":"","daily_entry":"","memory_update":"","profile_update":""}`}
	})
	ours := &llmProvider{c: llm.NewOpenAI(fake.Config()), prompts: prompt.NewLoader(""), json: true, maxTokens: 2000, m: NewMetrics(nil)}
	spec := prompt.NewLoader("testdata/spec-prompt")
	chat := func(msgs []llm.Message) int {
		var ms []tokens.Message
		for _, m := range msgs {
			ms = append(ms, tokens.Message{Role: m.Role, Content: m.Content})
		}
		return tokens.ChatTokens(tk, ms)
	}

	profile, memory, line := promptDay(lang)
	daily := "# 2026-12-01\n\n"
	const convs, arrivalMin, cooldownMin = 24, 2, 5
	var pending [][]store.Message
	nextFree := 0 // minute the cooldown ends
	var specTokens, specCalls, ourTokens, ourCalls, covered, prevTokens int
	for c := 0; c <= convs; c++ {
		now := c * arrivalMin
		if c < convs {
			conv := fmt.Sprintf("c%02d", c)
			var msgs []store.Message
			for i := range 6 {
				role := "user"
				if i%2 == 1 {
					role = "assistant"
				}
				msgs = append(msgs, store.Message{ID: int64(c*6 + i + 1), ConversationID: conv, Role: role, Content: line(c, i)})
			}
			// The spec: one extraction per conversation, everything in full.
			sys, err := spec.Render(prompt.SummarizeSystem, lang, map[string]string{"date": "2026-12-01"})
			if err != nil {
				t.Fatal(err)
			}
			user, err := spec.Render(prompt.SummarizeUser, lang, map[string]string{"date": "2026-12-01",
				"profile": profile, "memory": memory, "daily": daily, "transcript": Transcript(lang, msgs),
				"conversation_count": "1", "message_count": "6"})
			if err != nil {
				t.Fatal(err)
			}
			specTokens += chat([]llm.Message{{Role: "system", Content: sys}, {Role: "user", Content: user}})
			specCalls++
			pending = append(pending, msgs)
		}
		if len(pending) == 0 || (now < nextFree && c < convs) {
			continue
		}
		// Ours: one extraction for everything pending once the cooldown is over.
		var batch []store.Message
		for _, p := range pending {
			batch = append(batch, p...)
		}
		before := len(fake.Received())
		if _, err := ours.extract(context.Background(), extractInput{Language: lang, Date: "2026-12-01",
			Profile: profile, Memory: memory, Daily: daily, Messages: batch, Conversations: len(pending)}); err != nil {
			t.Fatal(err)
		}
		got := fake.Received()
		if len(got) != before+1 {
			t.Fatalf("%d requests, want one", len(got)-before)
		}
		ourTokens += chat(got[len(got)-1].Messages)
		// What the same batch cost before this change: the spec's templates, the whole note.
		sys, err := spec.Render(prompt.SummarizeSystem, lang, map[string]string{"date": "2026-12-01"})
		if err != nil {
			t.Fatal(err)
		}
		user, err := spec.Render(prompt.SummarizeUser, lang, map[string]string{"date": "2026-12-01",
			"profile": profile, "memory": memory, "daily": daily, "transcript": Transcript(lang, batch),
			"conversation_count": fmt.Sprint(len(pending)), "message_count": fmt.Sprint(len(batch))})
		if err != nil {
			t.Fatal(err)
		}
		prevTokens += chat([]llm.Message{{Role: "system", Content: sys}, {Role: "user", Content: user}})
		ourCalls++
		covered += len(pending)
		for _, p := range pending {
			daily += fmt.Sprintf("- %s：%s\n- %s\n- %s\n", p[0].ConversationID, p[0].Content, p[1].Content, p[3].Content)
		}
		pending = nil
		nextFree = now + cooldownMin
	}
	if covered != convs {
		t.Fatalf("covered %d of %d conversations", covered, convs)
	}
	perExtraction := float64(ourTokens) / float64(ourCalls) / (float64(specTokens) / float64(specCalls))
	perConversation := float64(ourTokens) / float64(covered) / (float64(specTokens) / float64(specCalls))
	t.Logf("spec: %d extractions, %d prompt tokens (%.0f each); ours: %d extractions covering %d conversations, %d tokens (%.0f each, %.0f per conversation): %.2f× per extraction, %.2f× per conversation",
		specCalls, specTokens, float64(specTokens)/float64(specCalls), ourCalls, covered, ourTokens,
		float64(ourTokens)/float64(ourCalls), float64(ourTokens)/float64(covered), perExtraction, perConversation)
	framing := func(l *prompt.Loader) int {
		sys, _ := l.Render(prompt.SummarizeSystem, lang, map[string]string{"date": "2026-12-01"})
		user, _ := l.Render(prompt.SummarizeUser, lang, map[string]string{"date": "2026-12-01", "conversation_count": "1", "message_count": "6"})
		return chat([]llm.Message{{Role: "system", Content: sys}, {Role: "user", Content: user}})
	}
	t.Logf("template and framing: spec %d tokens, ours %d; the same batches with the spec's templates and the whole note: %d tokens (%.0f each)",
		framing(spec), framing(prompt.NewLoader("")), prevTokens, float64(prevTokens)/float64(ourCalls))
	if perExtraction > 1.0 || perConversation > 0.4 {
		t.Errorf("prompt tokens %.2f× the spec's per extraction (goal ≤ 1.0) and %.2f× per conversation (goal ≤ 0.4)", perExtraction, perConversation)
	}
}

// promptDay is the test's agent: its PROFILE.md and MEMORY.md, and the content of message i
// of conversation c.
func promptDay(lang string) (profile, memory string, line func(c, i int) string) {
	if lang == "en" {
		profile = "# Profile\n\n- Name: Li Wei, backend engineer in Hangzhou\n- Stack: Go, PostgreSQL, NATS, Kubernetes\n- Prefers short answers with code; dislikes long preambles\n- Works on a payments service; on call every other week\n"
		memory = "# Memory\n\n## Projects\n- payments-gateway: migrating from RabbitMQ to NATS JetStream; cut-over planned for Q1\n- The team decided on exactly-once via idempotency keys scoped by merchant\n- Staging cluster: three nodes, R3 streams\n\n## Agreements\n- Weekly review on Thursday with the SRE team\n- Incidents are written up within 48 hours\n\n## To-do\n- Benchmark the consumer with 1,000 merchants\n- Decide the retention of the settlement stream\n"
		topics := []string{"consumer lag on the settlement stream", "the retry policy of refunds", "a flaky integration test", "the dashboard for p99 latency", "idempotency keys for webhooks", "the migration runbook"}
		line = func(c, i int) string {
			tp := topics[c%len(topics)]
			if i%2 == 0 {
				return fmt.Sprintf("About %s (%d): what should we change first, and how do we verify it in staging without affecting merchants?", tp, c)
			}
			return fmt.Sprintf("For %s, start by measuring: add a metric, reproduce it in staging with recorded traffic, then change one setting at a time and compare p50 and p99 before and after.", tp)
		}
		return
	}
	profile = "# 用户画像\n\n- 姓名：李伟，杭州的后端工程师\n- 技术栈：Go、PostgreSQL、NATS、Kubernetes\n- 喜欢简短、带代码的回答；不喜欢冗长的开场白\n- 负责支付服务，隔周值班\n"
	memory = "# 核心记忆\n\n## 项目\n- 支付网关：从 RabbitMQ 迁移到 NATS JetStream，计划一季度切换\n- 团队决定用按商户划分的幂等键实现恰好一次\n- 预发集群：三节点，流三副本\n\n## 约定\n- 每周四与 SRE 团队复盘\n- 事故在 48 小时内写复盘报告\n\n## 待办\n- 用 1000 个商户压测消费者\n- 确定结算流的保留期\n"
	topics := []string{"结算流的消费延迟", "退款的重试策略", "一个不稳定的集成测试", "p99 延迟看板", "回调的幂等键", "迁移手册"}
	line = func(c, i int) string {
		tp := topics[c%len(topics)]
		if i%2 == 0 {
			return fmt.Sprintf("关于%s（%d）：应该先改什么？怎么在预发环境验证而不影响商户？", tp, c)
		}
		return fmt.Sprintf("针对%s，先度量：加一个指标，用录制的流量在预发环境复现，然后一次只改一个设置，对比改动前后的 p50 和 p99。", tp)
	}
	return
}
