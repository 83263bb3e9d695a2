package rest

import (
	"context"
	"errors"
	"fmt"
	"github.com/danielgtaylor/huma/v2"
	"github.com/matememory/matememory/pkg/api"
	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/emergence"
	"github.com/matememory/matememory/pkg/internal/fault"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/summarizer"
	"net/http"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"
)

// RegisterPipeline adds the event intake, the spec's manual summarize path, the run ledger
// and an agent's pending view, over the pipeline's service.
func RegisterPipeline(s *httpapi.Server, api summarizer.API) {
	h := pipelineHandlers{api: api}
	pipeline := []string{"Pipeline"}
	httpapi.Register(s, huma.Operation{Method: http.MethodPost, Path: "/api/v1/events/conversation-completed", OperationID: "publishConversationCompleted", Tags: pipeline,
		Summary:       "Publish a ConversationCompletedEvent",
		Description:   "Answers 202 once JetStream stored the event (duplicate is true when an event with this id was stored before: publishing is idempotent by eventId, scoped by agent), 503 when it did not: retry with the same eventId. 409 for an event that occurred before its agent was erased (never stored). eventId and occurredAt are filled in when absent; every field but agentId and conversationId may be absent or null.",
		DefaultStatus: http.StatusAccepted, Errors: []int{403, 409, 503}}, h.publishCompleted)
	// The spec's record (and MateClaw, which checks userMessage != null) lets every field but
	// the ids be null or absent, and so does pkg/event's decoding of an event read from the
	// stream: the typed body must not narrow that. Wrong types stay refused.
	evt := reflect.TypeFor[event.ConversationCompletedEvent]()
	httpapi.Optional(s, evt, "eventId", "occurredAt")
	httpapi.MayOmit(s, evt, "userMessage", "assistantReply", "messageCount", "triggerSource")
	httpapi.Nullable(s, evt, "eventId", "occurredAt", "userMessage", "assistantReply", "messageCount", "triggerSource", "turnStatus", "finishReason", "messages")
	httpapi.MayOmit(s, reflect.TypeFor[event.Message](), "content")                        // an assistant message that only calls tools
	httpapi.Nullable(s, reflect.TypeFor[event.Message](), "content", "toolCallId", "name") // toolCalls has no type: null is one of its values already
	httpapi.Register(s, huma.Operation{Method: http.MethodPost, Path: "/api/v1/memory/{agentId}/summarize/{conversationId}", OperationID: "summarizeConversation", Tags: pipeline,
		Summary:      "Extract memory from a conversation now",
		Description:  "Through the summarizer workers; force (query or body) re-extracts a conversation already extracted. 500 \"记忆提取失败: …\" when the run failed; 202 {\"status\":\"pending\"} when no worker finished within the server's timeout or none is running (noWorker).",
		MaxBodyBytes: 4096, Metadata: map[string]any{httpapi.MetaAlso: []int{http.StatusAccepted}},
		Errors: []int{403, 503}}, h.summarize)
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: "/api/v1/memory/{agentId}/runs", OperationID: "listRuns", Tags: pipeline,
		Summary: "The run ledger of an agent, newest first", Errors: []int{403}}, h.runs)
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: "/api/v1/agents/{agentId}/pending", OperationID: "getAgentPending", Tags: []string{"Agents"},
		Summary: "What of an agent waits for an extraction, and why",
		Description: "Read from the agent's record in the lease bucket (the lease's holder, the cooldown, the waiter and the events coalesced behind it) and its watermarks (the conversations with messages not yet extracted); " +
			"writes nothing. Deferrals and coalesced events have no row in the run ledger until their extraction: this is where they show. 503 when the lease bucket cannot be read.",
		Errors: []int{403, 503}}, h.pending)
}

type pipelineHandlers struct{ api summarizer.API }

type publishInput struct {
	Body event.ConversationCompletedEvent
}

func (h pipelineHandlers) publishCompleted(ctx context.Context, in *publishInput) (*httpapi.Response[event.Ack], error) {
	e := in.Body
	// The intake validates the event before it checks the caller's scope (an invalid agent
	// id is a 400, not a 403).
	ack, err := h.api.PublishCompleted(ctx, &e, httpapi.Act)
	if err != nil {
		return nil, err
	}
	return httpapi.Answer(http.StatusAccepted, ack), nil
}

type summarizeInput struct {
	httpapi.AgentPath
	ConversationID string `path:"conversationId" minLength:"1" maxLength:"128" example:"c-42" doc:"1 to 128 bytes of UTF-8."`
	Force          bool   `query:"force" doc:"Re-extract a conversation already extracted."`
	Body           *struct {
		Force *bool `json:"force,omitempty" doc:"The same as ?force=true."`
	} `doc:"Optional (MateClaw's route has no body)."`
}

// SummarizeResult is a manual summarize's outcome.
type SummarizeResult struct {
	Status    string `json:"status" enum:"completed,skipped,refused,pending" doc:"pending (202): the request stays queued; its outcome will be in the run ledger under requestId."`
	Reason    string `json:"reason"`
	RunID     string `json:"runId,omitempty"`
	RequestID string `json:"requestId"`
	// Seq and NoWorker are set on a pending answer.
	Seq      uint64 `json:"seq,omitempty"`
	NoWorker bool   `json:"noWorker,omitempty" doc:"No summarizer worker is running."`
}

