package rest

import (
	"context"
	"net/http"
	"reflect"

	"github.com/danielgtaylor/huma/v2"

	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/window"
)

// RegisterContext adds the context window routes to s; …/retry is the emergency compaction.
func RegisterContext(s *httpapi.Server, svc *window.Service) {
	h := contextHandlers{svc: svc}
	tags := []string{"Context"}
	httpapi.Register(s, huma.Operation{Method: http.MethodPost, Path: "/api/v1/agents/{agentId}/conversations/{conversationId}/context", OperationID: "assembleContext", Tags: tags,
		Summary:     "Assemble the context window before an LLM call",
		Description: "The system prompt with the workspace files (and recall hits when asked), a marked summary of early conversation as a user message, recent history verbatim, the current message last; compacted and trimmed to fit maxInputTokens. messages is the inline OpenAI-format history; omit it to use the stored messages.",
		Errors:      []int{403}}, h.assemble)
	httpapi.Register(s, huma.Operation{Method: http.MethodPost, Path: "/api/v1/agents/{agentId}/conversations/{conversationId}/context/retry", OperationID: "retryContext", Tags: tags,
		Summary:     "Emergency compaction after a context_length_exceeded error",
		Description: "The same body; only the last 2 exchanges, no LLM call.",
		Errors:      []int{403}}, h.retry)
	httpapi.Optional(s, reflect.TypeFor[window.RecallRequest](), "topK", "maxTokens", "query")
	httpapi.Nullable(s, reflect.TypeFor[window.Message](), "content", "tool_calls") // null when an assistant message only calls tools; OpenAI SDKs may send tool_calls: null
	httpapi.MayOmit(s, reflect.TypeFor[window.Message](), "content")                // an inline message that only calls tools may leave it out
}

type contextHandlers struct{ svc *window.Service }

// contextBody is the request body. Pointers tell an absent field from an empty one.
type contextBody struct {
	SystemPrompt   string            `json:"systemPrompt,omitempty" doc:"The chat service's own system prompt; the workspace files follow it."`
	UserMessage    string            `json:"userMessage" doc:"The current user message, placed last."`
	Model          string            `json:"model,omitempty" example:"deepseek-chat" doc:"Picks the tokenizer and the default budget."`
	MaxInputTokens *int              `json:"maxInputTokens,omitempty" minimum:"0" doc:"The input budget; 0 or absent for the default."`
	Messages       *[]window.Message `json:"messages,omitempty" doc:"Inline OpenAI-format history; omit it to use the stored messages."`
	// Recall asks for memory search results in the system message.
	Recall *window.RecallRequest `json:"recall,omitempty" doc:"Put memory search hits in the system message."`
}

type contextInput struct {
	httpapi.AgentPath
	ConversationID string `path:"conversationId" minLength:"1" maxLength:"128" example:"c-42"`
	Body           contextBody
}

func (h contextHandlers) assemble(ctx context.Context, in *contextInput) (*httpapi.Response[*window.Result], error) {
	req, err := decodeRequest(ctx, in)
	if err != nil {
		return nil, err
	}
	w, err := h.svc.Assemble(ctx, req)
	if err != nil {
		return nil, err
	}
	return httpapi.OK(w), nil
}

func (h contextHandlers) retry(ctx context.Context, in *contextInput) (*httpapi.Response[*window.Result], error) {
	req, err := decodeRequest(ctx, in)
	if err != nil {
		return nil, err
	}
	w, err := h.svc.Retry(ctx, req)
	if err != nil {
		return nil, err
	}
	return httpapi.OK(w), nil
}

func decodeRequest(ctx context.Context, in *contextInput) (window.Request, error) {
	if err := httpapi.Act(ctx, in.AgentID); err != nil {
		return window.Request{}, err
	}
	b := in.Body
	req := window.Request{AgentID: in.AgentID, ConversationID: in.ConversationID, SystemPrompt: b.SystemPrompt,
		UserMessage: b.UserMessage, Model: b.Model, Recall: b.Recall}
	if b.MaxInputTokens != nil {
		// 0 means the default, as in MateClaw (and as when the field is absent); the schema
		// refuses a negative budget.
		req.MaxInputTokens = *b.MaxInputTokens
	}
	if b.Messages != nil {
		req.Inline, req.Messages = true, *b.Messages
	}
	return req, nil
}
