// Package tracing carries OpenTelemetry trace context across NATS message headers, so one
// trace runs from an HTTP request through JetStream into the worker that handles the
// message (and the LLM call it makes). It has no global state: the tracer provider and the
// propagator are passed in by the composition root (pkg/internal/app).
//
// It is a package of its own, not part of pkg/internal/bus, so that pkg/event (imported by chat
// services) does not pull in the embedded NATS server that pkg/internal/bus starts.
package tracing

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TracerName is the instrumentation scope of MateMemory's messaging spans.
const TracerName = "github.com/matememory/matememory/pkg/internal/tracing"

// Messaging attribute keys (OpenTelemetry semantic conventions; the Go semconv package has
// no NATS system value, so the keys are spelled out).
const (
	attrSystem      = attribute.Key("messaging.system")
	attrDestination = attribute.Key("messaging.destination.name")
	attrOpName      = attribute.Key("messaging.operation.name")
	attrOpType      = attribute.Key("messaging.operation.type")
	attrMessageID   = attribute.Key("messaging.message.id")
)

// Messaging carries trace context across NATS message headers: producers start a span and
// inject its context into the headers, consumers extract it and start their span as its
// child, so one trace runs from an HTTP request through the stream into a worker.
//
// The zero value is usable: it records no spans (no-op provider) but still propagates the
// W3C trace context already in ctx, so a traceparent received over HTTP reaches the
// workers even when this process exports nothing.
type Messaging struct {
	Provider   trace.TracerProvider
	Propagator propagation.TextMapPropagator
}

func (t Messaging) tracer() trace.Tracer {
	p := t.Provider
	if p == nil {
		p = noop.NewTracerProvider()
	}
	return p.Tracer(TracerName)
}

func (t Messaging) propagator() propagation.TextMapPropagator {
	if t.Propagator == nil {
		return propagation.TraceContext{}
	}
	return t.Propagator
}

// HeaderCarrier adapts nats.Header to propagation.TextMapCarrier. NATS header names are
// case-sensitive and propagators use lower-case names (traceparent), so keys are used as is.
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier(nil)

// Get returns the first value of key.
func (c HeaderCarrier) Get(key string) string { return nats.Header(c).Get(key) }

// Set replaces the values of key.
func (c HeaderCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }

// Keys lists the header names.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Inject writes the trace context of ctx into h (which must not be nil).
func (t Messaging) Inject(ctx context.Context, h nats.Header) {
	t.propagator().Inject(ctx, HeaderCarrier(h))
}

// Extract returns ctx with the trace context found in h.
func (t Messaging) Extract(ctx context.Context, h nats.Header) context.Context {
	if h == nil {
		return ctx
	}
	return t.propagator().Extract(ctx, HeaderCarrier(h))
}

// Strip removes the propagator's fields from h, so a republished message (a dead letter
// retried) carries the context of whoever republishes it, not the original producer's.
func (t Messaging) Strip(h nats.Header) {
	for _, f := range t.propagator().Fields() {
		for k := range h {
			if strings.EqualFold(k, f) {
				delete(h, k)
			}
		}
	}
}

// StartPublish starts a producer span for a message to subject and injects its context
// into h (which must not be nil). End the span with End once the publish returned.
func (t Messaging) StartPublish(ctx context.Context, subject string, h nats.Header) (context.Context, trace.Span) {
	ctx, span := t.tracer().Start(ctx, "publish "+SubjectName(subject),
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attrSystem.String("nats"), attrDestination.String(subject),
			attrOpName.String("publish"), attrOpType.String("send")))
	if id := h.Get(nats.MsgIdHdr); id != "" {
		span.SetAttributes(attrMessageID.String(id))
	}
	t.Inject(ctx, h)
	return ctx, span
}

// PublishMsg publishes msg on JetStream inside a producer span, its context injected into
// the message's headers.
func (t Messaging) PublishMsg(ctx context.Context, js jetstream.JetStream, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	ctx, span := t.StartPublish(ctx, msg.Subject, msg.Header)
	ack, err := js.PublishMsg(ctx, msg, opts...)
	End(span, err)
	return ack, err
}

// StartProcess extracts the producer's trace context from h and starts a consumer span
// for processing a message of subject as its child. End the span once the message is settled.
func (t Messaging) StartProcess(ctx context.Context, subject string, h nats.Header) (context.Context, trace.Span) {
	ctx = t.Extract(ctx, h)
	ctx, span := t.tracer().Start(ctx, "process "+SubjectName(subject),
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attrSystem.String("nats"), attrDestination.String(subject),
			attrOpName.String("process"), attrOpType.String("process")))
	if id := h.Get(nats.MsgIdHdr); id != "" {
		span.SetAttributes(attrMessageID.String(id))
	}
	return ctx, span
}

// End records err (if any) on span and ends it.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// SubjectName is subject with a trailing agent id replaced by {agentId}
// (mate.conversation.completed.7 → mate.conversation.completed.{agentId}): span names
// must not grow with the number of agents.
func SubjectName(subject string) string {
	i := strings.LastIndexByte(subject, '.')
	if i < 0 || i == len(subject)-1 {
		return subject
	}
	for _, r := range subject[i+1:] {
		if r < '0' || r > '9' {
			return subject
		}
	}
	return subject[:i+1] + "{agentId}"
}

// PublishOption configures a publish helper that takes options (bus.RetryDeadLetter,
// emergence.Publish, emergence.NewTrigger).
type PublishOption func(*Messaging)

// With makes a publish helper start its producer span with m and inject with m's propagator.
func With(m Messaging) PublishOption { return func(dst *Messaging) { *dst = m } }

// From applies opts to a zero Messaging (which records nothing but carries ctx's context).
func From(opts []PublishOption) Messaging {
	var m Messaging
	for _, o := range opts {
		o(&m)
	}
	return m
}
