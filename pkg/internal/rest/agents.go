package rest

import (
	"context"
	"sort"

	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

type agentsInput struct {
	After int64 `query:"after" minimum:"0" doc:"Only agents with a larger id (the nextAfter of the previous page)."`
	Limit int   `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"At most this many agents."`
}

// AgentPage is a page of agents.
type AgentPage struct {
	Count  int                      `json:"count"`
	Agents []workspace.AgentSummary `json:"agents"`
	// NextAfter is set when the page is full: ask again with ?after=nextAfter.
	NextAfter *int64 `json:"nextAfter,omitempty"`
}

// listAgents answers GET /api/v1/agents: the agents the caller may see, in id order, a page
// at a time (?after=<agentId>&limit=). An agent key sees its own agents; a key for every
// agent ("*"), an admin key and no-key mode see them all.
func (h wsHandlers) listAgents(ctx context.Context, in *agentsInput) (*httpapi.Response[AgentPage], error) {
	q := workspace.AgentQuery{AfterID: in.After, Limit: in.Limit}
	if q.Limit == 0 {
		q.Limit = 100
	}
	if p := httpapi.PrincipalFrom(ctx); !(p.Open || p.Admin || p.AllAgents) {
		q.Only = make([]int64, 0, len(p.Agents))
		for id := range p.Agents {
			q.Only = append(q.Only, id)
		}
		sort.Slice(q.Only, func(i, j int) bool { return q.Only[i] < q.Only[j] })
	}
	agents, err := h.ws.ListAgents(ctx, q)
	if err != nil {
		return nil, err
	}
	out := AgentPage{Count: len(agents), Agents: agents}
	if len(agents) == q.Limit {
		out.NextAfter = &agents[len(agents)-1].AgentID
	}
	return httpapi.OK(out), nil
}
