package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/app"
	"github.com/matememory/matememory/pkg/config"
	"github.com/matememory/matememory/pkg/recall/embed/embedtest"
	"github.com/matememory/matememory/pkg/store"
)

// Freshness: from a write through the tool endpoint to the new text being found through
// REST, with the embedded defaults (all-in-one, embedded NATS, SQLite) and an embeddings
// endpoint; and embedding calls per write. Run on purpose:
//
//	MATE_RECALL_BENCH=1 go test -run TestRecallFreshnessBench -v ./pkg/app/
func TestRecallFreshnessBench(t *testing.T) {
	if os.Getenv("MATE_RECALL_BENCH") == "" {
		t.Skip("set MATE_RECALL_BENCH=1 to run the freshness benchmark")
	}
	srv := embedtest.New(t, 256)
	cfg := config.Default()
	cfg.Mate.DataDir = t.TempDir()
	cfg.Mate.HTTP.Addr = "127.0.0.1:0"
	cfg.Mate.Embedding.BaseURL, cfg.Mate.Embedding.Model = srv.URL, "hash-test"
	ctx := context.Background()
	a, err := app.New(ctx, app.Options{Config: cfg, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	base := "http://" + a.Addr
	// The agent's first write seeds its core files, which are indexed (and embedded) too:
	// wait for that before measuring, so the figures are about note writes only.
	if r := do(t, "POST", base+"/api/v1/agents/1/tools/write_workspace_memory_file", "", `{"filename":"memory/2026-04-30.md","content":"warm-up"}`); r.status >= 300 {
		t.Fatalf("warm-up write: %d %s", r.status, r.Msg)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		var n int64
		a.DB.Model(&store.RecallFile{}).Where("agent_id = 1 AND embed_pending = ?", false).Count(&n)
		if n == 5 { // AGENTS.md, SOUL.md, PROFILE.md, MEMORY.md and the warm-up note
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("seeded files not indexed within 30 s (%d of 5)", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	const writes = 100
	var lat []time.Duration
	var texts []int64
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
		if r := do(t, "POST", base+"/api/v1/agents/1/tools/write_workspace_memory_file", "", string(body)); r.status >= 300 {
			t.Fatalf("write: %d %s", r.status, r.Msg)
		}
		for {
			r := do(t, "POST", base+"/api/v1/agents/1/memory/search", "", `{"query":"`+token+`"}`)
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
				t.Fatalf("write %d not found after 30 s", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
		lat = append(lat, time.Since(st))
		// Minus the one query embedding (the searcher caches it across the polls).
		texts = append(texts, srv.Texts.Load()-before-1)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	var sum int64
	for _, n := range texts {
		sum += n
	}
	fmt.Printf("| writes | write→found p50 | p99 | max | chunk texts embedded per write (mean) | chunks per file at the end |\n| --- | --- | --- | --- | --- | --- |\n")
	fmt.Printf("| %d | %s | %s | %s | %.2f | %d |\n", writes, lat[writes/2].Round(time.Millisecond),
		lat[writes*99/100-1].Round(time.Millisecond), lat[writes-1].Round(time.Millisecond), float64(sum)/writes, writes/10)
}
