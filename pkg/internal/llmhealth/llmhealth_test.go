package llmhealth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := New(func() time.Time { return now })
	if s := h.Status(); s != "no calls yet" {
		t.Fatalf("%q", s)
	}
	h.Record(context.Background(), nil)
	now = now.Add(10 * time.Second)
	if s := h.Status(); s != "ok (last call 10s ago)" || h.Failing() {
		t.Fatalf("%q", s)
	}
	h.Record(context.Background(), errors.New("connection refused"))
	h.Record(context.Background(), errors.New("connection refused"))
	if s := h.Status(); !strings.HasPrefix(s, "failing: connection refused (2 failed in a row") || !strings.Contains(s, "last success 10s ago") || !h.Failing() {
		t.Fatalf("%q", s)
	}
	// A cancelled call (shutdown) says nothing about the LLM.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.Record(ctx, context.Canceled)
	if s := h.Status(); !strings.Contains(s, "2 failed in a row") {
		t.Fatalf("cancelled call recorded: %q", s)
	}
	h.Record(context.Background(), nil)
	if h.Failing() {
		t.Fatal("a success does not clear the failure")
	}
}
