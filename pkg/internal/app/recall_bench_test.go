package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/recall/embed/embedtest"
	"github.com/matememory/matememory/pkg/internal/store"
)

// BenchmarkRecallFreshness: from a write through the tool endpoint to the new text being
// found through REST, with the embedded defaults (all-in-one, embedded NATS, SQLite) and an
// embeddings endpoint; and embedding calls per write (docs/benchmarks.md):
//
//	go test ./pkg/internal/app -run '^$' -bench BenchmarkRecallFreshness -benchtime=1x
//
// Each b.N is 100 writes. TestRecallFreshnessHarness runs the same harness small.
func BenchmarkRecallFreshness(b *testing.B) {
	writes := 100 * b.N
	lat, texts := freshness(b, writes)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	msOf := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(msOf(lat[writes/2]), "p50_ms")
	b.ReportMetric(msOf(lat[writes*99/100-1]), "p99_ms")
	b.ReportMetric(msOf(lat[writes-1]), "max_ms")
	b.ReportMetric(float64(sum(texts))/float64(writes), "embedded_per_write")
	b.ReportMetric(float64(writes/10), "chunks_per_file")
}

// TestRecallFreshnessHarness runs BenchmarkRecallFreshness' harness on 20 writes (two
// sections per note by the end): each is found, and a write embeds its changed chunk, not
// the note's unchanged ones again (those would make 30 texts; a few repeated embeddings of
// one text, two sync paths racing, are tolerated).
func TestRecallFreshnessHarness(t *testing.T) {
	const writes = 20
	_, texts := freshness(t, writes)
	if n := sum(texts); n < writes || n > writes+writes/4 {
		t.Fatalf("%d chunk texts embedded for %d writes of one new section each: %v", n, writes, texts)
	}
}

func sum(xs []int64) int64 {
	var n int64
	for _, x := range xs {
		n += x
	}
	return n
}

// freshness starts the all-in-one process with the fake embeddings endpoint and makes
// writes writes through POST …/tools/write_workspace_memory_file, each rewriting one of ten
// daily notes with one more "## Entry" section; it returns, per write, the time from the
// write request until POST …/memory/search for the new entry's token returns it, and the
// chunk texts the write had embedded.
func freshness(tb testing.TB, writes int) (lat []time.Duration, texts []int64) {
	tb.Helper()
	srv := embedtest.New(tb, 256)
	cfg := config.Default()
	cfg.Mate.DataDir = tb.TempDir()
	cfg.Mate.HTTP.Addr = "127.0.0.1:0"
	cfg.Mate.Embedding.BaseURL, cfg.Mate.Embedding.Model = srv.URL, "hash-test"
	ctx := context.Background()
	a, err := app.New(ctx, app.Options{Config: cfg, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	defer a.Close()
	if err := a.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	base := "http://" + a.Addr
	// The agent's first write seeds its core files, which are indexed (and embedded) too:
	// wait for that before measuring, so the figures are about note writes only.
	if r := do(tb, "POST", base+"/api/v1/agents/1/tools/write_workspace_memory_file", "", `{"filename":"memory/2026-04-30.md","content":"warm-up"}`); r.status >= 300 {
		tb.Fatalf("warm-up write: %d %s", r.status, r.Msg)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		var n int64
		a.DB.Model(&store.RecallFile{}).Where("agent_id = 1 AND embed_pending = ?", false).Count(&n)
		if n == 5 { // AGENTS.md, SOUL.md, PROFILE.md, MEMORY.md and the warm-up note
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("seeded files not indexed within 30 s (%d of 5)", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b, ok := tb.(*testing.B); ok {
		b.ResetTimer()
	}
	for i := 0; i < writes; i++ {
		token := fmt.Sprintf("fact%05dx", i)
		// Ten notes, appended in turn: each write changes one chunk of a growing file.
		name := fmt.Sprintf("memory/2026-05-%02d.md", 1+i%10)
		var content string
		for j := 0; j <= i/10; j++ {
			content += fmt.Sprintf("## Entry %d\n\nRemember %s and some context words about entry %d.\n\n", j, fmt.Sprintf("fact%05dx", j*10+i%10), j)
		}
		body, _ := json.Marshal(map[string]string{"filename": name, "content": content})
		before := srv.Texts.Load()
		st := time.Now()
		if r := do(tb, "POST", base+"/api/v1/agents/1/tools/write_workspace_memory_file", "", string(body)); r.status >= 300 {
			tb.Fatalf("write: %d %s", r.status, r.Msg)
		}
		for {
			r := do(tb, "POST", base+"/api/v1/agents/1/memory/search", "", `{"query":"`+token+`"}`)
			var res searchResult
			_ = json.Unmarshal(r.Data, &res)
			found := false
			for _, h := range res.Hits {
				found = found || strings.Contains(h.Snippet, token)
			}
			if found {
				break
			}
			if time.Since(st) > 30*time.Second {
				tb.Fatalf("write %d not found after 30 s", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
		lat = append(lat, time.Since(st))
		// Minus the one query embedding (the searcher caches it across the polls).
		texts = append(texts, srv.Texts.Load()-before-1)
	}
	return lat, texts
}
