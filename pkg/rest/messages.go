package rest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/matememory/matememory/pkg/conversation"
	"github.com/matememory/matememory/pkg/httpapi"
	"github.com/matememory/matememory/pkg/workspace"
)

// Message paging limits for GET.
const (
	defaultMessageLimit = 1000
	maxMessageLimit     = 10000
	maxMessageBatch     = 1000
)

// RegisterMessages adds the conversation message routes, where chat services keep the
// short-term history. The agent comes from the body (POST) or the query (GET) and is
// authorized like a path agent id; a newly seen agent gets its core files.
func RegisterMessages(s *httpapi.Server, msgs *conversation.Store, ws *workspace.Service) {
	h := msgHandlers{msgs: msgs, ws: ws}
	const path = "/api/v1/conversations/{conversationId}/messages"
	s.Handle("POST "+path, `Store messages: {"agentId":1,"role":"user","content":"..."} or {"agentId":1,"messages":[{"role":...,"content":...},...]}; toolCalls, toolCallId and name are optional`, h.post)
	s.Handle("GET "+path, "A conversation's messages, oldest first: ?agentId= (required), afterId= (exclusive), limit= (default 1000, at most 10000)", h.get)
}

type msgHandlers struct {
	msgs *conversation.Store
	ws   *workspace.Service
}

// messageIn is one message as a client sends it.
type messageIn struct {
	AgentID    *int64          `json:"agentId"`
	Role       *string         `json:"role"`
	Content    *string         `json:"content"`
	ToolCalls  json.RawMessage `json:"toolCalls"`
	ToolCallID *string         `json:"toolCallId"`
	Name       *string         `json:"name"`
}

func (m messageIn) empty() bool {
	return m.Role == nil && m.Content == nil && m.ToolCalls == nil && m.ToolCallID == nil && m.Name == nil
}

// messagesBody is a single message, or a batch under "messages" with the agent at the top.
type messagesBody struct {
	messageIn
	Messages []messageIn `json:"messages"`
}

// messagesOut answers both routes.
type messagesOut struct {
	AgentID        int64                  `json:"agentId"`
	ConversationID string                 `json:"conversationId"`
	Count          int                    `json:"count"`
	Messages       []conversation.Message `json:"messages"`
	// HasMore (GET) says more messages follow the last one returned: ask again with its id
	// as afterId.
	HasMore bool `json:"hasMore"`
}

func (h msgHandlers) post(r *http.Request) (any, error) {
	convID := r.PathValue("conversationId")
	if err := conversation.ValidateConversationID(convID); err != nil {
		return nil, err
	}
	var b messagesBody
	if err := httpapi.Decode(r, &b); err != nil {
		return nil, err
	}
	if b.AgentID == nil {
		return nil, httpapi.BadRequest("agentId is required")
	}
	agentID := *b.AgentID
	if agentID <= 0 {
		return nil, httpapi.BadRequest("agentId must be a positive integer, got %d", agentID)
	}
	if err := httpapi.Authorize(r, agentID); err != nil {
		return nil, err
	}
	var in []messageIn
	switch {
	case b.Messages != nil:
		if !b.messageIn.empty() {
			return nil, httpapi.BadRequest(`send either one message (role, content, ...) or a batch under "messages", not both`)
		}
		if len(b.Messages) == 0 {
			return nil, httpapi.BadRequest(`"messages" is empty`)
		}
		if len(b.Messages) > maxMessageBatch {
			return nil, httpapi.BadRequest("%d messages in one batch; at most %d allowed", len(b.Messages), maxMessageBatch)
		}
		for i, m := range b.Messages {
			if m.AgentID != nil && *m.AgentID != agentID {
				return nil, httpapi.BadRequest("message %d: agentId %d differs from the batch's agentId %d", i, *m.AgentID, agentID)
			}
		}
		in = b.Messages
	default:
		in = []messageIn{b.messageIn}
	}
	msgs := make([]conversation.Message, len(in))
	for i, m := range in {
		if m.Role == nil {
			return nil, httpapi.BadRequest("%srole is required (user, assistant, system or tool)", msgPrefix(i, len(in)))
		}
		tc := bytes.TrimSpace(m.ToolCalls)
		if bytes.Equal(tc, []byte("null")) {
			tc = nil
		}
		if len(tc) > 0 && tc[0] != '[' {
			return nil, httpapi.BadRequest("%stoolCalls must be a JSON array of OpenAI tool calls", msgPrefix(i, len(in)))
		}
		msgs[i] = conversation.Message{AgentID: agentID, ConversationID: convID, Role: *m.Role,
			Content: deref(m.Content), ToolCalls: json.RawMessage(tc), ToolCallID: deref(m.ToolCallID), Name: deref(m.Name)}
	}
	for i, m := range msgs {
		if err := conversation.Validate(m); err != nil {
			if len(msgs) > 1 {
				return nil, httpapi.BadRequest("message %d: %s", i, err.Error())
			}
			return nil, err
		}
	}
	if _, err := h.ws.EnsureAgent(r.Context(), agentID); err != nil {
		return nil, err
	}
	stored, err := h.msgs.Add(r.Context(), msgs...)
	if err != nil {
		return nil, err
	}
	return httpapi.Created(messagesOut{AgentID: agentID, ConversationID: convID, Count: len(stored), Messages: stored}), nil
}

func (h msgHandlers) get(r *http.Request) (any, error) {
	convID := r.PathValue("conversationId")
	if err := conversation.ValidateConversationID(convID); err != nil {
		return nil, err
	}
	q := r.URL.Query()
	agentID, err := queryInt(q.Get("agentId"), "agentId", 0, 1, 0)
	if err != nil {
		return nil, err
	}
	if err := httpapi.Authorize(r, agentID); err != nil {
		return nil, err
	}
	afterID, err := queryInt(q.Get("afterId"), "afterId", 0, 0, 0)
	if err != nil {
		return nil, err
	}
	limit, err := queryInt(q.Get("limit"), "limit", defaultMessageLimit, 1, maxMessageLimit)
	if err != nil {
		return nil, err
	}
	msgs, err := h.msgs.List(r.Context(), agentID, convID, afterID, int(limit)+1)
	if err != nil {
		return nil, err
	}
	more := len(msgs) > int(limit)
	if more {
		msgs = msgs[:limit]
	}
	return messagesOut{AgentID: agentID, ConversationID: convID, Count: len(msgs), Messages: msgs, HasMore: more}, nil
}

// msgPrefix names message i in errors about a batch.
func msgPrefix(i, n int) string {
	if n > 1 {
		return "message " + strconv.Itoa(i) + ": "
	}
	return ""
}

// queryInt parses an integer query parameter in [lo, hi] (hi 0 = unbounded); empty gives def,
// or a "required" error when def is 0 and lo is positive.
func queryInt(raw, name string, def, lo, hi int64) (int64, error) {
	if raw == "" {
		if def == 0 && lo > 0 {
			return 0, httpapi.BadRequest("query parameter %s is required", name)
		}
		return def, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < lo || (hi > 0 && n > hi) {
		if hi > 0 {
			return 0, httpapi.BadRequest("%s must be an integer from %d to %d, got %q", name, lo, hi, raw)
		}
		return 0, httpapi.BadRequest("%s must be an integer of at least %d, got %q", name, lo, raw)
	}
	return n, nil
}
