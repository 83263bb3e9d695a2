package rest

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"github.com/matememory/matememory/pkg/internal/erasure"
	"github.com/matememory/matememory/pkg/internal/httpapi"
)

// Eraser erases agents (erasure.Service).
type Eraser interface {
	EraseAgent(ctx context.Context, agentID int64, actor string) (erasure.Receipt, error)
	EraseConversation(ctx context.Context, agentID int64, conv, actor string) (erasure.ConversationReceipt, error)
}

// RegisterErasure mounts DELETE /api/v1/agents/{agentId}?erase=true&confirm={agentId}.
func RegisterErasure(s *httpapi.Server, e Eraser) {
	httpapi.Register(s, huma.Operation{Method: http.MethodDelete, Path: "/api/v1/agents/{agentId}", OperationID: "eraseAgent", Tags: []string{"Agents"},
		Summary: "Erase every trace of an agent (irreversible)",
		Description: "Removes the agent's files and their history, messages, watermarks, ledger rows, cron jobs, recall index and the embeddings only it used, " +
			"its KV records (lease and cooldown, context summaries, manual-emergence key), every message on its subjects in the JetStream streams and the dead letters, " +
			"and closes its MCP sessions in this process. SQLite is vacuumed and its WAL truncated; JetStream messages are erased with secure delete. " +
			"An event from before the erasure (in flight, redelivered, replayed) brings nothing back; events after it start the agent anew. " +
			"Needs erase=true and confirm equal to the agent id, and a key that may act for the agent (an admin-only key may not). Answers the receipt: counts per store, no content.",
		Errors: []int{400, 403, 409}}, func(ctx context.Context, in *eraseInput) (*httpapi.Response[erasure.Receipt], error) {
		p := httpapi.PrincipalFrom(ctx)
		if err := httpapi.Act(ctx, in.AgentID); err != nil {
			return nil, err
		}
		if !in.Erase {
			return nil, httpapi.BadRequest("DELETE of an agent erases every trace of it and cannot be undone: pass erase=true&confirm=%d to confirm", in.AgentID)
		}
		if in.Confirm != strconv.FormatInt(in.AgentID, 10) {
			return nil, httpapi.BadRequest("confirm must repeat the agent id (%d) to erase it; got %q", in.AgentID, in.Confirm)
		}
		r, err := e.EraseAgent(ctx, in.AgentID, actorOf(p))
		if errors.Is(err, erasure.ErrLeaseHeld) {
			return nil, &httpapi.Error{Status: http.StatusConflict, Msg: err.Error(), Header: http.Header{"Retry-After": {"60"}}, Err: err}
		}
		if err != nil {
			return nil, err
		}
		return httpapi.OK(r), nil
	})
	httpapi.Register(s, huma.Operation{Method: http.MethodDelete, Path: "/api/v1/agents/{agentId}/conversations/{conversationId}", OperationID: "eraseConversation", Tags: []string{"Agents"},
		Summary: "Erase one conversation of an agent (irreversible)",
		Description: "Removes the conversation's messages, watermark, recall chunks and context summaries, the ledger rows of the runs that covered it, " +
			"and its events (completed events, summarize requests, their dead letters) on the streams by secure delete. " +
			"Answers the receipt, with the memory file versions those runs wrote listed under derived, for review: what the conversation may have introduced there stays until a person edits it out. " +
			"Needs erase=true and confirm equal to the conversation id, and a key that may act for the agent (an admin-only key may not).",
		Errors: []int{400, 403, 409}}, func(ctx context.Context, in *eraseConversationInput) (*httpapi.Response[erasure.ConversationReceipt], error) {
		p := httpapi.PrincipalFrom(ctx)
		if err := httpapi.Act(ctx, in.AgentID); err != nil {
			return nil, err
		}
		if !in.Erase || in.Confirm != in.ConversationID {
			return nil, httpapi.BadRequest("DELETE of a conversation erases it and cannot be undone: pass erase=true&confirm=<conversationId> to confirm")
		}
		r, err := e.EraseConversation(ctx, in.AgentID, in.ConversationID, actorOf(p))
		if errors.Is(err, erasure.ErrLeaseHeld) {
			return nil, &httpapi.Error{Status: http.StatusConflict, Msg: err.Error(), Header: http.Header{"Retry-After": {"60"}}, Err: err}
		}
		if err != nil {
			return nil, err
		}
		return httpapi.OK(r), nil
	})
}

type eraseConversationInput struct {
	httpapi.AgentPath
	ConversationID string `path:"conversationId" minLength:"1" maxLength:"128" doc:"The conversation to erase."`
	Erase          bool   `query:"erase" doc:"Must be true: the call erases the conversation."`
	Confirm        string `query:"confirm" doc:"Must repeat the conversation id."`
}

func actorOf(p httpapi.Principal) string {
	if p.KeyID != "" {
		return "key:" + p.KeyID
	}
	return "api"
}

type eraseInput struct {
	httpapi.AgentPath
	Erase   bool   `query:"erase" doc:"Must be true: the call erases the agent."`
	Confirm string `query:"confirm" doc:"Must repeat the agent id."`
}
