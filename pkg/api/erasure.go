package api

import "time"

// ErasureReceipt says what an agent's erasure removed from each store, with counts, and
// nothing else (no content).
type ErasureReceipt struct {
	AgentID  int64     `json:"agentId"`
	ErasedAt time.Time `json:"erasedAt"`
	// Actor is who erased it ("key:<id>" of the API key, or "api").
	Actor string `json:"actor"`
	// Rows are the database rows deleted, by table.
	Rows map[string]int64 `json:"rows"`
	// Messages are the JetStream messages erased, by stream (KV buckets as KV_<bucket>).
	Messages map[string]int64 `json:"messages"`
	// Vacuumed says the SQLite database was vacuumed and its WAL truncated.
	Vacuumed bool `json:"vacuumed,omitempty"`
	// MCPSessions is the number of the agent's MCP sessions closed in the erasing process
	// (the other processes close theirs when they hear the erasure's notice).
	MCPSessions int `json:"mcpSessions"`
	// Kept lists what stays, and why (no content).
	Kept []string `json:"kept"`
}

// ErasureConversationReceipt says what the erasure of one conversation removed, and which
// memory file versions the extractions that read it wrote: what it may have introduced
// there, listed for review (those lines are not erased: the files' other content stays).
type ErasureConversationReceipt struct {
	AgentID        int64            `json:"agentId"`
	ConversationID string           `json:"conversationId"`
	ErasedAt       time.Time        `json:"erasedAt"`
	Actor          string           `json:"actor"`
	Rows           map[string]int64 `json:"rows"`
	Messages       map[string]int64 `json:"messages"`
	// Derived lists the file versions written by the runs that covered the conversation.
	Derived []ErasureDerivedVersion `json:"derived"`
}

// ErasureDerivedVersion is a memory file a run that covered an erased conversation changed,
// and the version it wrote (0 when history does not say: the run created the file).
type ErasureDerivedVersion struct {
	Filename string `json:"filename"`
	Version  int64  `json:"version,omitempty"`
	RunID    string `json:"runId"`
	Action   string `json:"action"`
}
