package client

import (
	"context"
	"net/http"

	"github.com/matememory/matememory/pkg/api"
)

// ChatMessage is a message in OpenAI's chat-completions format, as the context window is
// exchanged (note the snake_case tool fields, unlike Message).
type ChatMessage = api.ChatMessage

// ToolCall is one function call of an assistant message.
type ToolCall = api.ToolCall

// FunctionCall names the function and carries its JSON arguments as a string.
type FunctionCall = api.FunctionCall

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
type ContextTokens = api.ContextTokens

// ContextRecall reports what the recall step did, when the request asked for it.
type ContextRecall = api.ContextRecall

// WorkspaceCut is a workspace file the system message could not hold whole.
type WorkspaceCut = api.WorkspaceCut

// ContextResult is an assembled context window and how it was made.
type ContextResult = api.ContextResult

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
