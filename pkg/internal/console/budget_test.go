package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// The agent page shows each core file's use of its budget, and the operator's page lists
// the files over budget (issue 22).
func TestBudgetViews(t *testing.T) {
	c := newTestConsole(t, nil)
	get := func(path string) string {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Host = "127.0.0.1"
		w := httptest.NewRecorder()
		c.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %.300s", path, w.Code, w.Body.String())
		}
		return w.Body.String()
	}
	page := get("/console/agents/1")
	if !strings.Contains(page, `id="budget-MEMORY.md"`) || !strings.Contains(page, " / 2000 (") || !strings.Contains(page, " / 800 (") {
		t.Fatalf("agent page without the budgets: %s", page)
	}
	if strings.Contains(page, "超出预算") {
		t.Fatal("a seeded MEMORY.md shown over budget")
	}
	if !strings.Contains(get("/console/ops"), `id="over-empty"`) {
		t.Fatal("ops page lists files over budget before any")
	}
	if _, _, err := c.d.Workspace.Write(t.Context(), 1, "MEMORY.md", strings.Repeat("- remembered fact about the user\n", 400),
		workspace.AnyVersion, workspace.Change{Actor: store.ActorAPI}); err != nil {
		t.Fatal(err)
	}
	if page := get("/console/agents/1"); !strings.Contains(page, "超出预算") {
		t.Fatalf("an over-budget MEMORY.md not marked: %s", page)
	}
	ops := get("/console/ops")
	if !strings.Contains(ops, `id="over-budget"`) || !strings.Contains(ops, `/console/agents/1/file?name=MEMORY.md`) {
		t.Fatalf("ops page without the over-budget file: %s", ops)
	}
}
