package window

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
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

// BenchmarkAssembleScaling is the issue-14 target: context assembly with the summary cache
// warm must not grow with the conversation. It stores conversations of 10,000 and 100,000
// messages in one database, warms both (summaries computed by the fake LLM), then asks for
// their windows in turn (maxInputTokens 8000, gpt-4o) and reports each one's p50 and p99 and
// the ratio of the p99s, measured in the same run; "count" is the same with
// WithPrefixRecheck(0), the stored prefix counted on every request (as before the memo).
// Run:
//
//	go test ./pkg/internal/window -run '^$' -bench AssembleScaling -benchtime=1x
func BenchmarkAssembleScaling(b *testing.B) {
	e := newEnv(b, storetest.SQLite(b))
	if _, err := e.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: bus.StreamEvents,
		Subjects: []string{bus.SubjectSummarize + ".>"}}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	sizes := []int{10000, 100000}
	reqs := make([]Request, len(sizes))
	for i, size := range sizes {
		conv := fmt.Sprintf("scale-%d", size)
		var msgs []conversation.Message
		for j := 0; ; j++ {
			ex := exchange(j, j%3 == 0, filler)
			if len(msgs)+len(ex) > size {
				break
			}
			for _, m := range ex {
				m.AgentID, m.ConversationID = 1, conv
				msgs = append(msgs, m)
			}
		}
		for start := 0; start < len(msgs); start += 1000 {
			if _, err := e.msgs.Add(ctx, msgs[start:min(start+1000, len(msgs))]...); err != nil {
				b.Fatal(err)
			}
		}
		reqs[i] = Request{AgentID: 1, ConversationID: conv, SystemPrompt: "你是助手。", UserMessage: "现在呢？",
			Model: "gpt-4o", MaxInputTokens: 8000}
	}
	for _, v := range []struct {
		name string
		opts []Option
	}{{"memo", nil}, {"count", []Option{WithPrefixRecheck(0)}}} {
		r := e.replica("bench-"+v.name, replicaOpts{opts: v.opts})
		for _, req := range reqs {
			if _, err := r.svc.Assemble(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
		calls := e.llm.Calls.Load()
		const reps = 300
		lat := make([][]time.Duration, len(sizes))
		for j := 0; j < reps; j++ {
			for k := range sizes {
				start := time.Now()
				res, err := r.svc.Assemble(ctx, reqs[k])
				lat[k] = append(lat[k], time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				if res.HistoryRead >= res.HistoryMessages {
					b.Fatalf("%d messages: the warm request read the whole history", sizes[k])
				}
			}
		}
		if e.llm.Calls.Load() != calls {
			b.Fatal("LLM called with a warm cache")
		}
		pct := func(l []time.Duration, p float64) float64 {
			sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
			return float64(l[int(p*float64(len(l)-1))].Microseconds()) / 1000
		}
		p99 := make([]float64, len(sizes))
		for k, size := range sizes {
			p99[k] = pct(lat[k], 0.99)
			b.ReportMetric(pct(lat[k], 0.50), fmt.Sprintf("%s_p50_ms_%dk", v.name, size/1000))
			b.ReportMetric(p99[k], fmt.Sprintf("%s_p99_ms_%dk", v.name, size/1000))
		}
		b.ReportMetric(p99[1]/p99[0], v.name+"_p99_ratio_100k/10k")
		b.ReportMetric(float64(r.svc.Stats().PrefixesCounted), v.name+"_prefix_counts")
	}
}
