package window

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/tokens"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// A MEMORY.md a person wrote far over any budget is cut with a marker the model sees and a
// warning in the answer, never silently (issue 22, item 6); the files before it stay whole.
func TestHugeMemoryIsCutVisibly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		e := newEnv(t, db)
		r := e.replica("a", replicaOpts{})
		var b strings.Builder
		for i := range 400 {
			fmt.Fprintf(&b, "- fact %04d: the customer's order number is ORD-%06d and ships to warehouse %d\n", i, 100000+i, i%7)
		}
		if _, _, err := r.ws.Write(context.Background(), 1, "MEMORY.md", b.String(), workspace.AnyVersion,
			workspace.Change{Actor: store.ActorAPI}); err != nil {
			t.Fatal(err)
		}
		const budget = 3000
		st, res, msg := r.post(t, 1, "c", body("what is my order?", budget, map[string]any{"model": "gpt-4o"}), false)
		if st != http.StatusOK {
			t.Fatalf("status %d: %s", st, msg)
		}
		checkWindow(t, res, "what is my order?")
		if res.Tokens.Total > budget {
			t.Fatalf("total %d over the budget %d", res.Tokens.Total, budget)
		}
		sys := res.Messages[0].Content
		if !strings.Contains(sys, "--- AGENTS.md ---") || !strings.Contains(sys, "--- MEMORY.md ---\n- fact 0000") {
			t.Fatalf("the files before the cut or MEMORY.md's first lines are missing: %.300q", sys)
		}
		if strings.Contains(sys, "fact 0399") {
			t.Fatal("the end of MEMORY.md is in the system message: nothing was cut")
		}
		if len(res.WorkspaceCut) != 1 {
			t.Fatalf("workspaceCut %+v, want MEMORY.md", res.WorkspaceCut)
		}
		c := res.WorkspaceCut[0]
		if c.Filename != "MEMORY.md" || c.KeptLines == 0 || c.KeptLines >= c.Lines || c.KeptTokens >= c.Tokens {
			t.Fatalf("cut %+v", c)
		}
		// The agent's language is zh (the default).
		marker := fmt.Sprintf("用 read_workspace_memory_lines 从第 %d 行起读取。]", c.KeptLines+1)
		if !strings.Contains(sys, "[MateMemory：为适应本次请求，MEMORY.md 在此处截断") || !strings.Contains(sys, "search_workspace_memory") ||
			!strings.Contains(sys, marker) {
			t.Fatalf("no marker in the system message: %q", sys[max(0, len(sys)-600):])
		}
		warned := false
		for _, w := range res.Warnings {
			warned = warned || strings.Contains(w, "MEMORY.md was cut to fit maxInputTokens 3000")
		}
		if !warned {
			t.Fatalf("no warning: %q", res.Warnings)
		}
		if got := counterValue(t, r.svc.metrics.cuts.WithLabelValues("MEMORY.md")); got != 1 {
			t.Fatalf("cut metric %v, want 1", got)
		}
	})
}

func TestCutInjection(t *testing.T) {
	tk := estimateTokenizer()
	lines := func(name string, n int) string {
		var b strings.Builder
		b.WriteString("--- " + name + " ---")
		for i := range n {
			fmt.Fprintf(&b, "\nline %d of %s with some words", i, name)
		}
		return b.String()
	}
	inj := lines("AGENTS.md", 5) + "\n\n" + lines("MEMORY.md", 300) + "\n\n" + lines("memory/notes.md", 50)
	cases := []struct {
		name     string
		room     int
		wantCuts []string
		kept     map[string]bool // file name → its block is in the result (whole or cut)
	}{
		{"fits", 1 << 20, nil, map[string]bool{"AGENTS.md": true, "MEMORY.md": true, "memory/notes.md": true}},
		{"memory cut, notes left out", 600, []string{"MEMORY.md", "memory/notes.md"}, map[string]bool{"AGENTS.md": true, "MEMORY.md": true, "memory/notes.md": false}},
		{"room for the first file only", 150, []string{"MEMORY.md", "memory/notes.md"}, map[string]bool{"AGENTS.md": true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, cuts := cutInjection(tk, "en", inj, c.room)
			if n := tk.Count(out); c.wantCuts != nil && n > c.room {
				t.Fatalf("%d tokens, room %d", n, c.room)
			}
			var names []string
			for _, x := range cuts {
				names = append(names, x.Filename)
			}
			if strings.Join(names, ",") != strings.Join(c.wantCuts, ",") {
				t.Fatalf("cuts %v, want %v", names, c.wantCuts)
			}
			for name, in := range c.kept {
				if strings.Contains(out, "--- "+name+" ---") != in {
					t.Fatalf("%s in the result: %v, want %v\n%s", name, !in, in, out)
				}
			}
			if c.wantCuts != nil && !strings.Contains(out, "these workspace files are not shown") {
				t.Fatalf("no marker for the files left out:\n%s", out)
			}
		})
	}
}

func estimateTokenizer() tokens.Tokenizer { return tokens.NewCounter().Estimator() }

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
