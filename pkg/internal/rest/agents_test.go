package rest_test

import (
	"fmt"
	"testing"

	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

type agentPage struct {
	Count     int                      `json:"count"`
	Agents    []workspace.AgentSummary `json:"agents"`
	NextAfter int64                    `json:"nextAfter"`
}

func TestListAgents(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		s := start(t, db, "k1=1,3;all=*;adm=admin")
		k1, all, adm := []string{"Authorization", "Bearer k1"}, []string{"Authorization", "Bearer all"}, []string{"Authorization", "Bearer adm"}
		for _, id := range []int{1, 2, 3, 4, 5} {
			expect(t, s.req(t, "GET", fmt.Sprintf("/api/v1/agents/%d", id), "", all...), 200, "")
		}
		expect(t, s.req(t, "PUT", "/api/v1/agents/3/files/notes/a.md", `{"content":"x"}`, all...), 201, "")

		var p agentPage
		r := s.req(t, "GET", "/api/v1/agents", "", k1...)
		expect(t, r, 200, "")
		r.into(t, &p)
		if p.Count != 2 || p.Agents[0].AgentID != 1 || p.Agents[1].AgentID != 3 {
			t.Fatalf("agent key for 1 and 3 sees %+v", p)
		}
		if p.Agents[1].FileCount != len(workspace.CoreFiles)+1 || p.Agents[1].LastUpdate.IsZero() || p.Agents[0].Language != "zh" {
			t.Fatalf("agent 3's summary: %+v", p.Agents[1])
		}

		// Paging in id order, for a key on every agent and for an admin key.
		for _, key := range [][]string{all, adm} {
			var seen []int64
			after := int64(0)
			for range 5 {
				var pg agentPage
				r := s.req(t, "GET", fmt.Sprintf("/api/v1/agents?limit=2&after=%d", after), "", key...)
				expect(t, r, 200, "")
				r.into(t, &pg)
				for _, a := range pg.Agents {
					seen = append(seen, a.AgentID)
				}
				if pg.NextAfter == 0 {
					break
				}
				after = pg.NextAfter
			}
			if fmt.Sprint(seen) != "[1 2 3 4 5]" {
				t.Fatalf("paged agents: %v", seen)
			}
		}

		expect(t, s.req(t, "GET", "/api/v1/agents?limit=0", "", all...), 400, "limit must be 1 to 1000")
		expect(t, s.req(t, "GET", "/api/v1/agents?after=x", "", all...), 400, "after must be a whole number")
		expect(t, s.req(t, "GET", "/api/v1/agents", ""), 401, "missing API key")
	})
}
