package client

import (
	"context"
	"github.com/matememory/matememory/pkg/api"
	"net/http"
)

// MemoryQuery is a memory search (POST /api/v1/agents/{agentId}/memory/search).
type MemoryQuery struct {
	Query string `json:"query"`
	// MaxResults defaults to the server's (6); at most 50.
	MaxResults int `json:"maxResults,omitempty"`
	// FilenamePrefix keeps files whose name starts with it ("memory/").
	FilenamePrefix string `json:"filenamePrefix,omitempty"`
	// Since and Until are days (YYYY-MM-DD, inclusive).
	Since string `json:"since,omitempty"`
	Until string `json:"until,omitempty"`
	// MinRelevance keeps only hits whose relevance is at least this (0–1; 0.5 and above is
	// confident); 0 = every matching hit, ranked.
	MinRelevance float64 `json:"minRelevance,omitempty"`
}

// MemoryHit is one recalled chunk: read the exact lines with CallTool
// ("read_workspace_memory_lines") or ReadFile.
type MemoryHit = api.MemoryHit

// MemoryStated is how often a fact was restated.
type MemoryStated = api.MemoryStated

// MemorySearchResult is the answer: Mode is "hybrid" or "lexical"; Degraded means the
// embedding endpoint failed for this search and Notice says why.
type MemorySearchResult = api.MemorySearchResult

// SearchMemory searches the agent's memory files (hybrid BM25 + embeddings, docs/recall.md).
func (c *Client) SearchMemory(ctx context.Context, agentID int64, q MemoryQuery) (*MemorySearchResult, error) {
	var out MemorySearchResult
	if _, err := c.do(ctx, request{method: http.MethodPost, path: agentPath(agentID) + "/memory/search", body: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
