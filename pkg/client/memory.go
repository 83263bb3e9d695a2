package client

import (
	"context"
	"github.com/matememory/matememory/pkg/api"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/matememory/matememory/pkg/event"
)

// PublishCompletion posts a ConversationCompletedEvent and returns once JetStream has stored
// it (ack.Duplicate: that event id was stored before, nothing new was). An empty EventID and
// a zero OccurredAt are filled in on e first, so publishing the same e again after an error
// (IsRetryable) stores it once, never twice.
func (c *Client) PublishCompletion(ctx context.Context, e *event.ConversationCompletedEvent) (*event.Ack, error) {
	e.Complete(time.Now())
	var ack event.Ack
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/events/conversation-completed", body: e, retrySafe: true}, &ack)
	if err != nil {
		return nil, err
	}
	return &ack, nil
}

// Outcome statuses of a manual summarize or emergence (api's RunStatus values).
const (
	StatusCompleted = api.StatusCompleted
	StatusSkipped   = api.StatusSkipped
	// StatusRefused: the model's rewrite was refused by the guard (summarize only; emergence
	// reports it as skipped with a "refused: " reason).
	StatusRefused = api.StatusRefused
	// StatusPending: no outcome within the server's wait; the request stays queued and its
	// outcome will be in Runs under RequestID.
	StatusPending = api.StatusPending
	// StatusFailed: the attempt failed; it is retried unless Run.Final says otherwise.
	StatusFailed = api.StatusFailed
	// StatusDeferred: the agent was in its cooldown or its lease was held; redelivered later.
	StatusDeferred = api.StatusDeferred
)

// RunStatus is the status of a run or of a manual request's outcome.
type RunStatus = api.RunStatus

// RunOutcome is what a manual summarize or emergence really did. A failure is an *APIError
// with status 500 and the spec's message (记忆提取失败: … / 记忆整合失败: …).
type RunOutcome struct {
	Status RunStatus `json:"status"`
	// Reason says why it was skipped or refused, or why it is still pending.
	Reason string `json:"reason,omitempty"`
	RunID  string `json:"runId,omitempty"`
	// RequestID is the request's event id in the run ledger (RunFilter.EventID).
	RequestID string `json:"requestId,omitempty"`
	// RunStatus is the ledger's status of the run (emergence).
	RunStatus RunStatus `json:"runStatus,omitempty"`
}

func memoryPath(agentID int64) string {
	return "/api/v1/memory/" + itoa(agentID)
}

// Summarize extracts memory from one conversation now, through the summarizer workers, and
// says what happened.
func (c *Client) Summarize(ctx context.Context, agentID int64, conversationID string) (*RunOutcome, error) {
	var out RunOutcome
	_, err := c.do(ctx, request{method: http.MethodPost, path: memoryPath(agentID) + "/summarize/" + seg(conversationID)}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ForceSummarize is Summarize for a conversation already extracted up to its last message
// (after a refused run, say): it extracts the conversation's last transcript again, under the
// agent's lease; the daily entry of a message range is still appended once.
func (c *Client) ForceSummarize(ctx context.Context, agentID int64, conversationID string) (*RunOutcome, error) {
	var out RunOutcome
	_, err := c.do(ctx, request{method: http.MethodPost, path: memoryPath(agentID) + "/summarize/" + seg(conversationID),
		query: url.Values{"force": {"true"}}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Emergence consolidates the agent's recent daily notes into MEMORY.md now, through the
// emergence worker, and says what happened.
func (c *Client) Emergence(ctx context.Context, agentID int64) (*RunOutcome, error) {
	var out RunOutcome
	_, err := c.do(ctx, request{method: http.MethodPost, path: memoryPath(agentID) + "/emergence"}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Run is one summarize or emergence attempt from the run ledger; Run.Final says whether
// more attempts follow.
type Run = api.Run

// RunFilter narrows Runs; zero fields do not filter.
type RunFilter struct {
	// Kind is "summarize" or "emergence".
	Kind string
	// EventID is the event or request a run handled (RunOutcome.RequestID for manual ones).
	EventID string
	// Limit caps the count (the server's default when 0; at most 1000).
	Limit int
}

// Runs lists the agent's summarize and emergence runs, newest first.
func (c *Client) Runs(ctx context.Context, agentID int64, f RunFilter) ([]Run, error) {
	q := url.Values{}
	if f.Kind != "" {
		q.Set("kind", f.Kind)
	}
	if f.EventID != "" {
		q.Set("eventId", f.EventID)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out struct {
		Runs []Run `json:"runs"`
	}
	_, err := c.do(ctx, request{method: http.MethodGet, path: memoryPath(agentID) + "/runs", query: q}, &out)
	return out.Runs, err
}
