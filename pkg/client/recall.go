package client

import (
	"context"
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
}

// MemoryHit is one recalled chunk: read the exact lines with CallTool
// ("read_workspace_memory_lines") or ReadFile.
type MemoryHit struct {
	Filename    string  `json:"filename"`
	StartLine   int     `json:"startLine"`
	EndLine     int     `json:"endLine"`
	Heading     string  `json:"heading,omitempty"`
	Snippet     string  `json:"snippet"`
	Date        string  `json:"date"`
	Dated       bool    `json:"dated"`
	FileVersion int64   `json:"fileVersion"`
	Score       float64 `json:"score"`
	Lexical     float64 `json:"lexical"`
	Vector      float64 `json:"vector"`
	Decay       float64 `json:"decay"`
	Exact       float64 `json:"exact,omitempty"`
	// Coverage is the share of the query's words the chunk holds (the relevance floor).
	Coverage float64 `json:"coverage"`
	// SupersededBy names a newer note that updates this one (it ranks above).
	SupersededBy string `json:"supersededBy,omitempty"`
	// Stated says on how many days a restated fact was written, the latest, and the other
	// files that state it (folded into this hit).
	Stated *MemoryStated `json:"stated,omitempty"`
}

// MemoryStated is how often a fact was restated.
type MemoryStated struct {
	Days   int      `json:"days"`
	Latest string   `json:"latest"`
	Files  []string `json:"files,omitempty"`
}

// MemorySearchResult is the answer: Mode is "hybrid" or "lexical"; Degraded means the
// embedding endpoint failed for this search and Notice says why.
type MemorySearchResult struct {
	AgentID  int64       `json:"agentId"`
	Query    string      `json:"query"`
	Mode     string      `json:"mode"`
	Degraded bool        `json:"degraded"`
	Notice   string      `json:"notice,omitempty"`
	Searched int         `json:"searched"`
	Hits     []MemoryHit `json:"hits"`
}

// SearchMemory searches the agent's memory files (hybrid BM25 + embeddings, docs/recall.md).
func (c *Client) SearchMemory(ctx context.Context, agentID int64, q MemoryQuery) (*MemorySearchResult, error) {
	var out MemorySearchResult
	if _, err := c.do(ctx, request{method: http.MethodPost, path: agentPath(agentID) + "/memory/search", body: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
