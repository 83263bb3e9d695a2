package eventpub_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/matememory/matememory/pkg/internal/bus/bustest"
	"github.com/matememory/matememory/pkg/internal/tracing"
)

// pkg/internal/tracing's trace propagation over a real JetStream.

func recorder() (*tracetest.SpanRecorder, tracing.Messaging) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	return rec, tracing.Messaging{Provider: tp, Propagator: propagation.TraceContext{}}
}

// A message published on JetStream and consumed from it carries the producer span's
// context: the consumer span is its remote child, in the same trace.
func TestPublishThenProcessOverJetStream(t *testing.T) {
	_, d := bustest.Server(t)
	nc, err := d.Connect("tracing-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
	if err != nil {
		t.Fatal(err)
	}
	rec, m := recorder()
	root, span := m.Provider.Tracer("test").Start(ctx, "request")
	if _, err := m.PublishMsg(root, js, &nats.Msg{Subject: "t.orders.42", Data: []byte("x")}, jetstream.WithMsgID("id-1")); err != nil {
		t.Fatal(err)
	}
	span.End()
	raw, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Header.Get("traceparent") == "" {
		t.Fatalf("no traceparent in the stored headers: %v", raw.Header)
	}
	_, proc := m.StartProcess(ctx, raw.Subject, raw.Header)
	proc.End()

	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byName[s.Name()] = s
	}
	pub, cons := byName["publish t.orders.{agentId}"], byName["process t.orders.{agentId}"]
	if pub == nil || cons == nil {
		t.Fatalf("spans: %v", byName)
	}
	if pub.Parent().SpanID() != span.SpanContext().SpanID() || pub.SpanKind() != trace.SpanKindProducer {
		t.Errorf("publish span parent %s kind %v", pub.Parent().SpanID(), pub.SpanKind())
	}
	if cons.SpanContext().TraceID() != span.SpanContext().TraceID() || cons.Parent().SpanID() != pub.SpanContext().SpanID() ||
		!cons.Parent().IsRemote() || cons.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("process span: trace %s parent %s remote %v kind %v", cons.SpanContext().TraceID(), cons.Parent().SpanID(),
			cons.Parent().IsRemote(), cons.SpanKind())
	}
}

// A failed publish marks its span as an error.
func TestPublishErrorRecorded(t *testing.T) {
	_, d := bustest.Server(t)
	nc, err := d.Connect("tracing-test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	rec, m := recorder()
	if _, err := m.PublishMsg(context.Background(), js, &nats.Msg{Subject: "nowhere.1"}); err == nil {
		t.Fatal("publish without a stream succeeded")
	}
	if sp := rec.Ended(); len(sp) != 1 || sp[0].Status().Code != codes.Error {
		t.Fatalf("want one span with an error status, got %v", sp)
	}
}
