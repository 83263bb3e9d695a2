package llm

import (
	"context"
	"errors"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the LLM client spans.
const TracerName = "github.com/matememory/matememory/pkg/internal/llm"

// OpenTelemetry GenAI semantic-convention attribute keys (the Go semconv package does not
// generate the GenAI group yet, so they are spelled out).
const (
	attrOperation     = attribute.Key("gen_ai.operation.name")
	attrProvider      = attribute.Key("gen_ai.provider.name")
	attrRequestModel  = attribute.Key("gen_ai.request.model")
	attrMaxTokens     = attribute.Key("gen_ai.request.max_tokens")
	attrTemperature   = attribute.Key("gen_ai.request.temperature")
	attrOutputType    = attribute.Key("gen_ai.output.type")
	attrResponseModel = attribute.Key("gen_ai.response.model")
	attrFinish        = attribute.Key("gen_ai.response.finish_reasons")
	attrTokensIn      = attribute.Key("gen_ai.usage.input_tokens")
	attrTokensOut     = attribute.Key("gen_ai.usage.output_tokens")
	attrErrorType     = attribute.Key("error.type")
	// Not in the conventions: the call's wall time as the client measured it, and how the
	// pipeline classified a failure (retried later or dead-lettered).
	attrLatency   = attribute.Key("matememory.llm.latency_ms")
	attrTransient = attribute.Key("matememory.llm.transient")
	attrMessages  = attribute.Key("matememory.llm.messages")
)

// Traced wraps c so that each Complete is a client span ("chat <model>") carrying the
// model, token counts and latency, a child of the span in the caller's context. Callers do
// not change. A nil c stays nil (no model configured: the callers' offline path).
func Traced(c Client, tp trace.TracerProvider) Client {
	if c == nil || tp == nil {
		return c
	}
	return &traced{c: c, tracer: tp.Tracer(TracerName)}
}

type traced struct {
	c      Client
	tracer trace.Tracer
}

func (t *traced) Model() string { return t.c.Model() }

func (t *traced) Complete(ctx context.Context, req Request) (Response, error) {
	model := t.c.Model()
	attrs := []attribute.KeyValue{
		attrOperation.String("chat"), attrProvider.String("openai"), attrRequestModel.String(model),
		attrMessages.Int(len(req.Messages)),
	}
	if req.MaxTokens > 0 {
		attrs = append(attrs, attrMaxTokens.Int(req.MaxTokens))
	}
	if req.Temperature != nil {
		attrs = append(attrs, attrTemperature.Float64(*req.Temperature))
	}
	if req.JSON {
		attrs = append(attrs, attrOutputType.String("json"))
	}
	ctx, span := t.tracer.Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	defer span.End()
	resp, err := t.c.Complete(ctx, req)
	span.SetAttributes(attrLatency.Int64(resp.Latency.Milliseconds()))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(attrErrorType.String(errorType(err)), attrTransient.Bool(Transient(err)))
		return resp, err
	}
	finish := "stop"
	if resp.Truncated {
		finish = "length"
	}
	span.SetAttributes(attrResponseModel.String(resp.Model), attrTokensIn.Int(resp.TokensIn),
		attrTokensOut.Int(resp.TokensOut), attrFinish.StringSlice([]string{finish}))
	return resp, nil
}

// errorType names a failure's class for error.type: the HTTP status when the endpoint
// answered, else the kind of failure.
func errorType(err error) string {
	if code := StatusCode(err); code != 0 {
		return strconv.Itoa(code)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	var le *Error
	if errors.As(err, &le) {
		return "invalid_response"
	}
	return "_OTHER"
}
