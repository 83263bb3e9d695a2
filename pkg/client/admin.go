package client

import (
	"context"
	"github.com/matememory/matememory/pkg/api"
	"net/http"
	"net/url"
	"strconv"
)

// CronJob is a scheduled task of an agent: a Memory Consolidation ("emergence") or a message
// sent to the agent ("text").
type CronJob = api.CronJob

// CronJobInput creates or changes a cron job; nil fields take their defaults (create,
// replace) or stay as they are (UpdateCronJob).
type CronJobInput struct {
	AgentID        *int64  `json:"agentId,omitempty"`
	Name           *string `json:"name,omitempty"`
	CronExpression *string `json:"cronExpression,omitempty"`
	Timezone       *string `json:"timezone,omitempty"`
	TaskType       *string `json:"taskType,omitempty"`
	TriggerMessage *string `json:"triggerMessage,omitempty"`
	RequestBody    *string `json:"requestBody,omitempty"`
	Enabled        *bool   `json:"enabled,omitempty"`
}

// CronJobFilter narrows CronJobs; zero fields do not filter. Limit and Offset page.
type CronJobFilter struct {
	AgentID       int64
	TaskType      string
	Limit, Offset int
}

// CronJobs lists cron jobs the key may see (its agents', or all with an admin key).
func (c *Client) CronJobs(ctx context.Context, f CronJobFilter) ([]CronJob, error) {
	q := url.Values{}
	if f.AgentID > 0 {
		q.Set("agentId", itoa(f.AgentID))
	}
	if f.TaskType != "" {
		q.Set("taskType", f.TaskType)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Offset > 0 {
		q.Set("offset", strconv.Itoa(f.Offset))
	}
	var out struct {
		Jobs []CronJob `json:"jobs"`
	}
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/cron-jobs", query: q}, &out)
	return out.Jobs, err
}

// CronJob reads one cron job, with its next and last run.
func (c *Client) CronJob(ctx context.Context, id int64) (*CronJob, error) {
	var j CronJob
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/cron-jobs/" + itoa(id)}, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// CreateCronJob creates a cron job; a bad expression or time zone is ErrBadRequest.
func (c *Client) CreateCronJob(ctx context.Context, in CronJobInput) (*CronJob, error) {
	var j CronJob
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/cron-jobs", body: in}, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// UpdateCronJob changes the fields of in that are set.
func (c *Client) UpdateCronJob(ctx context.Context, id int64, in CronJobInput) (*CronJob, error) {
	var j CronJob
	if _, err := c.do(ctx, request{method: http.MethodPatch, path: "/api/v1/cron-jobs/" + itoa(id), body: in}, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// DeleteCronJob deletes a cron job.
func (c *Client) DeleteCronJob(ctx context.Context, id int64) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/api/v1/cron-jobs/" + itoa(id)}, nil)
	return err
}

// DeadLetter is a message the workers gave up on (admin keys only). Its Seq is what
// RetryDeadLetter takes and what DeadLetterFilter.After pages with.
type DeadLetter = api.DeadLetter

// DeadLetterFilter pages dead letters: After is the last Seq of the previous page.
type DeadLetterFilter struct {
	// Subject is an original subject (mate.conversation.completed.7) or a mate.dlq. one.
	Subject string
	After   uint64
	Limit   int
}

// DeadLetters lists dead letters in sequence order (admin key).
func (c *Client) DeadLetters(ctx context.Context, f DeadLetterFilter) ([]DeadLetter, error) {
	q := url.Values{}
	if f.Subject != "" {
		q.Set("subject", f.Subject)
	}
	if f.After > 0 {
		q.Set("after", strconv.FormatUint(f.After, 10))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out struct {
		DeadLetters []DeadLetter `json:"deadLetters"`
	}
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/admin/dlq", query: q}, &out)
	return out.DeadLetters, err
}

// RetriedLetter is where a retried dead letter was published again.
type RetriedLetter = api.RetriedLetter

// RetryDeadLetter publishes dead letter seq again on its original subject (admin key);
// retrying one already retried is ErrNotFound.
func (c *Client) RetryDeadLetter(ctx context.Context, seq uint64) (*RetriedLetter, error) {
	var out RetriedLetter
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/api/v1/admin/dlq/" + strconv.FormatUint(seq, 10) + "/retry"}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// OverBudget is a core file over its token budget.
type OverBudget = api.OverBudget

// ListOverBudget lists the core files over their budgets, by agent id then file (admin
// key), at most limit (0: the server's default).
func (c *Client) ListOverBudget(ctx context.Context, limit int) ([]OverBudget, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		Files []OverBudget `json:"files"`
	}
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/admin/agents/over-budget", query: q}, &out)
	return out.Files, err
}
