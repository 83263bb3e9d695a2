package rest

import (
	"net/http"
	"sort"
	"strconv"

	"github.com/matememory/matememory/pkg/httpapi"
	"github.com/matememory/matememory/pkg/workspace"
)

// listAgents answers GET /api/v1/agents: the agents the caller may see, in id order, a page
// at a time (?after=<agentId>&limit=). An agent key sees its own agents; a key for every
// agent ("*"), an admin key and no-key mode see them all.
func (h wsHandlers) listAgents(r *http.Request) (any, error) {
	q := workspace.AgentQuery{Limit: 100}
	v := r.URL.Query()
	if s := v.Get("after"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return nil, httpapi.BadRequest("after must be an agent id (a whole number ≥ 0), got %q", s)
		}
		q.AfterID = n
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > workspace.MaxAgentPage {
			return nil, httpapi.BadRequest("limit must be 1 to %d, got %q", workspace.MaxAgentPage, s)
		}
		q.Limit = n
	}
	if p := httpapi.PrincipalFrom(r.Context()); !(p.Open || p.Admin || p.AllAgents) {
		q.Only = make([]int64, 0, len(p.Agents))
		for id := range p.Agents {
			q.Only = append(q.Only, id)
		}
		sort.Slice(q.Only, func(i, j int) bool { return q.Only[i] < q.Only[j] })
	}
	agents, err := h.ws.ListAgents(r.Context(), q)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"count": len(agents), "agents": agents}
	if len(agents) == q.Limit {
		out["nextAfter"] = agents[len(agents)-1].AgentID
	}
	return out, nil
}
