// Package httpapi is MateMemory's REST framework: typed operations (huma v2 on the
// server's ServeMux) whose Go types generate the OpenAPI 3.1 document, the spec's response
// envelope, error classification, bearer-key authentication scoped to agents, metrics,
// tracing and the browser protections. Feature packages register their operations with
// Register; they never write responses by hand.
package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/panics"
)

// check is a readiness probe.
type check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Server owns the mux and cross-cutting concerns.
type Server struct {
	mux     *http.ServeMux
	auth    *Authenticator
	log     *slog.Logger
	checks  []check
	infos   []info
	reg     *prometheus.Registry
	reqs    *prometheus.CounterVec
	latency *prometheus.HistogramVec

	mu             sync.Mutex
	api            huma.API
	dispatch       map[string]*dispatch
	protocolErrors map[string]ProtocolErrors // by mux pattern (HandleRawOp)

	// traced wraps each route in a server span (WithTracing); nil = no tracing.
	traced func(pattern string, h http.Handler) http.Handler
	// cors lists the origins allowed to call from a browser (WithCORS).
	cors map[string]bool
	// guard logs and counts a handler's panic (WithGuard).
	guard *panics.Guard
	// arrays is the document's schema registry (newAPI).
	arrays *arrays
}

// WithGuard logs and counts handlers' panics with g (by default a guard on the server's
// logger and registry).
func WithGuard(g *panics.Guard) Option { return func(s *Server) { s.guard = g } }

// Option configures a Server.
type Option func(*Server)

// WithTracing makes each route a server span named by its pattern ("POST /api/v1/..."),
// a child of the caller's span when the request carries one (traceparent, read with prop).
func WithTracing(tp trace.TracerProvider, prop propagation.TextMapPropagator) Option {
	return func(s *Server) {
		opts := []otelhttp.Option{
			otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(prop),
			// Request metrics are Prometheus's (matememory_http_*); never the global meter.
			otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
			otelhttp.WithSpanNameFormatter(func(operation string, _ *http.Request) string { return operation }),
		}
		s.traced = func(pattern string, h http.Handler) http.Handler { return otelhttp.NewHandler(h, pattern, opts...) }
	}
}

// New builds a server. reg receives the HTTP metrics and is served at /metrics.
func New(auth *Authenticator, reg *prometheus.Registry, log *slog.Logger, opts ...Option) *Server {
	s := &Server{mux: http.NewServeMux(), auth: auth, log: log, reg: reg, dispatch: map[string]*dispatch{}, protocolErrors: map[string]ProtocolErrors{}}
	for _, o := range opts {
		o(s)
	}
	if s.guard == nil {
		s.guard = panics.New(log, reg)
	}
	s.api = newAPI(s)
	s.reqs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "matememory_http_requests_total", Help: "HTTP requests by route and status code.",
	}, []string{"route", "code"})
	s.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "matememory_http_request_seconds", Help: "HTTP request latency by route.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 12),
	}, []string{"route"})
	reg.MustRegister(s.reqs, s.latency)
	s.registerService()
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, fmt.Sprintf("no route for %s %s; see /api/v1/openapi.json", r.Method, r.URL.Path))
	})
	return s
}

// CheckTimeout is each readiness check's own deadline.
const CheckTimeout = 3 * time.Second

// AddCheck registers a readiness check for /readyz.
func (s *Server) AddCheck(name string, fn func(ctx context.Context) error) {
	s.checks = append(s.checks, check{Name: name, Fn: fn})
}

// AddInfo registers a detail shown in /readyz that never fails readiness (the LLM's
// health: the workers retry and the context window degrades without it).
func (s *Server) AddInfo(name string, fn func() string) {
	s.infos = append(s.infos, info{name: name, fn: fn})
}

type info struct {
	name string
	fn   func() string
}

func (s *Server) trace(pattern string, h http.Handler) http.Handler {
	if s.traced == nil {
		return h
	}
	return s.traced(pattern, h)
}

// ServeHTTP implements http.Handler. An API path with '.' or '..' segments or '//' is
// refused with 400: ServeMux would answer 301 to the cleaned path, which silently retargets
// a PUT or DELETE (…/files/memory/../../x.md) at another route.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.corsHeaders(w, r) {
		return
	}
	if err := s.browserCheck(r); err != nil {
		s.refuse(w, r, err)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/api/") && r.Method != http.MethodConnect {
		if p, c := r.URL.Path, path.Clean(r.URL.Path); p != c && p != c+"/" {
			fail(w, http.StatusBadRequest, fmt.Sprintf("path %q is not canonical: '.', '..' and empty segments are not allowed (workspace filenames may not traverse directories)", p))
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// Listen starts serving on addr; it refuses a non-loopback address when no keys are set.
func (s *Server) Listen(addr string) (net.Listener, error) {
	if !s.auth.Enabled() && !config.LoopbackOnly(addr) {
		return nil, fmt.Errorf("refusing to listen on %s without API keys: set mate.auth.keys (env MATE_AUTH_KEYS, e.g. \"secret=*\") or listen on 127.0.0.1", addr)
	}
	return net.Listen("tcp", addr)
}

type envelope struct {
	Code int    `json:"code"`
	Msg  string `json:"msg,omitempty"`
	Data any    `json:"data,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func fail(w http.ResponseWriter, status int, msg string) int {
	writeJSON(w, status, envelope{Code: status, Msg: msg})
	return status
}

func writeErr(w http.ResponseWriter, err error) int {
	st, msg, header := classify(err)
	for k, v := range header {
		w.Header()[k] = v
	}
	return fail(w, st, msg)
}
