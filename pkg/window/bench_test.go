package window

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/bus"
	"github.com/matememory/matememory/pkg/conversation"
	"github.com/matememory/matememory/pkg/store/storetest"
)

// BenchmarkAssemble measures context assembly for stored conversations of 100, 1,000 and
// 10,000 messages, cache warm (the summary is in the KV bucket and the message counts in
// memory), so no LLM call is made. "compacted" asks for maxInputTokens 8000: the summary
// is found in NATS KV and only the messages after it are read; "fits" asks for 1,000,000
// tokens: the whole history is read and included. Both include the workspace injection,
// the watermark read and the (de-duplicated) flush publish. Each iteration runs a fixed
// number of requests and reports their p50 and p99, so -benchtime=1x is enough; the first
// (cold) request is reported apart.
func BenchmarkAssemble(b *testing.B) {
	for _, size := range []int{100, 1000, 10000} {
		for _, v := range []struct {
			name, model string
			budget      int
		}{{"compacted", "gpt-4o", 8000}, {"compacted", "deepseek-chat", 8000}, {"fits", "gpt-4o", 1_000_000}} {
			model := v.model
			b.Run(fmt.Sprintf("messages=%d/%s/model=%s", size, v.name, model), func(b *testing.B) {
				e := newEnv(b, storetest.SQLite(b))
				r := e.replica("bench", replicaOpts{})
				if _, err := e.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: bus.StreamEvents,
					Subjects: []string{bus.SubjectSummarize + ".>"}}); err != nil {
					b.Fatal(err)
				}
				conv := fmt.Sprintf("bench-%d", size)
				var msgs []conversation.Message
				for i := 0; ; i++ {
					ex := exchange(i, i%3 == 0, filler)
					if len(msgs)+len(ex) > size {
						break
					}
					for _, m := range ex {
						m.AgentID, m.ConversationID = 1, conv
						msgs = append(msgs, m)
					}
				}
				for start := 0; start < len(msgs); start += 1000 {
					if _, err := e.msgs.Add(context.Background(), msgs[start:min(start+1000, len(msgs))]...); err != nil {
						b.Fatal(err)
					}
				}
				req := Request{AgentID: 1, ConversationID: conv, SystemPrompt: "你是助手。", UserMessage: "现在呢？",
					Model: model, MaxInputTokens: v.budget}
				ctx := context.Background()
				first := time.Now()
				warm, err := r.svc.Assemble(ctx, req)
				coldMs := float64(time.Since(first).Microseconds()) / 1000
				if err != nil {
					b.Fatal(err)
				}
				calls := e.llm.Calls.Load()
				reps := 200
				if size >= 10000 {
					reps = 40
				}
				lat := make([]time.Duration, 0, reps*b.N)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					for j := 0; j < reps; j++ {
						start := time.Now()
						res, err := r.svc.Assemble(ctx, req)
						lat = append(lat, time.Since(start))
						if err != nil {
							b.Fatal(err)
						}
						if res.LLMCalls != 0 {
							b.Fatal("warm assembly called the LLM")
						}
					}
				}
				b.StopTimer()
				if e.llm.Calls.Load() != calls {
					b.Fatal("LLM called with a warm cache")
				}
				sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
				pct := func(p float64) float64 {
					return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
				}
				b.ReportMetric(pct(0.50), "p50_ms")
				b.ReportMetric(pct(0.99), "p99_ms")
				b.ReportMetric(float64(warm.Tokens.Before), "history_tokens")
				b.ReportMetric(float64(warm.LLMCalls), "warmup_llm_calls")
				// The first request: every message counted, summaries computed (the fake LLM
				// answers at once, so this is MateMemory's own cost).
				b.ReportMetric(coldMs, "first_request_ms")
				b.ReportMetric(float64(len(msgs)), "messages")
			})
		}
	}
}
