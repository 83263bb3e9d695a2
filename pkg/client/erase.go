package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// ErasureReceipt is what an agent's erasure removed: counts per store, no content.
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
	// MCPSessions is the number of the agent's MCP sessions closed.
	MCPSessions int `json:"mcpSessions"`
	// Kept lists what stays, and why (no content).
	Kept []string `json:"kept"`
}

// ConversationErasureReceipt is what a conversation's erasure removed, and the memory file
// versions the runs that covered it wrote, for a person to review.
type ConversationErasureReceipt struct {
	AgentID        int64            `json:"agentId"`
	ConversationID string           `json:"conversationId"`
	ErasedAt       time.Time        `json:"erasedAt"`
	Actor          string           `json:"actor"`
	Rows           map[string]int64 `json:"rows"`
	Messages       map[string]int64 `json:"messages"`
	// Derived lists the file versions written by the runs that covered the conversation:
	// what the conversation may have introduced there stays until a person edits it out.
	Derived []DerivedVersion `json:"derived"`
}

// DerivedVersion is a memory file a run that covered an erased conversation changed, and the
// version it wrote (0 when history does not say: the run created the file).
type DerivedVersion struct {
	Filename string `json:"filename"`
	Version  int64  `json:"version,omitempty"`
	RunID    string `json:"runId"`
	Action   string `json:"action"`
}

// EraseAgent erases every trace of the agent from every store (DELETE
// /api/v1/agents/{agentId}?erase=true&confirm={agentId}; irreversible) and returns the
// receipt. It needs the agent's own key or an admin key (ErrForbidden otherwise); an
// extraction holding the agent's lease is ErrConflict (try again later). Repeating an
// erasure removes nothing more, so it is retried as a GET is.
func (c *Client) EraseAgent(ctx context.Context, agentID int64) (*ErasureReceipt, error) {
	var out ErasureReceipt
	q := url.Values{"erase": {"true"}, "confirm": {itoa(agentID)}}
	if _, err := c.do(ctx, request{method: http.MethodDelete, path: agentPath(agentID), query: q, retrySafe: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EraseConversation erases one conversation of the agent (its messages, watermark, recall
// chunks, context summaries, the ledger rows of the runs that covered it and its events on
// the streams; irreversible) and returns the receipt, whose Derived lists the memory file
// versions those runs wrote. Retried as EraseAgent is.
func (c *Client) EraseConversation(ctx context.Context, agentID int64, conversationID string) (*ConversationErasureReceipt, error) {
	var out ConversationErasureReceipt
	q := url.Values{"erase": {"true"}, "confirm": {conversationID}}
	path := agentPath(agentID) + "/conversations/" + seg(conversationID)
	if _, err := c.do(ctx, request{method: http.MethodDelete, path: path, query: q, retrySafe: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