func (h pipelineHandlers) summarize(ctx context.Context, in *summarizeInput) (*httpapi.Response[SummarizeResult], error) {
	if err := httpapi.Act(ctx, in.AgentID); err != nil {
		return nil, err
	}
	agentID, conv := in.AgentID, in.ConversationID
	if strings.TrimSpace(conv) == "" || len(conv) > event.MaxConversationIDBytes || !utf8.ValidString(conv) {
		return nil, httpapi.BadRequest("conversationId must be 1 to %d bytes of UTF-8", event.MaxConversationIDBytes)
	}
	force := in.Force || (in.Body != nil && in.Body.Force != nil && *in.Body.Force)
	out, err := h.api.Summarize(ctx, agentID, conv, force, 0)
	if err != nil {
		var bad *event.InvalidError
		switch {
		case errors.As(err, &bad):
			return nil, httpapi.BadRequest("%s", bad.Msg)
		case errors.Is(err, fault.ErrUnavailable):
			return nil, err // the bus: 503
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, summarizer.ErrUnreadableOutcome):
			return nil, fmt.Errorf("记忆提取失败: %w", err)
		}
		return nil, summarizer.PublishError(err)
	}
	if out.Pending {
		res := SummarizeResult{Status: "pending", RequestID: out.RequestID, Seq: out.Seq, NoWorker: out.NoWorker,
			Reason: fmt.Sprintf("no worker finished within %s; the request stays queued and its outcome will be listed at GET /api/v1/memory/%d/runs?eventId=%s",
				h.api.ManualWait(), agentID, out.RequestID)}
		if out.NoWorker {
			res.Reason = fmt.Sprintf("no summarizer worker is pulling from consumer %q of %s (no pull request waiting, nothing in progress): start a summarizer process (-target summarizer or all); the request stays queued and its outcome will be listed at GET /api/v1/memory/%d/runs?eventId=%s",
				bus.ConsumerSummarizer, bus.StreamEvents, agentID, out.RequestID)
		}
		return httpapi.Answer(http.StatusAccepted, res), nil
	}
	if out.Status == store.RunFailed {
		m := "记忆提取失败: " + out.Reason
		if out.Retrying {
			m += "（将自动重试 / will be retried automatically）"
		}
		return nil, &httpapi.Error{Status: http.StatusInternalServerError, Msg: m}
	}
	return httpapi.OK(SummarizeResult{Status: out.Status, Reason: out.Reason, RunID: out.RunID, RequestID: out.RequestID}), nil
}

type runsInput struct {
	httpapi.AgentPath
	Kind    string `query:"kind" enum:"summarize,emergence" doc:"Only runs of this kind."`
	EventID string `query:"eventId" doc:"Only the runs of this event or request id."`
	Limit   int    `query:"limit" minimum:"1" maximum:"1000" doc:"At most this many runs."`
}

// RunList is an agent's runs, newest first.
type RunList struct {
	AgentID int64     `json:"agentId"`
	Count   int       `json:"count"`
	Runs    []api.Run `json:"runs"`
}

func (h pipelineHandlers) runs(ctx context.Context, in *runsInput) (*httpapi.Response[RunList], error) {
	if err := httpapi.Act(ctx, in.AgentID); err != nil {
		return nil, err
	}
	runs, err := h.api.Ledger.List(ctx, ledger.Filter{AgentID: in.AgentID, Kind: in.Kind, EventID: in.EventID, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	return httpapi.OK(RunList{AgentID: in.AgentID, Count: len(runs), Runs: runs}), nil
}

func (h pipelineHandlers) pending(ctx context.Context, in *httpapi.AgentPath) (*httpapi.Response[api.Pending], error) {
	if err := httpapi.Act(ctx, in.AgentID); err != nil {
		return nil, err
	}
	if h.api.Pending == nil {
		return nil, httpapi.Errorf(http.StatusServiceUnavailable, "this process does not read the lease bucket (%s); ask an API process", bus.BucketLease)
	}
	p, err := h.api.Pending.Pending(ctx, in.AgentID)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, fault.ErrUnavailable) {
			return nil, &httpapi.Error{Status: http.StatusServiceUnavailable, Msg: err.Error() + "; retry", Err: err}
		}
		return nil, err
	}
	return httpapi.OK(p), nil
}

// RegisterEmergence adds the spec's manual trigger, POST /api/v1/memory/{agentId}/emergence.
func RegisterEmergence(s *httpapi.Server, t *emergence.Trigger) {
	httpapi.Register(s, huma.Operation{Method: http.MethodPost, Path: "/api/v1/memory/{agentId}/emergence", OperationID: "consolidateMemory", Tags: []string{"Pipeline"},
		Summary:     "Consolidate the agent's recent daily notes into MEMORY.md now",
		Description: "Through the emergence worker (the same lease, guard and ledger as a cron slot). 500 \"记忆整合失败: …\" when the run failed; 202 {\"status\":\"pending\"} when ?waitSeconds= (default 150) runs out first; 429 with Retry-After within the per-agent cooldown.",
		Metadata:    map[string]any{httpapi.MetaAlso: []int{http.StatusAccepted}},
		Errors:      []int{403, 429}},
		func(ctx context.Context, in *triggerInput) (*httpapi.Response[emergence.Result], error) {
			if err := httpapi.Act(ctx, in.AgentID); err != nil {
				return nil, err
			}
			wait := t.Wait()
			if in.WaitSeconds > 0 {
				wait = time.Duration(in.WaitSeconds) * time.Second
			}
			res, err := t.Run(ctx, in.AgentID, wait)
			if err != nil {
				return nil, err
			}
			if res.Status == "pending" {
				return httpapi.Answer(http.StatusAccepted, res), nil
			}
			return httpapi.OK(res), nil
		})
}

type triggerInput struct {
	httpapi.AgentPath
	WaitSeconds int `query:"waitSeconds" minimum:"1" maximum:"600" doc:"How long to wait for the outcome (default: the server's, 150 s)."`
}
