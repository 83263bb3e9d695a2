package summarizer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/bus"
	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/eventpub"
	"github.com/matememory/matememory/pkg/httpapi"
	"github.com/matememory/matememory/pkg/ledger"
	"github.com/matememory/matememory/pkg/store"
	"github.com/matememory/matememory/pkg/tracing"
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
}

// RegisterRoutes adds the event intake, the spec's manual summarize path, the run ledger
// and the dead-letter operations.
func RegisterRoutes(s *httpapi.Server, api API) {
	if api.Metrics == nil {
		api.Metrics = NewMetrics(nil)
	}
	s.Handle("POST /api/v1/events/conversation-completed",
		`Publish a ConversationCompletedEvent {"eventId","agentId","conversationId","userMessage","assistantReply","messageCount","triggerSource":"web|channel|cron|api|<own>","turnStatus"?,"finishReason"?,"messages":[...]}; 202 {eventId,stream,seq,duplicate} once JetStream stored it, 503 when it did not`,
		api.publishCompleted)
	s.Handle("POST /api/v1/memory/{agentId}/summarize/{conversationId}",
		`Extract memory from a conversation now (through the summarizer workers); ?force=true or body {"force":true} re-extracts a conversation already extracted (under the lease, the daily entry of a message range appended once); {"status":"completed"|"skipped"|"refused","reason","runId"}, 500 "记忆提取失败: …", 202 {"status":"pending"} if still running at the timeout`,
		api.summarize)
	s.Handle("GET /api/v1/memory/{agentId}/runs",
		"The run ledger of an agent, newest first (?kind=summarize|emergence&eventId=&limit=)", api.runs)
	s.Handle("GET /api/v1/admin/dlq",
		"Dead letters, oldest first (?after=<seq>&limit=&subject=<original subject or pattern>); admin key", api.listDLQ)
	s.Handle("POST /api/v1/admin/dlq/{seq}/retry",
		"Publish a dead letter again on its original subject and remove it from the dead-letter stream; admin key", api.retryDLQ)
}

func (api API) publishCompleted(r *http.Request) (any, error) {
	var e event.ConversationCompletedEvent
	if err := httpapi.Decode(r, &e); err != nil {
		return nil, err
	}
	e.Complete(time.Now())
	if err := e.Validate(); err != nil {
		return nil, err
	}
	if err := httpapi.Authorize(r, e.AgentID); err != nil {
		return nil, err
	}
	ack, err := api.Publisher.PublishCompleted(r.Context(), &e)
	if err != nil {
		return nil, publishErr(err)
	}
	api.Metrics.Published.WithLabelValues("completed", strconv.FormatBool(ack.Duplicate)).Inc()
	return httpapi.Accepted(ack), nil
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

func (api API) summarize(r *http.Request) (any, error) {
	agentID, err := httpapi.AgentID(r)
	if err != nil {
		return nil, err
	}
	conv := r.PathValue("conversationId")
	if strings.TrimSpace(conv) == "" || len(conv) > event.MaxConversationIDBytes || !utf8.ValidString(conv) {
		return nil, httpapi.BadRequest("conversationId must be 1 to %d bytes of UTF-8", event.MaxConversationIDBytes)
	}
	force, err := forceParam(r)
	if err != nil {
		return nil, err
	}
	inbox := nats.NewInbox()
	sub, err := api.NC.SubscribeSync(inbox)
	if err != nil {
		return nil, &httpapi.Error{Status: http.StatusServiceUnavailable, Msg: "message bus unavailable: " + err.Error(), Err: err}
	}
	defer sub.Unsubscribe()
	req := event.SummarizeRequest{AgentID: agentID, ConversationID: conv, ReplyTo: inbox, Force: force}
	ack, err := api.Publisher.PublishSummarize(r.Context(), &req)
	if err != nil {
		return nil, publishErr(err)
	}
	api.Metrics.Published.WithLabelValues("summarize", strconv.FormatBool(ack.Duplicate)).Inc()
	timeout := api.ManualTimeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	msg, idle, err := api.awaitOutcome(ctx, sub)
	if idle {
		return httpapi.Accepted(map[string]any{
			"status": "pending", "requestId": req.RequestID, "seq": ack.Seq, "noWorker": true,
			"reason": fmt.Sprintf("no summarizer worker is pulling from consumer %q of %s (no pull request waiting, nothing in progress): start a summarizer process (-target summarizer or all); the request stays queued and its outcome will be listed at GET /api/v1/memory/%d/runs?eventId=%s",
				bus.ConsumerSummarizer, bus.StreamEvents, agentID, req.RequestID),
		}), nil
	}
	if err != nil {
		if r.Context().Err() != nil {
			return nil, r.Context().Err()
		}
		return httpapi.Accepted(map[string]any{
			"status": "pending", "requestId": req.RequestID, "seq": ack.Seq,
			"reason": fmt.Sprintf("no worker finished within %s; the request stays queued and its outcome will be listed at GET /api/v1/memory/%d/runs?eventId=%s",
				timeout, agentID, req.RequestID),
		}), nil
	}
	var out event.Outcome
	if err := json.Unmarshal(msg.Data, &out); err != nil {
		return nil, fmt.Errorf("记忆提取失败: unreadable outcome from the worker: %w", err)
	}
	if out.Status == store.RunFailed {
		m := "记忆提取失败: " + out.Reason
		if out.Retrying {
			m += "（将自动重试 / will be retried automatically）"
		}
		return nil, &httpapi.Error{Status: http.StatusInternalServerError, Msg: m}
	}
	return map[string]any{"status": out.Status, "reason": out.Reason, "runId": out.RunID, "requestId": out.RequestID}, nil
}

func (api API) runs(r *http.Request) (any, error) {
	agentID, err := httpapi.AgentID(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	f := ledger.Filter{AgentID: agentID, Kind: q.Get("kind"), EventID: q.Get("eventId")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 1000 {
			return nil, httpapi.BadRequest("limit must be 1 to 1000, got %q", v)
		}
		f.Limit = n
	}
	if f.Kind != "" && f.Kind != ledger.KindSummarize && f.Kind != ledger.KindEmergence {
		return nil, httpapi.BadRequest("kind %q is not a run kind; accepted: summarize, emergence", f.Kind)
	}
	runs, err := api.Ledger.List(r.Context(), f)
	if err != nil {
		return nil, err
	}
	return map[string]any{"agentId": agentID, "count": len(runs), "runs": runs}, nil
}

// dlqEntry is a dead letter as the API shows it.
type dlqEntry struct {
	bus.DeadLetterEntry
	Payload any `json:"payload"`
}

func (api API) listDLQ(r *http.Request) (any, error) {
	if err := httpapi.RequireAdmin(r); err != nil {
		return nil, err
	}
	q := r.URL.Query()
	var after uint64
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return nil, httpapi.BadRequest("after must be a stream sequence number, got %q", v)
		}
		after = n
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 1000 {
			return nil, httpapi.BadRequest("limit must be 1 to 1000, got %q", v)
		}
		limit = n
	}
	subject := q.Get("subject")
	if subject != "" && !strings.HasPrefix(subject, bus.SubjectDeadLetter+".") {
		subject = bus.DeadLetterSubject(subject)
	}
	list, err := bus.ListDeadLetters(r.Context(), api.JS, after, subject, limit)
	if err != nil {
		return nil, &httpapi.Error{Status: http.StatusServiceUnavailable, Msg: "read dead letters: " + err.Error(), Err: err}
	}
	out := make([]dlqEntry, len(list))
	for i, e := range list {
		out[i] = dlqEntry{DeadLetterEntry: e, Payload: string(e.Data)}
		if json.Valid(e.Data) {
			out[i].Payload = json.RawMessage(e.Data)
		}
	}
	return map[string]any{"count": len(out), "deadLetters": out}, nil
}

