// Package httpapi is MateMemory's REST framework: typed operations (huma v2 on the
// server's ServeMux) whose Go types generate the OpenAPI 3.1 document, the spec's response
// envelope, error classification, bearer-key authentication scoped to agents, metrics,
// tracing and the browser protections. Feature packages register their operations with
// Register; they never write responses by hand.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path"
	"slices"
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

// Handler serves one route: it returns the data for {"code":200,"data":...} or an error
// that Classify turns into a status and message. Return Accepted(...) or Created(...) for
// other 2xx codes.
type Handler func(r *http.Request) (any, error)

// Check is a readiness probe.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Server owns the mux and cross-cutting concerns.
type Server struct {
	mux     *http.ServeMux
	auth    *Authenticator
	log     *slog.Logger
	checks  []Check
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
	installErrorModel()
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
	s.checks = append(s.checks, Check{Name: name, Fn: fn})
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

// Handle registers pattern ("METHOD /path/{param}") as an untyped route, documented with
// its summary only. Routes of the API are typed operations (Register); Handle stays for
// tests and for routes whose shape no schema describes.
func (s *Server) Handle(pattern, summary string, h Handler) {
	s.document(pattern, summary)
	s.mux.Handle(pattern, s.trace(pattern, s.wrap(pattern, h)))
}

func (s *Server) trace(pattern string, h http.Handler) http.Handler {
	if s.traced == nil {
		return h
	}
	return s.traced(pattern, h)
}

// HandleRaw registers a plain http.Handler (streams, MCP) behind authentication, documented
// with its summary only.
func (s *Server) HandleRaw(pattern, summary string, h http.Handler) {
	s.document(pattern, summary)
	s.mux.Handle(pattern, s.trace(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.auth.Authenticate(r)
		if err != nil {
			writeErr(w, err)
			return
		}
		h.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), p)))
	})))
}

// document lists an untyped route in the OpenAPI document.
func (s *Server) document(pattern, summary string) {
	method, p, ok := strings.Cut(pattern, " ")
	if !ok || method == "" || strings.ToUpper(method) != method || !strings.HasPrefix(p, "/") {
		return // a pattern for every method ("/console/") is not an operation
	}
	p = strings.ReplaceAll(p, "...}", "}")
	op := &huma.Operation{Method: method, Path: p, Summary: summary, Tags: []string{"Other"},
		OperationID: untypedID(method, p),
		Responses:   map[string]*huma.Response{"default": {Description: `{"code":200,"data":...} or {"code":4xx/5xx,"msg":"..."}`}}}
	for _, seg := range strings.Split(p, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			op.Parameters = append(op.Parameters, &huma.Param{Name: strings.Trim(seg, "{}"), In: "path", Required: true, Schema: &huma.Schema{Type: "string"}})
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	oa := s.api.OpenAPI()
	if !slices.ContainsFunc(oa.Tags, func(t *huma.Tag) bool { return t.Name == "Other" }) {
		oa.Tags = append(oa.Tags, &huma.Tag{Name: "Other", Description: "Routes registered without a typed contract: summary only."})
	}
	oa.AddOperation(op)
}

func (s *Server) wrap(pattern string, h Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		code := s.serve(w, r, h)
		s.reqs.WithLabelValues(pattern, fmt.Sprint(code)).Inc()
		s.latency.WithLabelValues(pattern).Observe(time.Since(start).Seconds())
	})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, h Handler) (code int) {
	defer func() {
		if rec := recover(); rec != nil {
			s.guard.Report("http", rec, "method", r.Method, "path", r.URL.Path)
			code = fail(w, http.StatusInternalServerError, "internal error")
		}
	}()
	p, err := s.auth.Authenticate(r)
	if err != nil {
		return writeErr(w, err)
	}
	r = r.WithContext(withPrincipal(r.Context(), p))
	data, err := h(r)
	if err != nil {
		st, _ := Classify(err)
		if st >= 500 {
			s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		return writeErr(w, err)
	}
	status := http.StatusOK
	if sd, ok := data.(statusData); ok {
		status, data = sd.status, sd.data
		for k, v := range sd.header {
			w.Header()[k] = v
		}
	}
	writeJSON(w, status, envelope{Code: status, Data: data})
	return status
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

type statusData struct {
	status int
	header http.Header
	data   any
}

// Accepted answers 202 with data.
func Accepted(data any) any { return statusData{status: http.StatusAccepted, data: data} }

// Created answers 201 with data.
func Created(data any) any { return statusData{status: http.StatusCreated, data: data} }

// Reply answers status with data and extra response headers (an ETag, say).
func Reply(status int, header http.Header, data any) any {
	return statusData{status: status, header: header, data: data}
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
	st, msg := Classify(err)
	var he *Error
	if errors.As(err, &he) && he.Header != nil {
		for k, v := range he.Header {
			w.Header()[k] = v
		}
	}
	return fail(w, st, msg)
}

// untypedID names an untyped route's operation after its method and path ("post-api-v1-x").
func untypedID(method, p string) string {
	id := strings.ToLower(method)
	for _, seg := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '{' || r == '}' || r == '-' || r == '.' }) {
		id += "-" + strings.ToLower(seg)
	}
	return id
}
