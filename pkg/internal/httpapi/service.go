package httpapi

import (
	"context"
	"embed"
	"fmt"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Paths of the document and its reference page.
const (
	OpenAPIPath     = "/api/v1/openapi.json"
	OpenAPIYAMLPath = "/api/v1/openapi.yaml"
	DocsPath        = "/api/v1/docs"
)

// MetaPublic marks an operation served without an API key (health, readiness).
const MetaPublic = "matememory.public"

//go:embed docs
var docsFS embed.FS

// Status is the health answer.
type Status struct {
	Status string `json:"status" example:"ok"`
}

// registerService adds health, readiness, metrics, the OpenAPI document and its reference
// page; all are listed in the document and need no key.
func (s *Server) registerService() {
	public := map[string]any{MetaPublic: true}
	none := []map[string][]string{}
	Register(s, huma.Operation{Method: http.MethodGet, Path: "/healthz", OperationID: "health", Tags: []string{"Service"},
		Summary: "Liveness: the process answers", Security: none, Metadata: public},
		func(context.Context, *struct{}) (*Response[Status], error) { return OK(Status{Status: "ok"}), nil })
	ready := huma.Operation{Method: http.MethodGet, Path: "/readyz", OperationID: "ready", Tags: []string{"Service"},
		Summary:     "Readiness: every check (database, NATS, …) answers within its deadline",
		Description: "data maps each check to \"ok\" or its error; informational entries (the LLM's health) never fail readiness. 503 with the same shape when a check fails.",
		Security:    none, Metadata: public,
		Responses: map[string]*huma.Response{"503": {Description: "A check failed", Content: map[string]*huma.MediaType{
			"application/json": {Schema: s.api.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[Envelope[map[string]string]](), true, "")}}}}}
	Register(s, ready, func(ctx context.Context, _ *struct{}) (*Response[map[string]string], error) {
		status, ok := s.readiness(ctx)
		if !ok {
			r := Answer(http.StatusServiceUnavailable, status)
			r.Body.Msg = "not ready"
			return r, nil
		}
		return OK(status), nil
	})

	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("GET "+OpenAPIPath, func(w http.ResponseWriter, r *http.Request) {
		b, err := s.api.OpenAPI().MarshalJSON()
		if err != nil {
			fail(w, http.StatusInternalServerError, err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/openapi+json")
		_, _ = w.Write(b)
	})
	s.mux.HandleFunc("GET "+OpenAPIYAMLPath, func(w http.ResponseWriter, r *http.Request) {
		b, err := s.api.OpenAPI().YAML()
		if err != nil {
			fail(w, http.StatusInternalServerError, err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/openapi+yaml")
		_, _ = w.Write(b)
	})
	s.mux.HandleFunc("GET "+DocsPath, func(w http.ResponseWriter, r *http.Request) {
		b, _ := docsFS.ReadFile("docs/index.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; worker-src 'self' blob:; font-src 'self' data:")
		_, _ = w.Write(b)
	})
	s.mux.HandleFunc("GET "+DocsPath+"/redoc.standalone.js", func(w http.ResponseWriter, r *http.Request) {
		b, _ := docsFS.ReadFile("docs/redoc.standalone.js")
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		w.Header().Set("Cache-Control", "public, max-age=86400")
		_, _ = w.Write(b)
	})
	text := func(path, id, summary, ct string) {
		s.api.OpenAPI().AddOperation(&huma.Operation{Method: http.MethodGet, Path: path, OperationID: id, Summary: summary,
			Tags: []string{"Service"}, Security: none,
			Responses: map[string]*huma.Response{"200": {Description: "OK", Content: map[string]*huma.MediaType{ct: {Schema: &huma.Schema{Type: "string"}}}}}})
	}
	text("/metrics", "metrics", "Prometheus metrics (matememory_*)", "text/plain")
	text(OpenAPIYAMLPath, "openapiYAML", "This document as YAML", "application/openapi+yaml")
	text(DocsPath, "docs", "A readable reference of this document (Redoc, served from this binary)", "text/html")
	s.api.OpenAPI().AddOperation(&huma.Operation{Method: http.MethodGet, Path: OpenAPIPath, OperationID: "openapi",
		Summary: "This document (OpenAPI 3.1)", Tags: []string{"Service"}, Security: none,
		Responses: map[string]*huma.Response{"200": {Description: "OK", Content: map[string]*huma.MediaType{
			"application/openapi+json": {Schema: &huma.Schema{Type: "object"}}}}}})
}

// readiness runs every check at the same time, each with its own deadline, so one that
// hangs (a stalled database) is reported as such and does not make the others fail for
// lack of time.
func (s *Server) readiness(ctx context.Context) (map[string]string, bool) {
	errs := make([]error, len(s.checks))
	var wg sync.WaitGroup
	for i, c := range s.checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- c.Fn(ctx) }()
			select {
			case err := <-done:
				errs[i] = err
			case <-ctx.Done():
				// A check that ignores its context is not waited for (beyond a moment for
				// the one that returns as its context ends).
				select {
				case errs[i] = <-done:
				case <-time.After(100 * time.Millisecond):
					errs[i] = fmt.Errorf("no answer within %s", CheckTimeout)
				}
			}
		}()
	}
	wg.Wait()
	status := map[string]string{}
	ok := true
	for i, c := range s.checks {
		if errs[i] != nil {
			status[c.Name] = errs[i].Error()
			ok = false
		} else {
			status[c.Name] = "ok"
		}
	}
	for _, i := range s.infos {
		status[i.name] = i.fn()
	}
	return status, ok
}
