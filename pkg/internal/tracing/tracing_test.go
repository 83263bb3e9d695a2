package tracing_test

// Tests that need a JetStream server are in pkg/internal/test/eventpub: pkg/eventpub imports this package,
// and go mod tidy reads the tests of every package a program builds, so importing
// nats-server here would put it in every chat service's module graph.

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/matememory/matememory/pkg/internal/tracing"
)

func TestZeroValueCarriesContextWithoutRecording(t *testing.T) {
	var m tracing.Messaging
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), sc)
	h := nats.Header{}
	_, span := m.StartPublish(ctx, "a.b.3", h)
	span.End()
	if span.IsRecording() {
		t.Error("the zero value recorded a span")
	}
	if got := h.Get("traceparent"); got != "00-01000000000000000000000000000000-0200000000000000-01" {
		t.Errorf("traceparent %q", got)
	}
	if got := trace.SpanContextFromContext(m.Extract(context.Background(), h)); got.TraceID() != sc.TraceID() {
		t.Errorf("extracted %v", got)
	}
}

func TestStripRemovesOldContext(t *testing.T) {
	var m tracing.Messaging
	h := nats.Header{"traceparent": {"00-01000000000000000000000000000000-0200000000000000-01"}, "tracestate": {"a=b"}, "Mate-Retry-Of": {"4"}}
	m.Strip(h)
	if len(h) != 1 || h.Get("Mate-Retry-Of") != "4" {
		t.Fatalf("after Strip: %v", h)
	}
}

func TestSubjectName(t *testing.T) {
	for in, want := range map[string]string{
		"mate.conversation.completed.7":  "mate.conversation.completed.{agentId}",
		"mate.memory.emergence.123":      "mate.memory.emergence.{agentId}",
		"mate.dlq.mate.summarize.x":      "mate.dlq.mate.summarize.x",
		"plain":                          "plain",
		"ends.with.dot.":                 "ends.with.dot.",
		"mate.conversation.completed.7a": "mate.conversation.completed.7a",
	} {
		if got := tracing.SubjectName(in); got != want {
			t.Errorf("SubjectName(%q) = %q, want %q", in, got, want)
		}
	}
}
