package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/matememory/matememory/pkg/api"
	"net/http"
	"reflect"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// Message paging limits for GET.
const (
	defaultMessageLimit = 1000
	maxMessageBatch     = 1000
)

// RegisterMessages adds the conversation message routes, where chat services keep the
// short-term history. The agent comes from the body (POST) or the query (GET) and is
// authorized like a path agent id; a newly seen agent gets its core files.
func RegisterMessages(s *httpapi.Server, msgs *conversation.Store, ws *workspace.Service) {
	h := msgHandlers{msgs: msgs, ws: ws}
	httpapi.Nullable(s, reflect.TypeFor[messagesBody](), "messages") // a single message may say "messages": null
	const path = "/api/v1/conversations/{conversationId}/messages"
	tags := []string{"Messages"}
	httpapi.Register(s, huma.Operation{Method: http.MethodPost, Path: path, OperationID: "storeMessages", Tags: tags,
		Summary:       "Store messages of a conversation",
		Description:   `One message {"agentId":1,"role":"user","content":"..."} or a batch {"agentId":1,"messages":[{"role":...,"content":...},...]} (at most 1000); toolCalls, toolCallId and name are optional. A newly seen agent gets its core files.`,
		DefaultStatus: http.StatusCreated, Errors: []int{403}}, h.post)
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: path, OperationID: "listMessages", Tags: tags,
		Summary: "A conversation's messages, oldest first", Description: "hasMore says more follow the last one: ask again with its id as afterId.",
		Errors: []int{403}}, h.get)
}

// ConversationPath is the {conversationId} path parameter of a typed operation.
type ConversationPath struct {
	ConversationID string `path:"conversationId" minLength:"1" maxLength:"128" example:"c-42" doc:"The chat service's conversation id: 1 to 128 bytes of UTF-8."`
}

type msgHandlers struct {
	msgs *conversation.Store
	ws   *workspace.Service
}

// MessageIn is one message as a client sends it.
type MessageIn struct {
	AgentID    *int64          `json:"agentId,omitempty" minimum:"1" example:"1" doc:"The agent (required at the top level; in a batch, optional and equal to it)."`
	Role       *string         `json:"role,omitempty" enum:"user,assistant,system,tool" doc:"Required for each message."`
	Content    *string         `json:"content,omitempty" example:"I drink green tea every morning."`
	ToolCalls  json.RawMessage `json:"toolCalls,omitempty" doc:"An assistant message's OpenAI tool calls (a JSON array)."`
	ToolCallID *string         `json:"toolCallId,omitempty" doc:"A tool message's call id."`
	Name       *string         `json:"name,omitempty"`
}

func (m MessageIn) empty() bool {
	return m.Role == nil && m.Content == nil && m.ToolCalls == nil && m.ToolCallID == nil && m.Name == nil
}

// messagesBody is a single message, or a batch under "messages" with the agent at the top.
type messagesBody struct {
	MessageIn
	Messages []MessageIn `json:"messages,omitempty" maxItems:"1000" doc:"A batch, instead of the single message's fields."`
}

type postInput struct {
	ConversationPath
	Body messagesBody
}

func (h msgHandlers) post(ctx context.Context, in *postInput) (*httpapi.Response[api.MessagePage], error) {
	convID := in.ConversationID
	if err := conversation.ValidateConversationID(convID); err != nil {
		return nil, err
	}
	b := in.Body
	if b.AgentID == nil {
		return nil, httpapi.BadRequest("agentId is required")
	}
	agentID := *b.AgentID
	if agentID <= 0 {
		return nil, httpapi.BadRequest("agentId must be a positive integer, got %d", agentID)
	}
	if err := httpapi.Act(ctx, agentID); err != nil {
		return nil, err
	}
	var batch []MessageIn
	switch {
	case b.Messages != nil:
		if !b.MessageIn.empty() {
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
		batch = b.Messages
	default:
		batch = []MessageIn{b.MessageIn}
	}
	msgs := make([]conversation.Message, len(batch))
	for i, m := range batch {
		if m.Role == nil {
			return nil, httpapi.BadRequest("%srole is required (user, assistant, system or tool)", msgPrefix(i, len(batch)))
		}
		tc := bytes.TrimSpace(m.ToolCalls)
		if bytes.Equal(tc, []byte("null")) {
			tc = nil
		}
		if len(tc) > 0 && tc[0] != '[' {
			return nil, httpapi.BadRequest("%stoolCalls must be a JSON array of OpenAI tool calls", msgPrefix(i, len(batch)))
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
	if _, err := h.ws.EnsureAgent(ctx, agentID); err != nil {
		return nil, err
	}
	stored, err := h.msgs.Add(ctx, msgs...)
	if err != nil {
		return nil, err
	}
	return httpapi.Answer(http.StatusCreated, api.MessagePage{AgentID: agentID, ConversationID: convID, Count: len(stored), Messages: stored}), nil
}

type listMessagesInput struct {
	ConversationPath
	AgentID int64 `query:"agentId" required:"true" minimum:"1" example:"1" doc:"The conversation's agent (required)."`
	AfterID int64 `query:"afterId" minimum:"0" doc:"Only messages with a larger id (exclusive)."`
	Limit   int64 `query:"limit" minimum:"1" maximum:"10000" default:"1000" doc:"At most this many messages."`
}

func (h msgHandlers) get(ctx context.Context, in *listMessagesInput) (*httpapi.Response[api.MessagePage], error) {
	if err := conversation.ValidateConversationID(in.ConversationID); err != nil {
		return nil, err
	}
	if err := httpapi.Act(ctx, in.AgentID); err != nil {
		return nil, err
	}
	limit := in.Limit
	if limit == 0 {
		limit = defaultMessageLimit
	}
	msgs, err := h.msgs.List(ctx, in.AgentID, in.ConversationID, in.AfterID, int(limit)+1)
	if err != nil {
		return nil, err
	}
	more := len(msgs) > int(limit)
	if more {
		msgs = msgs[:limit]
	}
	return httpapi.OK(api.MessagePage{AgentID: in.AgentID, ConversationID: in.ConversationID, Count: len(msgs), Messages: msgs, HasMore: more}), nil
}

// msgPrefix names message i in errors about a batch.
func msgPrefix(i, n int) string {
	if n > 1 {
		return "message " + strconv.Itoa(i) + ": "
	}
	return ""
}
