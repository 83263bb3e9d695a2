package app_test

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/memsim"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/tokens"
)

// simulation runs the script through app.SimulateMemory with the scripted model answering
// in edits (whole false) or the spec's whole files.
func simulation(tb testing.TB, db storetest.DB, s memsim.Script, whole bool, memoryBudget int, o memsim.RunOptions) memsim.Report {
	tb.Helper()
	tok, err := tokens.NewCounter().For("fake-model")
	if err != nil {
		tb.Fatal(err)
	}
	fake := llmtest.New(tb, memsim.Model{Whole: whole, Count: tok}.Reply)
	fake.Forget()
	cfg := config.Default()
	cfg.Mate.Language = "en"
	cfg.Mate.LLM.BaseURL, cfg.Mate.LLM.APIKey, cfg.Mate.LLM.Model = fake.URL+"/v1/", "test-key", "fake-model"
	cfg.Mate.Memory.Budget.MemoryTokens = memoryBudget
	if db.Driver == "mysql" {
		cfg.Mate.Database = config.Database{Driver: "mysql", DSN: db.DSN}
	}
	rep, err := app.SimulateMemory(context.Background(), cfg, slog.New(slog.DiscardHandler), s, o)
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
		// To stderr: the table is longer than what b.Log shows.
		memsim.Table(os.Stderr, edits, spec)
	}
}

// TestEvalMemoryCommand: `api eval memory` runs the simulation against the configured model
// (here the scripted one) and prints the figures.
func TestEvalMemoryCommand(t *testing.T) {
	tok, err := tokens.NewCounter().For("fake-model")
	if err != nil {
		t.Fatal(err)
	}
	fake := llmtest.New(t, memsim.Model{Count: tok}.Reply)
	var out, errOut strings.Builder
	env := []string{"MATE_DATA_DIR=" + t.TempDir(), "MATE_LLM_BASE_URL=" + fake.URL + "/v1/", "MATE_LLM_API_KEY=k", "MATE_LLM_MODEL=fake-model",
		"MATE_MEMORY_BUDGET_MEMORY_TOKENS=300", "PATH=/bin"}
	code := app.Run("api", []string{"eval", "memory", "-days", "4", "-per-day", "3"}, strings.NewReader(""), &out, &errOut, env)
	if code != 0 || !strings.Contains(out.String(), "fake-model: 24 facts, recall@5 1.000 (24 found), 0 lost, 0 days over budget") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	if code := app.Run("api", []string{"eval", "memory", "-days", "0"}, strings.NewReader(""), &out, &errOut, env); code != 2 {
		t.Errorf("-days 0: exit %d, want 2", code)
	}
}
