package api

// MemoryHit is one recalled chunk: where to read it, what it says, and why it ranked.
type MemoryHit struct {
	// Source is "file" (a memory file: read its lines with read_workspace_memory_lines) or
	// "conversation" (Filename is "conversation:<id>": its lines are the conversation's user
	// and assistant messages in order, one per line; GET …/conversations/{id}/messages).
	Source      string  `json:"source"`
	Filename    string  `json:"filename"`
	StartLine   int     `json:"startLine"`
	EndLine     int     `json:"endLine"`
	Heading     string  `json:"heading,omitempty"`
	Snippet     string  `json:"snippet"`
	Date        string  `json:"date"`
	Dated       bool    `json:"dated"`
	FileVersion int64   `json:"fileVersion"`
	Score       float64 `json:"score"`
	// Lexical is BM25 normalised to the best lexical match (0–1); Vector the cosine (0–1);
	// Decay the age factor applied (1 for undated files).
	Lexical float64 `json:"lexical"`
	Vector  float64 `json:"vector"`
	Decay   float64 `json:"decay"`
	// Exact is the share of the query's identifiers (tokens with digits, '-', '.', '_', '@'
	// or '/', such as ORD-2026-0042 or db-prod-03.corp) found verbatim in the chunk.
	Exact float64 `json:"exact,omitempty"`
	// Coverage is the IDF-weighted share of the query's words (CJK: characters) the chunk
	// holds: the relevance floor compares it with min-coverage.
	Coverage float64 `json:"coverage"`
	// Relevance is how surely the hit is about the query (0–1), apart from its rank: 0.5
	// and above is confident (the chunk clears the relevance floor, holds a query
	// identifier verbatim, or corrects a confident hit; what auto-recall injects); 1 holds
	// every word of the query; below 0.5 it shares some of the query's words, linearly in
	// the share (docs/recall.md, "Relevance").
	Relevance float64 `json:"relevance"`
	// SupersededBy names a newer dated note that matches the same words of the query: it
	// ranks above this one and is likely what holds now.
	SupersededBy string `json:"supersededBy,omitempty"`
	// Stated says on how many days this fact was written down (it and its restatements,
	// folded into this hit), and the latest of them; absent when only once.
	Stated *MemoryStated `json:"stated,omitempty"`
}

// MemoryStated is how often a fact was restated.
type MemoryStated struct {
	Days   int    `json:"days"`
	Latest string `json:"latest"`
	// Files are the other files that state it (at most 10), newest first.
	Files []string `json:"files,omitempty"`
}

// MemorySearchResult is the answer to a memory search.
type MemorySearchResult struct {
	AgentID int64  `json:"agentId"`
	Query   string `json:"query"`
	// Mode is hybrid or lexical (no embedding endpoint, or it failed).
	Mode string `json:"mode"`
	// Degraded is true when an embedding endpoint is configured but failed for this search.
	Degraded bool `json:"degraded"`
	// Notice explains a lexical-only or degraded answer.
	Notice string `json:"notice,omitempty"`
	// Searched is the number of chunks of the agent considered.
	Searched int `json:"searched"`
	// Confident says whether any hit is confident (relevance ≥ 0.5): the hits are the
	// ranked matches either way, Confident says whether one is likely an answer.
	Confident bool        `json:"confident"`
	Hits      []MemoryHit `json:"hits"`
}
