package rest_test

import (
	"encoding/json"
	"github.com/matememory/matememory/pkg/api"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/rest"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/tool"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// The core files report their tokens and budgets in the files API and the tools; an agent's
// override (PATCH) changes its budgetTokens; the admin list names the files over budget
// (issue 22, items 1 and 6).
func TestBudgets(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		s := start(t, db, "k1=1;k2=2;adm=admin")
		k1, adm := []string{"Authorization", "Bearer k1"}, []string{"Authorization", "Bearer adm"}

		var f workspace.File
		s.req(t, "GET", "/api/v1/agents/1/files/MEMORY.md", "", k1...).into(t, &f)
		if f.Tokens == nil || f.BudgetTokens == nil || *f.BudgetTokens != workspace.DefaultMemoryBudget || *f.Tokens <= 0 {
			t.Fatalf("MEMORY.md without its tokens and default budget: %+v", f)
		}
		var soul workspace.File
		s.req(t, "GET", "/api/v1/agents/1/files/SOUL.md", "", k1...).into(t, &soul)
		if soul.Tokens != nil || soul.BudgetTokens != nil {
			t.Fatalf("SOUL.md has no budget, yet reports %v/%v", soul.Tokens, soul.BudgetTokens)
		}
		var list rest.FileList
		s.req(t, "GET", "/api/v1/agents/1/files", "", k1...).into(t, &list)
		budgeted := map[string]int{}
		for _, i := range list.Files {
			if i.BudgetTokens != nil {
				budgeted[i.Filename] = *i.BudgetTokens
			}
		}
		if len(budgeted) != 2 || budgeted["MEMORY.md"] != 2000 || budgeted["PROFILE.md"] != 800 {
			t.Fatalf("listing's budgets %v", budgeted)
		}

		// An override for agent 1 only.
		var a api.Agent
		r := s.req(t, "PATCH", "/api/v1/agents/1", `{"memoryBudgetTokens":50}`, k1...)
		expect(t, r, 200, "")
		r.into(t, &a)
		if a.Budgets.MemoryTokens != 50 || !a.Budgets.MemoryOverridden || a.Budgets.ProfileTokens != 800 || a.Budgets.ProfileOverridden {
			t.Fatalf("budgets after PATCH: %+v", a.Budgets)
		}
		s.req(t, "GET", "/api/v1/agents/1/files/MEMORY.md", "", k1...).into(t, &f)
		if *f.BudgetTokens != 50 {
			t.Fatalf("budgetTokens %d after the override, want 50", *f.BudgetTokens)
		}
		var rd tool.ReadResult
		s.req(t, "POST", "/api/v1/agents/1/tools/read_workspace_memory_file", `{"filename":"MEMORY.md"}`, k1...).into(t, &rd)
		if rd.BudgetTokens == nil || *rd.BudgetTokens != 50 || rd.Tokens == nil || *rd.Tokens != *f.Tokens {
			t.Fatalf("the read tool's tokens %v / budget %v", rd.Tokens, rd.BudgetTokens)
		}
		var other workspace.File
		s.req(t, "GET", "/api/v1/agents/2/files/MEMORY.md", "", "Authorization", "Bearer k2").into(t, &other)
		if *other.BudgetTokens != 2000 {
			t.Fatalf("agent 2's budget %d changed with agent 1's", *other.BudgetTokens)
		}
		// Bad budgets change nothing and say what was wrong.
		expect(t, s.req(t, "PATCH", "/api/v1/agents/1", `{"profileBudgetTokens":-1,"language":"en"}`, k1...), 400, "PROFILE.md must be 1 to 1000000")
		s.req(t, "GET", "/api/v1/agents/1", "", k1...).into(t, &a)
		if a.Language != "zh" || a.Budgets.ProfileTokens != 800 {
			t.Fatalf("a refused PATCH changed the agent: %+v", a)
		}

		// Over budget: agent 1's MEMORY.md (seeded text over 50 tokens) and agent 2's, written big.
		big, _ := json.Marshal(map[string]string{"content": strings.Repeat("- a long remembered fact about the user\n", 300)})
		expect(t, s.req(t, "PUT", "/api/v1/agents/2/files/MEMORY.md", string(big), "Authorization", "Bearer k2"), 200, "")
		expect(t, s.req(t, "GET", "/api/v1/admin/agents/over-budget", "", k1...), 403, "admin")
		var over rest.OverBudgetList
		s.req(t, "GET", "/api/v1/admin/agents/over-budget", "", adm...).into(t, &over)
		if over.Count != 2 || over.Files[0].AgentID != 1 || over.Files[0].BudgetTokens != 50 ||
			over.Files[1].AgentID != 2 || over.Files[1].Filename != "MEMORY.md" || over.Files[1].Tokens <= 2000 {
			t.Fatalf("over budget: %+v", over)
		}
		// Back to the default: agent 1 is within it again.
		s.req(t, "PATCH", "/api/v1/agents/1", `{"memoryBudgetTokens":0}`, k1...).into(t, &a)
		if a.Budgets.MemoryTokens != 2000 || a.Budgets.MemoryOverridden {
			t.Fatalf("budgets after reset: %+v", a.Budgets)
		}
		s.req(t, "GET", "/api/v1/admin/agents/over-budget", "", adm...).into(t, &over)
		if over.Count != 1 || over.Files[0].AgentID != 2 {
			t.Fatalf("over budget after the reset: %+v", over)
		}
	})
}
