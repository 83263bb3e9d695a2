package window

import (
	"net/http"

	"github.com/matememory/matememory/pkg/httpapi"
)

// ContextPath is the context window route; …/retry is the emergency compaction.
const ContextPath = "/api/v1/agents/{agentId}/conversations/{conversationId}/context"

// RegisterHTTP adds the context window routes to s.
func RegisterHTTP(s *httpapi.Server, svc *Service) {
	h := handlers{svc: svc}
	s.Handle("POST "+ContextPath,
		`Assemble the context window before an LLM call {"systemPrompt","userMessage","model"?,"maxInputTokens"?,"messages"? (inline OpenAI-format history; omit to use stored messages),"recall"? {topK,maxTokens,query}}: system prompt with workspace files, a marked summary of early conversation as a user message, recent history verbatim, the current message last; compacted and trimmed to fit`,
		h.assemble)
	s.Handle("POST "+ContextPath+"/retry",
		`Emergency compaction after a context_length_exceeded error (same body): only the last 2 exchanges, no LLM call`,
		h.retry)
}

type handlers struct{ svc *Service }

// contextBody is the request body. Pointers tell an absent field from an empty one.
type contextBody struct {
	SystemPrompt   string     `json:"systemPrompt"`
	UserMessage    *string    `json:"userMessage"`
	Model          string     `json:"model"`
	MaxInputTokens *int       `json:"maxInputTokens"`
	Messages       *[]Message `json:"messages"`
	// Recall asks for memory search results in the system message.
	Recall *RecallRequest `json:"recall"`
}

func (h handlers) assemble(r *http.Request) (any, error) {
	req, err := decodeRequest(r)
	if err != nil {
		return nil, err
	}
	return h.svc.Assemble(r.Context(), req)
}

func (h handlers) retry(r *http.Request) (any, error) {
	req, err := decodeRequest(r)
	if err != nil {
		return nil, err
	}
	return h.svc.Retry(r.Context(), req)
}

func decodeRequest(r *http.Request) (Request, error) {
	agentID, err := httpapi.AgentID(r)
	if err != nil {
		return Request{}, err
	}
	var b contextBody
	if err := httpapi.Decode(r, &b); err != nil {
		return Request{}, err
	}
	if b.UserMessage == nil {
		return Request{}, httpapi.BadRequest("userMessage is required: the current user message, placed last in the window")
	}
	req := Request{AgentID: agentID, ConversationID: r.PathValue("conversationId"), SystemPrompt: b.SystemPrompt,
		UserMessage: *b.UserMessage, Model: b.Model, Recall: b.Recall}
	if b.MaxInputTokens != nil {
		// 0 means the default, as in MateClaw (and as when the field is absent).
		if *b.MaxInputTokens < 0 {
			return Request{}, httpapi.BadRequest("maxInputTokens must be a positive number of tokens, got %d (omit it or send 0 for the default)", *b.MaxInputTokens)
		}
		req.MaxInputTokens = *b.MaxInputTokens
	}
	if b.Messages != nil {
		req.Inline, req.Messages = true, *b.Messages
	}
	return req, nil
}
