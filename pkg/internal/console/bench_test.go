package console

import (
	"context"
	"fmt"
	"github.com/matememory/matememory/pkg/api"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/cronjob"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// BenchmarkPages renders the console's pages for an agent with 1,000 runs and 100 files
// (MEMORY.md with 50 versions), on SQLite, through the whole handler (session, checks,
// queries, templates), with the cron jobs the agent's first sight creates. Each iteration
// renders every page 100 times and reports p50/p99 per
// page, plus the baseline of the same run: the runs page's own ledger query alone.
func BenchmarkPages(b *testing.B) {
	ctx := context.Background()
	db, err := store.Open("sqlite", "", b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close(db)
	if err := store.Migrate(ctx, db); err != nil {
		b.Fatal(err)
	}
	ws := workspace.New(db, workspace.WithAgentHook(cronjob.ConsolidationHook("0 2 * * *", nil)))
	runs := ledger.New(db, nil)
	const agent = 1
	para := strings.Repeat("The user prefers green tea in the morning and coffee after lunch. ", 8)
	for i := 0; i < 96; i++ {
		if _, _, err := ws.Write(ctx, agent, fmt.Sprintf("memory/2026-%02d-%02d.md", i/28+1, i%28+1), "# Notes\n\n- "+para+"\n", workspace.AnyVersion, workspace.Change{Actor: "summarizer"}); err != nil {
			b.Fatal(err)
		}
	}
	for v := 0; v < 50; v++ {
		if _, _, err := ws.Write(ctx, agent, "MEMORY.md", fmt.Sprintf("# Memory\n\n- fact %d\n- %s\n", v, para), workspace.AnyVersion, workspace.Change{Actor: "emergence", Ref: fmt.Sprintf("run-%d", v)}); err != nil {
			b.Fatal(err)
		}
	}
	now := time.Now().UTC()
	statuses := []string{"completed", "skipped", "deferred", "failed"}
	for i := 0; i < 1000; i++ {
		if _, err := runs.Record(ctx, ledger.Run{Kind: ledger.KindSummarize, AgentID: agent, EventID: fmt.Sprintf("evt-%d", i),
			Status: api.RunStatus(statuses[i%4]), Reason: "extracted 4 messages from 1 conversation", Model: "gpt-4o-mini", TokensIn: 900, TokensOut: 120,
			LatencyMs: int64(800 + i%500), FilesChanged: []string{"memory/2026-01-01.md"}, CreateTime: now.Add(-time.Duration(i) * time.Minute)}); err != nil {
			b.Fatal(err)
		}
	}
	files, _ := ws.List(ctx, agent, "")
	cron, err := cronjob.New(db, ws)
	if err != nil {
		b.Fatal(err)
	}
	c, err := New(Deps{Auth: httpapi.NewAuthenticator(nil), Workspace: ws, Ledger: runs, Cron: cron, Language: "en"})
	if err != nil {
		b.Fatal(err)
	}
	pages := []struct{ name, path string }{
		{"agents", "/console/"},
		{"agent", "/console/agents/1"},
		{"runs", "/console/agents/1/runs"},
		{"file", "/console/agents/1/file?name=MEMORY.md"},
		{"history", "/console/agents/1/file/history?name=MEMORY.md"},
		{"prompt", "/console/agents/1/prompt"},
		{"ops", "/console/ops"},
		{"cron", "/console/cron"},
		{"all runs", "/console/runs"},
	}
	const reps = 100
	pct := func(lat []time.Duration, p float64) float64 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000
	}
	var baseline []time.Duration
	lat := map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < reps; j++ {
			start := time.Now()
			if _, err := runs.List(ctx, ledger.Filter{AgentID: agent, Limit: runsPage}); err != nil {
				b.Fatal(err)
			}
			baseline = append(baseline, time.Since(start))
			for _, p := range pages {
				r := httptest.NewRequest(http.MethodGet, p.path, nil)
				r.Host = "127.0.0.1:8080"
				w := httptest.NewRecorder()
				start := time.Now()
				c.ServeHTTP(w, r)
				lat[p.name] = append(lat[p.name], time.Since(start))
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %.300s", p.path, w.Code, w.Body.String())
				}
			}
		}
	}
	b.StopTimer()
	worst := 0.0
	for _, p := range pages {
		p99 := pct(lat[p.name], 0.99)
		worst = max(worst, p99)
		name := strings.ReplaceAll(p.name, " ", "_")
		b.ReportMetric(pct(lat[p.name], 0.50), name+"_p50_ms")
		b.ReportMetric(p99, name+"_p99_ms")
	}
	base := pct(baseline, 0.50)
	b.ReportMetric(worst, "worst_p99_ms")
	b.ReportMetric(base, "baseline_ledger_p50_ms")
	b.ReportMetric(pct(lat["runs"], 0.50)/base, "runs_page_vs_baseline")
	b.ReportMetric(float64(len(files)), "files")
}
