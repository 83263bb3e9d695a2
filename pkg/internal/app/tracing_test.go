package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
)

const (
	testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	testParent  = "00f067aa0ba902b7"
)

// tracedApp starts the all-in-one process on SQLite and the embedded NATS server, with
// the fake LLM and, when exp is not nil, spans going to exp instead of OTLP.
func tracedApp(t *testing.T, exp sdktrace.SpanExporter) *App {
	t.Helper()
	fake := llmtest.New(t, pipelineLLM)
	cfg := config.Default()
	cfg.Mate.DataDir = t.TempDir()
	cfg.Mate.HTTP.Addr = "127.0.0.1:0"
	cfg.Mate.LLM.BaseURL, cfg.Mate.LLM.APIKey, cfg.Mate.LLM.Model = fake.URL+"/v1/", "test-key", "fake-model"
	ctx := context.Background()
	a, err := New(ctx, Options{Config: cfg, Log: slog.New(slog.DiscardHandler), TraceExporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return a
}

// postTraced stores a conversation worth extracting and publishes its completion event
// with a traceparent header; it returns the event's stream sequence.
func postTraced(t *testing.T, base, conv string) uint64 {
	t.Helper()
	msgs := `{"agentId":1,"messages":[
		{"role":"user","content":"conv-tag-1: what should we cook tonight?"},
		{"role":"assistant","content":"How about noodles?"},
		{"role":"user","content":"good, with vegetables please."},
		{"role":"assistant","content":"Noodles with vegetables it is."}]}`
	if st, msg, _ := postBody(t, base+"/api/v1/conversations/"+conv+"/messages", msgs); st != 200 && st != 201 {
		t.Fatalf("store messages: %d %s", st, msg)
	}
	ev := `{"eventId":"evt-` + conv + `","agentId":1,"conversationId":"` + conv + `","userMessage":"good, with vegetables please.","assistantReply":"Noodles with vegetables it is.","messageCount":4,"triggerSource":"web"}`
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/events/conversation-completed", bytes.NewReader([]byte(ev)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+testTraceID+"-"+testParent+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env struct {
		Data struct {
			Seq uint64 `json:"seq"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(raw, &env) != nil || env.Data.Seq == 0 {
		t.Fatalf("publish: %d %s", resp.StatusCode, raw)
	}
	return env.Data.Seq
}

// An event POSTed with a traceparent yields one trace: the HTTP request (child of the
// caller's span), the publish (child of the request), the summarizer's processing (child of
// the publish, across the NATS headers) and the LLM call inside it.
func TestTraceFromRequestThroughNATSToLLM(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	a := tracedApp(t, exp)
	postTraced(t, "http://"+a.Addr, "traced-1")

	const (
		httpName    = "POST /api/v1/events/conversation-completed"
		publishName = "publish mate.conversation.completed.{agentId}"
		processName = "process mate.conversation.completed.{agentId}"
		chatName    = "chat fake-model"
	)
	tp := a.TracerProvider.(*sdktrace.TracerProvider)
	var spans map[string]tracetest.SpanStub // by span id
	find := func(name string) *tracetest.SpanStub {
		for _, s := range spans {
			if s.Name == name {
				return &s
			}
		}
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := tp.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
		spans = map[string]tracetest.SpanStub{}
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID().String() == testTraceID {
				spans[s.SpanContext.SpanID().String()] = s
			}
		}
		if find(httpName) != nil && find(publishName) != nil && find(processName) != nil && find(chatName) != nil {
			break
		}
		if time.Now().After(deadline) {
			var names []string
			for _, s := range exp.GetSpans() {
				names = append(names, s.Name+" trace "+s.SpanContext.TraceID().String())
			}
			t.Fatalf("spans of trace %s incomplete after 30s; all spans:\n  %s", testTraceID, strings.Join(names, "\n  "))
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a wait for an outcome
	}

	httpSpan, pub, proc, chat := find(httpName), find(publishName), find(processName), find(chatName)
	parentOf := func(s *tracetest.SpanStub) string { return s.Parent.SpanID().String() }
	if parentOf(httpSpan) != testParent || httpSpan.SpanKind != trace.SpanKindServer {
		t.Errorf("HTTP span: parent %s kind %v, want the caller's span %s and server", parentOf(httpSpan), httpSpan.SpanKind, testParent)
	}
	if parentOf(pub) != httpSpan.SpanContext.SpanID().String() || pub.SpanKind != trace.SpanKindProducer {
		t.Errorf("publish span: parent %s kind %v, want the HTTP span and producer", parentOf(pub), pub.SpanKind)
	}
	if parentOf(proc) != pub.SpanContext.SpanID().String() || proc.SpanKind != trace.SpanKindConsumer || !proc.Parent.IsRemote() {
		t.Errorf("process span: parent %s (remote %v) kind %v, want the publish span, remote, consumer", parentOf(proc), proc.Parent.IsRemote(), proc.SpanKind)
	}
	// The LLM call descends from the processing span.
	ancestor := chat
	for ancestor != nil && ancestor.SpanContext.SpanID() != proc.SpanContext.SpanID() {
		p, ok := spans[parentOf(ancestor)]
		if !ok {
			ancestor = nil
			break
		}
		ancestor = &p
	}
	if ancestor == nil {
		t.Errorf("LLM span (parent %s) does not descend from the processing span %s", parentOf(chat), proc.SpanContext.SpanID())
	}
	attrs := func(s *tracetest.SpanStub) map[attribute.Key]attribute.Value {
		m := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes {
			m[kv.Key] = kv.Value
		}
		return m
	}
	ca := attrs(chat)
	if chat.SpanKind != trace.SpanKindClient || ca["gen_ai.request.model"].AsString() != "fake-model" ||
		ca["gen_ai.operation.name"].AsString() != "chat" || ca["gen_ai.usage.input_tokens"].AsInt64() != 100 ||
		ca["gen_ai.usage.output_tokens"].AsInt64() != 50 || ca["matememory.llm.latency_ms"].Type() != attribute.INT64 {
		t.Errorf("LLM span kind %v attributes %v", chat.SpanKind, chat.Attributes)
	}
	pa := attrs(proc)
	if pa["messaging.system"].AsString() != "nats" || pa["messaging.destination.name"].AsString() != "mate.conversation.completed.1" ||
		pa["matememory.run.status"].AsString() == "" {
		t.Errorf("process span attributes %v", proc.Attributes)
	}
	if v, _ := httpSpan.Resource.Set().Value("service.name"); v.AsString() != "matememory-all" {
		t.Errorf("resource %v: service.name %q, want matememory-all", httpSpan.Resource.Attributes(), v.AsString())
	}
}

// Without an exporter nothing is recorded, yet the caller's trace context still reaches
// the stored message's headers, for a process down the line that does export.
func TestTraceContextCarriedWithoutExporter(t *testing.T) {
	a := tracedApp(t, nil)
	if _, ok := a.TracerProvider.(*sdktrace.TracerProvider); ok {
		t.Fatal("no endpoint configured, yet a recording tracer provider was built")
	}
	seq := postTraced(t, "http://"+a.Addr, "untraced-1")
	s, err := a.JS.Stream(context.Background(), bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(context.Background(), seq)
	if err != nil {
		t.Fatal(err)
	}
	tp := nats.Header(m.Header).Get("traceparent")
	if !strings.Contains(tp, testTraceID) {
		t.Fatalf("stored event's traceparent %q does not carry trace %s (headers %v)", tp, testTraceID, m.Header)
	}
}
