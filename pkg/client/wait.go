package client

import (
	"context"
	"fmt"
	"time"
)

// WaitOption configures WaitRun.
type WaitOption func(*waitOptions)

type waitOptions struct {
	interval, maxInterval time.Duration
}

// WithPollInterval sets the first and the longest wait between two looks at the ledger
// (default 200 ms, growing to 2 s).
func WithPollInterval(first, longest time.Duration) WaitOption {
	return func(o *waitOptions) { o.interval, o.maxInterval = first, max(first, longest) }
}

// WaitRun waits until the event or manual request eventID (an event's id, or
// RunOutcome.RequestID) has a final run in the agent's run ledger, and returns it: like
// Temporal's WorkflowRun.Get, so no caller writes a polling loop. Deferred attempts (the
// agent's cooldown, a held lease) and failures that will be retried are waited through.
// Bound the wait with ctx; when it ends first, the error wraps ctx's and the last run seen
// (if any) is returned with it.
//
//	ack, _ := c.PublishCompletion(ctx, e)
//	run, err := c.WaitRun(ctx, e.AgentID, ack.EventID)
//	// run.Status: completed, skipped, refused, or failed (dead-lettered)
func (c *Client) WaitRun(ctx context.Context, agentID int64, eventID string, opts ...WaitOption) (*Run, error) {
	o := waitOptions{interval: 200 * time.Millisecond, maxInterval: 2 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if eventID == "" {
		return nil, fmt.Errorf("matememory: WaitRun needs an event id")
	}
	var last *Run
	wait := o.interval
	for {
		runs, err := c.Runs(ctx, agentID, RunFilter{EventID: eventID, Limit: 50})
		if err != nil {
			return last, err
		}
		// Newest first: the newest final run is the outcome.
		for i := range runs {
			if runs[i].Final() {
				return &runs[i], nil
			}
		}
		if len(runs) > 0 {
			last = &runs[0]
		}
		if err := sleep(ctx, wait); err != nil {
			state := "no run yet"
			if last != nil {
				state = fmt.Sprintf("last run %s: %s", last.Status, last.Reason)
			}
			return last, fmt.Errorf("matememory: waiting for the outcome of %s (%s): %w", eventID, state, err)
		}
		wait = min(wait*2, o.maxInterval)
	}
}
