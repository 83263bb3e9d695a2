package app_test

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/client"
	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/memsim"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/tokens"
)

// simulation runs the script through a fresh all-in-one app whose clock the simulation moves,
// with the scripted model answering in edits (whole false) or the spec's whole files.
func simulation(tb testing.TB, db storetest.DB, s memsim.Script, whole bool, memoryBudget int, o memsim.RunOptions) memsim.Report {
	tb.Helper()
	counter := tokens.NewCounter()
	tok, err := counter.For("fake-model")
	if err != nil {
		tb.Fatal(err)
	}
	fake := llmtest.New(tb, memsim.Model{Whole: whole, Count: tok}.Reply)
	fake.Forget()
	var now atomic.Int64
	now.Store(s.Start.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }

	cfg := config.Default()
	cfg.Mate.DataDir = tb.TempDir()
	cfg.Mate.HTTP.Addr = "127.0.0.1:0"
	cfg.Mate.NATS.SyncAlways = false
	cfg.Mate.Timezone, cfg.Mate.Language = "UTC", "en"
	cfg.Mate.LLM.BaseURL, cfg.Mate.LLM.APIKey, cfg.Mate.LLM.Model = fake.URL+"/v1/", "test-key", "fake-model"
	cfg.Mate.Memory.CooldownMinutes = 0
	cfg.Mate.Memory.MinMessagesForSummarize = 1
	cfg.Mate.Memory.ManualEmergenceCooldownSeconds = 1
	cfg.Mate.Memory.MaxFileBytes = 8 << 20
	cfg.Mate.Memory.Budget.MemoryTokens = memoryBudget
	if db.Driver == "mysql" {
		cfg.Mate.Database = config.Database{Driver: "mysql", DSN: db.DSN}
	}
	cfg.Mate.Auth.Keys, _ = config.ParseKeys("k1=1;adm=admin")
	ctx := context.Background()
	a, err := app.New(ctx, app.Options{Config: cfg, Log: slog.New(slog.DiscardHandler), Clock: clock})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(a.Close)
	if err := a.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	c, err := client.New("http://"+a.Addr, "k1")
	if err != nil {
		tb.Fatal(err)
	}
	admin, err := client.New("http://"+a.Addr, "adm")
	if err != nil {
		tb.Fatal(err)
	}
	env := memsim.Env{Client: c, Admin: admin, Agent: 1, SetNow: func(t time.Time) { now.Store(t.UnixNano()) }, Count: tok}
	rep, err := memsim.Run(ctx, env, s, o)
	if err != nil {
		tb.Fatal(err)
	}
	return rep
}

// TestCoreMemoryStaysBounded is the year simulation in small: 20 days of an accreting model
// against a 600-token MEMORY.md budget. Every day ends within the budget, nothing is lost,
// every fact is found by its identifier, and no extraction fails.
func TestCoreMemoryStaysBounded(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		s := memsim.NewScript(memsim.Options{Days: 20, PerDay: 3, CorrectionShare: 0.15, Seed: 7})
		rep := simulation(t, db, s, false, 600, memsim.RunOptions{Label: "edits"})
		var b strings.Builder
		memsim.Table(&b, rep)
		t.Log("\n" + b.String() + strings.Join(rep.Missed, "\n"))
		for _, m := range rep.Months {
			if m.OverBudgetDays > 0 || m.Failed > 0 || m.Refused > 0 {
				t.Errorf("month %d: %d days over budget, %d failed, %d refused", m.Month, m.OverBudgetDays, m.Failed, m.Refused)
			}
		}
		if rep.Lost != 0 || rep.Found != rep.Facts || rep.DeadLetters != 0 {
			t.Errorf("%d facts: %d found, %d lost, %d dead letters", rep.Facts, rep.Found, rep.Lost, rep.DeadLetters)
		}
	})
}

// BenchmarkCoreMemoryYear is issue 22's measure: a simulated year (MATE_BENCH_DAYS, default
// 365) of 6 conversations a day with 2 new facts each, edits under the default budget beside
// the spec's whole files without one. It prints the table docs/benchmarks.md shows.
func BenchmarkCoreMemoryYear(b *testing.B) {
	days := 365
	if v, err := strconv.Atoi(os.Getenv("MATE_BENCH_DAYS")); err == nil && v > 0 {
		days = v
	}
	db := storetest.SQLite(b)
	for b.Loop() {
		s := memsim.NewScript(memsim.Options{Days: days, CorrectionShare: 0.1, Seed: 1})
		edits := simulation(b, db, s, false, config.Default().Mate.Memory.Budget.MemoryTokens,
			memsim.RunOptions{Label: "edits", Progress: os.Stderr})
		spec := simulation(b, storetest.SQLite(b), s, true, config.MaxBudgetTokens,
			memsim.RunOptions{Label: "spec", Progress: os.Stderr})
		var t strings.Builder
		memsim.Table(&t, edits, spec)
		b.Log("\n" + t.String())
	}
}
