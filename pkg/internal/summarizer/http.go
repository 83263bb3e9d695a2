package summarizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/eventpub"
	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/tracing"
)

// API holds what the pipeline's HTTP routes use.
type API struct {
	Publisher *eventpub.Publisher
	Ledger    *ledger.Ledger
	// JS reads and retries dead letters.
	JS jetstream.JetStream
	// NC receives manual summarize outcomes on an inbox.
	NC *nats.Conn
	// ManualTimeout bounds the wait for a manual summarize outcome.
	ManualTimeout time.Duration
	Metrics       *Metrics
	// Tracing starts the producer span of a dead letter's retry (the publisher traces its own).
	Tracing tracing.Messaging
	// Pending reads an agent's pending work (GET /api/v1/agents/{agentId}/pending).
	Pending *PendingReader
	// DB, when set, is read for the agents' erasure tombstones: an event that happened before
	// its agent was erased is refused at intake, so it is never stored on the stream.
	DB *gorm.DB
}

// RegisterRoutes adds the event intake, the spec's manual summarize path, the run ledger
// and the dead-letter operations.
func RegisterRoutes(s *httpapi.Server, api API) {
	if api.Metrics == nil {
		api.Metrics = NewMetrics(nil)
	}
	pipeline := []string{"Pipeline"}
	httpapi.Register(s, huma.Operation{Method: http.MethodPost, Path: "/api/v1/events/conversation-completed", OperationID: "publishConversationCompleted", Tags: pipeline,
		Summary:       "Publish a ConversationCompletedEvent",
		Description:   "Answers 202 once JetStream stored the event (duplicate is true when an event with this id was stored before: publishing is idempotent by eventId, scoped by agent), 503 when it did not: retry with the same eventId. eventId and occurredAt are filled in when absent.",
		DefaultStatus: http.StatusAccepted, Errors: []int{403, 503}}, api.publishCompleted)
	httpapi.Optional(s, reflect.TypeFor[event.ConversationCompletedEvent](), "eventId", "occurredAt")
	httpapi.MayOmit(s, reflect.TypeFor[event.Message](), "content") // an assistant message that only calls tools
	httpapi.Register(s, huma.Operation{Method: http.MethodPost, Path: "/api/v1/memory/{agentId}/summarize/{conversationId}", OperationID: "summarizeConversation", Tags: pipeline,
		Summary:      "Extract memory from a conversation now",
		Description:  "Through the summarizer workers; force (query or body) re-extracts a conversation already extracted. 500 \"记忆提取失败: …\" when the run failed; 202 {\"status\":\"pending\"} when no worker finished within the server's timeout or none is running (noWorker).",
		MaxBodyBytes: 4096, Metadata: map[string]any{httpapi.MetaAlso: []int{http.StatusAccepted}},
		Errors: []int{403, 503}}, api.summarize)
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: "/api/v1/memory/{agentId}/runs", OperationID: "listRuns", Tags: pipeline,
		Summary: "The run ledger of an agent, newest first", Errors: []int{403}}, api.runs)
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: "/api/v1/agents/{agentId}/pending", OperationID: "getAgentPending", Tags: []string{"Agents"},
		Summary: "What of an agent waits for an extraction, and why",
		Description: "Read from the agent's record in the lease bucket (the lease's holder, the cooldown, the waiter and the events coalesced behind it) and its watermarks (the conversations with messages not yet extracted); " +
			"writes nothing. Deferrals and coalesced events have no row in the run ledger until their extraction: this is where they show. 503 when the lease bucket cannot be read.",
		Errors: []int{403, 503}}, api.pending)
	admin := []string{"Admin"}
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: "/api/v1/admin/dlq", OperationID: "listDeadLetters", Tags: admin,
		Summary: "Dead letters, oldest first (admin key)", Errors: []int{403, 503}}, api.listDLQ)
	httpapi.Register(s, huma.Operation{Method: http.MethodPost, Path: "/api/v1/admin/dlq/{seq}/retry", OperationID: "retryDeadLetter", Tags: admin,
		Summary:     "Publish a dead letter again on its original subject (admin key)",
		Description: "Removes it from the dead-letter stream once published.", DefaultStatus: http.StatusAccepted,
		Errors: []int{403, 404, 503}}, api.retryDLQ)
}

type publishInput struct {
	Body event.ConversationCompletedEvent
}