func (api API) retryDLQ(r *http.Request) (any, error) {
	if err := httpapi.RequireAdmin(r); err != nil {
		return nil, err
	}
	seq, err := httpapi.PathInt64(r, "seq")
	if err != nil {
		return nil, err
	}
	res, err := bus.RetryDeadLetter(r.Context(), api.JS, uint64(seq), tracing.With(api.Tracing))
	if errors.Is(err, bus.ErrDeadLetterNotFound) {
		return nil, httpapi.Errorf(http.StatusNotFound, "no dead letter with seq %d (already retried?)", seq)
	}
	if err != nil {
		return nil, &httpapi.Error{Status: http.StatusServiceUnavailable, Msg: err.Error(), Err: err}
	}
	return httpapi.Accepted(res), nil
}

// forceParam reads force from ?force= or an optional JSON body {"force": bool} (MateClaw's
// route has no body, so none is required).
func forceParam(r *http.Request) (bool, error) {
	force := false
	if q := r.URL.Query().Get("force"); q != "" {
		v, err := strconv.ParseBool(q)
		if err != nil {
			return false, httpapi.BadRequest("force must be true or false, got %q", q)
		}
		force = v
	}
	if r.Body == nil {
		return force, nil
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 4097))
	if err != nil {
		return false, httpapi.BadRequest("read request body: %v", err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return force, nil
	}
	if len(raw) > 4096 {
		return false, httpapi.BadRequest("the body is at most {\"force\": true|false}")
	}
	var body struct {
		Force *bool `json:"force"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return false, httpapi.BadRequest("invalid JSON body (optional, {\"force\": true|false}): %v", err)
	}
	if body.Force != nil && *body.Force {
		force = true
	}
	return force, nil
}

// Without a summarizer worker (an api process alone against an external NATS) a manual
// summarize would wait its whole timeout for nothing. While it waits, the consumer is
// checked every idleCheckEvery: idleChecks checks in a row with no pull request waiting and
// nothing in progress mean no worker is running, and the caller is told so at once.
var (
	idleCheckEvery = time.Second
	idleChecks     = 3
)

// awaitOutcome waits for the worker's answer on sub; idle reports that no worker pulls
// from the consumer.
func (api API) awaitOutcome(ctx context.Context, sub *nats.Subscription) (msg *nats.Msg, idle bool, err error) {
	misses := 0
	for {
		wctx, cancel := context.WithTimeout(ctx, idleCheckEvery)
		msg, err = sub.NextMsgWithContext(wctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return msg, false, err
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
			return nil, true, nil
		}
	}
}
