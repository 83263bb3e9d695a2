package workspace_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/tokens"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// A write that leaves a core file over its budget is logged at WARN and counted; writes
// within it are observed only; the budgets are counted with the tokenizer given (issue 22).
func TestOverBudgetWriteWarns(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		var logs bytes.Buffer
		reg := prometheus.NewRegistry()
		tk, err := tokens.NewCounter().For("gpt-4o")
		if err != nil {
			t.Fatal(err)
		}
		ws := workspace.New(db.DB, workspace.WithBudgets(workspace.Budgets{Memory: 100, Profile: 40, Tokenizer: tk}),
			workspace.WithBudgetMetrics(reg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
		ch := workspace.Change{Actor: store.ActorAPI}
		small := "- likes green tea"
		f, _, err := ws.Write(ctx, 7, "MEMORY.md", small, workspace.AnyVersion, ch)
		if err != nil {
			t.Fatal(err)
		}
		if f.Tokens == nil || *f.Tokens != tk.Count(small) || *f.BudgetTokens != 100 {
			t.Fatalf("written file's tokens %v, budget %v", f.Tokens, f.BudgetTokens)
		}
		if logs.Len() != 0 {
			t.Fatalf("a write within budget logged: %s", logs.String())
		}
		big := strings.Repeat("- a long remembered fact about the user\n", 40)
		if _, _, err := ws.Write(ctx, 7, "MEMORY.md", big, workspace.AnyVersion, ch); err != nil {
			t.Fatal(err)
		}
		// Not budgeted: never warned about, however big.
		if _, _, err := ws.Write(ctx, 7, "memory/notes.md", big, workspace.AnyVersion, ch); err != nil {
			t.Fatal(err)
		}
		out := logs.String()
		if strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, "agentId=7 file=MEMORY.md") ||
			!strings.Contains(out, "budgetTokens=100") || !strings.Contains(out, "actor=api") {
			t.Fatalf("warnings: %s", out)
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != "MEMORY.md" {
					t.Fatalf("%s has labels %v: only the core file names", mf.GetName(), m.GetLabel())
				}
				got[mf.GetName()] = m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
			}
		}
		if got["matememory_workspace_over_budget_writes_total"] != 1 || got["matememory_workspace_budget_use_ratio"] != 2 {
			t.Fatalf("metrics %v", got)
		}
		over, err := ws.ListOverBudget(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(over) != 2 || over[0].Filename != "MEMORY.md" || over[0].Tokens != tk.Count(big) || over[1].Filename != "PROFILE.md" {
			// The seeded PROFILE.md is over a 40-token budget too.
			t.Fatalf("over budget: %+v", over)
		}
	})
}