func (api API) publishCompleted(ctx context.Context, in *publishInput) (*httpapi.Response[event.Ack], error) {
	e := in.Body
	e.Complete(time.Now())
	if err := e.Validate(); err != nil {
		return nil, err
	}
	if err := httpapi.Act(ctx, e.AgentID); err != nil {
		return nil, err
	}
	if api.DB != nil {
		if err := store.CheckNotErasedSince(ctx, api.DB, e.AgentID, e.OccurredAt); errors.Is(err, store.ErrErased) {
			return nil, httpapi.Errorf(http.StatusConflict, "agent %d was erased after this event occurred (%s); events from before an erasure are refused, send events that occur after it",
				e.AgentID, e.OccurredAt.UTC().Format(time.RFC3339))
		} else if err != nil {
			return nil, err
		}
	}
	ack, err := api.Publisher.PublishCompleted(ctx, &e)
	if err != nil {
		return nil, publishErr(err)
	}
	api.Metrics.Published.WithLabelValues("completed", strconv.FormatBool(ack.Duplicate)).Inc()
	return httpapi.Answer(http.StatusAccepted, ack), nil
}

func publishErr(err error) error {
	switch {
	case errors.Is(err, eventpub.ErrTooLarge):
		return &httpapi.Error{Status: http.StatusRequestEntityTooLarge, Msg: err.Error() + "; send fewer inline messages", Err: err}
	case errors.Is(err, eventpub.ErrUnavailable):
		return &httpapi.Error{Status: http.StatusServiceUnavailable, Err: err,
			Msg: "the event was not stored: JetStream is unavailable (" + err.Error() + "); retry with the same eventId, duplicates are discarded"}
	}
	return err
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

func (api API) summarize(ctx context.Context, in *summarizeInput) (*httpapi.Response[SummarizeResult], error) {
	if err := httpapi.Act(ctx, in.AgentID); err != nil {
		return nil, err
	}
	agentID, conv := in.AgentID, in.ConversationID
	if strings.TrimSpace(conv) == "" || len(conv) > event.MaxConversationIDBytes || !utf8.ValidString(conv) {
		return nil, httpapi.BadRequest("conversationId must be 1 to %d bytes of UTF-8", event.MaxConversationIDBytes)
	}
	force := in.Force || (in.Body != nil && in.Body.Force != nil && *in.Body.Force)
	out, err := api.Summarize(ctx, agentID, conv, force, 0)
	if err != nil {
		var bad *event.InvalidError
		switch {
		case errors.As(err, &bad):
			return nil, httpapi.BadRequest("%s", bad.Msg)
		case errors.Is(err, errBusUnavailable):
			return nil, &httpapi.Error{Status: http.StatusServiceUnavailable, Msg: err.Error(), Err: err}
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, errUnreadableOutcome):
			return nil, fmt.Errorf("记忆提取失败: %w", err)
		}
		return nil, publishErr(err)
	}
	if out.Pending {
		res := SummarizeResult{Status: "pending", RequestID: out.RequestID, Seq: out.Seq, NoWorker: out.NoWorker,
			Reason: fmt.Sprintf("no worker finished within %s; the request stays queued and its outcome will be listed at GET /api/v1/memory/%d/runs?eventId=%s",
				api.manualWait(), agentID, out.RequestID)}
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
	AgentID int64        `json:"agentId"`
	Count   int          `json:"count"`
	Runs    []ledger.Run `json:"runs"`
}

func (api API) runs(ctx context.Context, in *runsInput) (*httpapi.Response[RunList], error) {
	if err := httpapi.Act(ctx, in.AgentID); err != nil {
		return nil, err
	}
	runs, err := api.Ledger.List(ctx, ledger.Filter{AgentID: in.AgentID, Kind: in.Kind, EventID: in.EventID, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	return httpapi.OK(RunList{AgentID: in.AgentID, Count: len(runs), Runs: runs}), nil
}

func (api API) pending(ctx context.Context, in *httpapi.AgentPath) (*httpapi.Response[Pending], error) {
	if err := httpapi.Act(ctx, in.AgentID); err != nil {
		return nil, err
	}
	if api.Pending == nil {
		return nil, httpapi.Errorf(http.StatusServiceUnavailable, "this process does not read the lease bucket (%s); ask an API process", bus.BucketLease)
	}
	p, err := api.Pending.Pending(ctx, in.AgentID)
	if err != nil {
		if ctx.Err() == nil && errors.As(err, new(leaseReadError)) {
			return nil, &httpapi.Error{Status: http.StatusServiceUnavailable, Msg: err.Error() + "; retry", Err: err}
		}
		return nil, err
	}
	return httpapi.OK(p), nil
}

// DeadLetter is a dead letter as the API shows it: the payload is its JSON, or its text
// when it is not JSON.
type DeadLetter struct {
	bus.DeadLetterEntry
	Payload any `json:"payload"`
}

// DeadLetters is a page of dead letters.
type DeadLetters struct {
	Count       int          `json:"count"`
	DeadLetters []DeadLetter `json:"deadLetters"`
}

type dlqInput struct {
	After   uint64 `query:"after" doc:"Only dead letters after this sequence number."`
	Limit   int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Subject string `query:"subject" example:"mate.events.conversation.completed" doc:"Only dead letters of this original subject (or pattern)."`
}

func (api API) listDLQ(ctx context.Context, in *dlqInput) (*httpapi.Response[DeadLetters], error) {
	if err := httpapi.Admin(ctx); err != nil {
		return nil, err
	}
	limit := in.Limit
	if limit == 0 {
		limit = 100
	}
	subject := in.Subject
	if subject != "" && !strings.HasPrefix(subject, bus.SubjectDeadLetter+".") {
		subject = bus.DeadLetterSubject(subject)
	}
	list, err := bus.ListDeadLetters(ctx, api.JS, in.After, subject, limit)
	if err != nil {
		return nil, &httpapi.Error{Status: http.StatusServiceUnavailable, Msg: "read dead letters: " + err.Error(), Err: err}
	}
	out := make([]DeadLetter, len(list))
	for i, e := range list {
		out[i] = DeadLetter{DeadLetterEntry: e, Payload: string(e.Data)}
		if json.Valid(e.Data) {
			out[i].Payload = json.RawMessage(e.Data)
		}
	}
	return httpapi.OK(DeadLetters{Count: len(out), DeadLetters: out}), nil
}

type retryInput struct {
	Seq int64 `path:"seq" minimum:"1" doc:"The dead letter's sequence number in the dead-letter stream."`
}

func (api API) retryDLQ(ctx context.Context, in *retryInput) (*httpapi.Response[bus.Retried], error) {
	if err := httpapi.Admin(ctx); err != nil {
		return nil, err
	}
	res, err := bus.RetryDeadLetter(ctx, api.JS, uint64(in.Seq), tracing.With(api.Tracing))
	if errors.Is(err, bus.ErrDeadLetterNotFound) {
		return nil, httpapi.Errorf(http.StatusNotFound, "no dead letter with seq %d (already retried?)", in.Seq)
	}
	if err != nil {
		return nil, &httpapi.Error{Status: http.StatusServiceUnavailable, Msg: err.Error(), Err: err}
	}
	return httpapi.Answer(http.StatusAccepted, res), nil
}

// Without a summarizer worker (an api process alone against an external NATS) a manual
// summarize would wait its whole timeout for nothing. While it waits, the consumer is
// checked every idleCheckEvery: idleChecks checks in a row with no pull request waiting and
// nothing in progress mean no worker is running, and the caller is told so at once.
var (
	idleCheckEvery = time.Second
	idleChecks     = 3
)

// awaitOutcome waits for the worker's answer to request requestID on sub; idle reports
// that no worker pulls from the consumer. The answer is a plain NATS message, which is lost
// when it crosses a cluster before the subscription's interest did, or while a connection
// reconnects: the run ledger, which holds the outcome before it is sent, is read at each
// check, so a lost answer costs a second at most.
func (api API) awaitOutcome(ctx context.Context, sub *nats.Subscription, agentID int64, requestID string) (out event.Outcome, idle bool, err error) {
	misses := 0
	for {
		wctx, cancel := context.WithTimeout(ctx, idleCheckEvery)
		msg, err := sub.NextMsgWithContext(wctx)
		cancel()
		if err == nil {
			if err := json.Unmarshal(msg.Data, &out); err != nil {
				return out, false, fmt.Errorf("%w: %w", errUnreadableOutcome, err)
			}
			return out, false, nil
		}
		if ctx.Err() != nil {
			return out, false, ctx.Err()
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			return out, false, err // the subscription's own failure (a closed connection)
		}
		if o, ok := api.recordedOutcome(ctx, agentID, requestID); ok {
			return o, false, nil
		}
		if api.JS == nil {
			continue
		}
		cons, cerr := api.JS.Consumer(ctx, bus.StreamEvents, bus.ConsumerSummarizer)
		if cerr != nil {
			misses = 0
			continue
		}
		info, cerr := cons.Info(ctx)
		if cerr == nil && info.NumWaiting == 0 && info.NumAckPending == 0 {
			misses++
		} else {
			misses = 0
		}
		if misses >= idleChecks {
			return out, true, nil
		}
	}
}

// recordedOutcome is the outcome of request requestID as the run ledger has it: the newest
// run recorded under its id that a caller is answered with (a deferral is not an outcome).
func (api API) recordedOutcome(ctx context.Context, agentID int64, requestID string) (event.Outcome, bool) {
	if api.Ledger == nil {
		return event.Outcome{}, false
	}
	runs, err := api.Ledger.List(ctx, ledger.Filter{AgentID: agentID, Kind: ledger.KindSummarize, EventID: requestID, Limit: 1})
	if err != nil || len(runs) == 0 || runs[0].Status == store.RunDeferred {
		return event.Outcome{}, false
	}
	r := runs[0]
	return event.Outcome{Status: r.Status, Reason: r.Reason, RunID: r.RunID,
		Retrying: r.Status == store.RunFailed && !strings.Contains(r.Reason, "dead-lettered")}, true
}
