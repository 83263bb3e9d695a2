package client

import (
	"context"
	"net/http"
)

// ChatMessage is a message in OpenAI's chat-completions format, as the context window is
// exchanged (note the snake_case tool fields, unlike Message).
type ChatMessage struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is one function call of an assistant message.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its JSON arguments as a string.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ContextRequest asks for the context window before an LLM call.
type ContextRequest struct {
	// SystemPrompt is the chat service's own system prompt; the agent's workspace files are
	// appended to it.
	SystemPrompt string `json:"systemPrompt"`
	// UserMessage is the current user message (required); it is always last.
	UserMessage string `json:"userMessage"`
	// Model picks the tokenizer; unknown models are estimated.
	Model string `json:"model,omitempty"`
	// MaxInputTokens is the budget (0: the server's default-max-input-tokens).
	MaxInputTokens int `json:"maxInputTokens,omitempty"`
	// Messages, when not nil, is the history inline (an empty, non-nil slice means "no
	// history"); nil uses the conversation's stored messages.
	Messages []ChatMessage `json:"messages,omitzero"`
}

// ContextTokens is the token account of a context window.
type ContextTokens struct {
	Total     int `json:"total"`
	Budget    int `json:"budget"`
	Trigger   int `json:"trigger"`
	System    int `json:"system"`
	Workspace int `json:"workspace"`
	Summary   int `json:"summary"`
	History   int `json:"history"`
	Current   int `json:"current"`
	Priming   int `json:"priming"`
	// Before is what the whole history would have cost without compaction.
	Before int `json:"before"`
}

// ContextResult is an assembled context window and how it was made.
type ContextResult struct {
	// Messages go to the model as they are: system, a marked summary (a user message), the
	// recent history, the current user message last.
	Messages           []ChatMessage `json:"messages"`
	Tokens             ContextTokens `json:"tokens"`
	Tokenizer          string        `json:"tokenizer"`
	Exact              bool          `json:"exact"`
	Model              string        `json:"model,omitempty"`
	Language           string        `json:"language"`
	HistorySource      string        `json:"historySource"`
	HistoryMessages    int           `json:"historyMessages"`
	CurrentFromHistory bool          `json:"currentFromHistory,omitempty"`
	Compacted          bool          `json:"compacted"`
	Emergency          bool          `json:"emergency,omitempty"`
	Summarized         int           `json:"summarized"`
	SummaryKind        string        `json:"summaryKind,omitempty"`
	Trimmed            int           `json:"trimmed"`
	Kept               int           `json:"kept"`
	CacheHit           bool          `json:"cacheHit"`
	LLMCalls           int           `json:"llmCalls"`
	// Degraded: compaction could not use the LLM; DegradedReason says why.
	Degraded       bool     `json:"degraded"`
	DegradedReason string   `json:"degradedReason,omitempty"`
	FlushRequested bool     `json:"flushRequested"`
	FlushReason    string   `json:"flushReason,omitempty"`
	FlushID        string   `json:"flushId,omitempty"`
	Warnings       []string `json:"warnings,omitempty"`
}

func contextPath(agentID int64, conversationID string) string {
	return agentPath(agentID) + "/conversations/" + seg(conversationID) + "/context"
}

// AssembleContext returns the messages to send to the model for the current user message:
// compacted and trimmed to fit the budget. A system prompt and current message that alone
// exceed it are an *APIError with status 413.
func (c *Client) AssembleContext(ctx context.Context, agentID int64, conversationID string, req ContextRequest) (*ContextResult, error) {
	return c.contextCall(ctx, contextPath(agentID, conversationID), req)
}

// RetryContext is the emergency compaction after the model answered context_length_exceeded:
// only the last 2 exchanges, no LLM call.
func (c *Client) RetryContext(ctx context.Context, agentID int64, conversationID string, req ContextRequest) (*ContextResult, error) {
	return c.contextCall(ctx, contextPath(agentID, conversationID)+"/retry", req)
}

func (c *Client) contextCall(ctx context.Context, path string, req ContextRequest) (*ContextResult, error) {
	var out ContextResult
	if _, err := c.do(ctx, request{method: http.MethodPost, path: path, body: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
