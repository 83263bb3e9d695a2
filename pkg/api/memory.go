package api

import (
	"encoding/json"
	"time"
)

// StoredMessage is a conversation message as MateMemory keeps it.
type StoredMessage struct {
	ID             int64           `json:"id"`
	AgentID        int64           `json:"agentId"`
	ConversationID string          `json:"conversationId"`
	Role           string          `json:"role"`
	Content        string          `json:"content"`
	ToolCalls      json.RawMessage `json:"toolCalls,omitempty"`
	ToolCallID     string          `json:"toolCallId,omitempty"`
	Name           string          `json:"name,omitempty"`
	CreateTime     time.Time       `json:"createTime"`
}

// MessagePage is a conversation's messages, as stored (POST) or a page of them (GET).
type MessagePage struct {
	AgentID        int64           `json:"agentId"`
	ConversationID string          `json:"conversationId"`
	Count          int             `json:"count"`
	Messages       []StoredMessage `json:"messages"`
	// HasMore (GET) says more messages follow the last one returned: ask again with its id
	// as afterId.
	HasMore bool `json:"hasMore"`
}
