package llm_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
)

func TestTracedClientSpans(t *testing.T) {
	fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
		if len(r.Messages) > 1 {
			return llmtest.Reply{Status: 400}
		}
		return llmtest.Reply{Content: "ok", TokensIn: 12, TokensOut: 3, FinishReason: "length"}
	})
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	c := llm.Traced(llm.NewOpenAI(fake.Config()), tp)
	if c.Model() != "fake-model" {
		t.Fatalf("Model() = %q", c.Model())
	}
	ctx, parent := tp.Tracer("test").Start(context.Background(), "extract")
	resp, err := c.Complete(ctx, llm.Request{Messages: []llm.Message{{Role: "user", Content: "hi"}}, MaxTokens: 100, JSON: true})
	if err != nil || resp.Content != "ok" {
		t.Fatalf("Complete: %+v %v", resp, err)
	}
	_, err = c.Complete(ctx, llm.Request{Messages: []llm.Message{{Role: "system", Content: "a"}, {Role: "user", Content: "b"}}})
	if err == nil || llm.StatusCode(err) != 400 {
		t.Fatalf("want the 400 through the decorator, got %v", err)
	}
	parent.End()

	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 2 calls and the parent", len(spans))
	}
	attrs := func(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
		m := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			m[kv.Key] = kv.Value
		}
		return m
	}
	ok, failed := spans[0], spans[1]
	for _, s := range []sdktrace.ReadOnlySpan{ok, failed} {
		if s.Name() != "chat fake-model" || s.SpanKind() != trace.SpanKindClient || s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("span %q kind %v parent %s", s.Name(), s.SpanKind(), s.Parent().SpanID())
		}
	}
	a := attrs(ok)
	if a["gen_ai.usage.input_tokens"].AsInt64() != 12 || a["gen_ai.usage.output_tokens"].AsInt64() != 3 ||
		a["gen_ai.request.max_tokens"].AsInt64() != 100 || a["gen_ai.request.model"].AsString() != "fake-model" ||
		a["gen_ai.output.type"].AsString() != "json" || a["gen_ai.response.finish_reasons"].AsStringSlice()[0] != "length" ||
		a["matememory.llm.latency_ms"].Type() != attribute.INT64 || ok.Status().Code == codes.Error {
		t.Errorf("successful call: status %v attributes %v", ok.Status(), ok.Attributes())
	}
	f := attrs(failed)
	if failed.Status().Code != codes.Error || f["error.type"].AsString() != "400" || f["matememory.llm.transient"].AsBool() {
		t.Errorf("failed call: status %v attributes %v", failed.Status(), failed.Attributes())
	}
}

func TestTracedKeepsNil(t *testing.T) {
	if c := llm.Traced(nil, sdktrace.NewTracerProvider()); c != nil {
		t.Fatalf("Traced(nil) = %#v; callers test for nil to use the offline provider", c)
	}
}
