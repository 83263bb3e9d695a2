package app

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/tracing"
)

// setupTracing builds the process's tracer provider and propagator (never the otel
// globals). With neither an OTLP endpoint nor a test exporter, the provider is the no-op
// one: nothing is recorded, yet the W3C propagator still carries a traceparent received over
// HTTP through the NATS headers (a no-op span keeps its parent's context), so a process
// further down that does export joins the caller's trace.
func (a *App) setupTracing(ctx context.Context) error {
	a.Propagator = propagation.TraceContext{}
	tc := a.Cfg.Mate.Tracing
	exp := a.Opts.TraceExporter
	if exp == nil && tc.OTLPEndpoint != "" {
		u, err := url.Parse(tc.OTLPEndpoint)
		if err != nil {
			return fmt.Errorf("mate.tracing.otlp-endpoint %q: %w", tc.OTLPEndpoint, err)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces" // a collector's base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is
		}
		if exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String())); err != nil {
			return fmt.Errorf("OTLP trace exporter for %s: %w", u, err)
		}
	}
	if exp == nil {
		a.TracerProvider = noop.NewTracerProvider()
		return nil
	}
	name := tc.ServiceName
	if name == "" {
		name = "matememory-" + strings.Join(a.Opts.Targets, "+")
	}
	host, _ := os.Hostname()
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(tc.SampleRatio))),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(name), semconv.HostName(host),
			semconv.ProcessPID(os.Getpid()))),
	)
	a.TracerProvider = tp
	// Registered first, so it runs last: the workers' final spans are flushed too.
	a.onClose(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			a.Log.Warn("flush trace spans", "err", err)
		}
	})
	return nil
}

// messaging is what every NATS producer and consumer of the process traces with.
func (a *App) messaging() tracing.Messaging {
	return tracing.Messaging{Provider: a.TracerProvider, Propagator: a.Propagator}
}

// llmClient is the configured model client, each call a span; nil when no model is
// configured (the offline provider).
func (a *App) llmClient(cfg llm.Config) llm.Client {
	if !a.Cfg.LLMConfigured() {
		return nil
	}
	return a.llmHealth.Wrap(llm.Traced(llm.NewOpenAI(cfg), a.TracerProvider))
}
