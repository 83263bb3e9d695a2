// Package llmhealth tracks whether the LLM answers: a decorator around llm.Client records
// each call's outcome, and Status summarises it for /readyz's detail. The LLM's health never
// fails readiness (the workers retry and the context window degrades), it only shows.
package llmhealth

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/matememory/matememory/pkg/internal/llm"
)

// Health is the recent outcome of the LLM calls of one process.
type Health struct {
	now func() time.Time

	mu          sync.Mutex
	calls       int
	lastOK      time.Time
	lastErr     error
	lastErrAt   time.Time
	failsInARow int
}

// New builds a Health; now may be nil (time.Now).
func New(now func() time.Time) *Health {
	if now == nil {
		now = time.Now
	}
	return &Health{now: now}
}

// Wrap returns c recording every call's outcome in h. A nil c stays nil (no LLM configured).
func (h *Health) Wrap(c llm.Client) llm.Client {
	if c == nil {
		return nil
	}
	return &client{c: c, h: h}
}

// Record notes one call's outcome. A cancelled call (shutdown, a lost lease) says nothing
// about the LLM and is not recorded.
func (h *Health) Record(ctx context.Context, err error) {
	if err != nil && ctx.Err() != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if err == nil {
		h.lastOK, h.failsInARow = h.now(), 0
		return
	}
	h.lastErr, h.lastErrAt = err, h.now()
	h.failsInARow++
}

// Status is the LLM's health in a few words: "ok (...)", "failing: <cause> (...)", or "no
// calls yet".
func (h *Health) Status() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	switch {
	case h.calls == 0:
		return "no calls yet"
	case h.failsInARow == 0:
		return fmt.Sprintf("ok (last call %s ago)", now.Sub(h.lastOK).Round(time.Second))
	}
	since := "never answered since start"
	if !h.lastOK.IsZero() {
		since = fmt.Sprintf("last success %s ago", now.Sub(h.lastOK).Round(time.Second))
	}
	return fmt.Sprintf("failing: %v (%d failed in a row, the last %s ago; %s)", h.lastErr, h.failsInARow,
		now.Sub(h.lastErrAt).Round(time.Second), since)
}

// Failing reports whether the last call failed.
func (h *Health) Failing() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failsInARow > 0
}

type client struct {
	c llm.Client
	h *Health
}

func (c *client) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	resp, err := c.c.Complete(ctx, req)
	c.h.Record(ctx, err)
	return resp, err
}

func (c *client) Model() string { return c.c.Model() }
