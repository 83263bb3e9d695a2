package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/tool"
)

// RegisterRecall adds memory search for the agent in the URL. The body is the
// search_workspace_memory arguments, validated by the tool the same way as for the model
// and MCP.
func RegisterRecall(s *httpapi.Server, t *tool.Tools) {
	httpapi.Register(s, huma.Operation{Method: http.MethodPost, Path: "/api/v1/agents/{agentId}/memory/search", OperationID: "searchMemory", Tags: []string{"Recall"},
		Summary:     "Search the agent's memory files",
		Description: "Hybrid search (BM25 + vectors, decay by the note's date, MMR): the ranked hits that match, up to maxResults; each names its file, line range, date, version, score parts and a relevance (0-1, 0.5 and above confident), and `confident` says whether any hit is. minRelevance filters. Lexical only when no embedding endpoint is configured.",
		Errors:      []int{403}},
		func(ctx context.Context, in *searchInput) (*httpapi.Response[recall.Result], error) {
			if err := httpapi.Act(ctx, in.AgentID); err != nil {
				return nil, err
			}
			args, err := json.Marshal(in.Body)
			if err != nil {
				return nil, err
			}
			res, err := t.Call(ctx, in.AgentID, tool.SearchMemory, args)
			if err != nil {
				return nil, err
			}
			r, ok := res.(recall.Result)
			if !ok {
				return nil, fmt.Errorf("search answered %T", res)
			}
			return httpapi.OK(r), nil
		})
}

// searchBody is the search_workspace_memory arguments.
type searchBody struct {
	Query          string   `json:"query" minLength:"1" example:"green tea" doc:"What to look for."`
	MaxResults     *int     `json:"maxResults,omitempty" minimum:"1" maximum:"50" doc:"At most this many hits (default 6)."`
	FilenamePrefix *string  `json:"filenamePrefix,omitempty" example:"memory/" doc:"Only files whose name starts with this."`
	Since          *string  `json:"since,omitempty" pattern:"^[0-9]{4}-[0-9]{2}-[0-9]{2}$" example:"2026-04-01" doc:"Only notes dated on or after this day (YYYY-MM-DD)."`
	Until          *string  `json:"until,omitempty" pattern:"^[0-9]{4}-[0-9]{2}-[0-9]{2}$" example:"2026-04-30" doc:"Only notes dated on or before this day (YYYY-MM-DD)."`
	MinRelevance   *float64 `json:"minRelevance,omitempty" minimum:"0" maximum:"1" example:"0.5" doc:"Only hits whose relevance is at least this (0.5 and above: confident). Omitted: every matching hit, ranked."`
}

type searchInput struct {
	httpapi.AgentPath
	Body searchBody
}
