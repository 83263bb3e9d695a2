package httpapi_test

import (
	"context"
	"github.com/danielgtaylor/huma/v2"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/httpapi"
)

// browserPost is a route's input with an optional JSON body.
type browserPost struct {
	httpapi.AgentPath
	Body *struct {
		A int `json:"a,omitempty"`
	} `required:"false"`
}

// Issue 9.3: in no-key (loopback) mode a web page the developer visits can neither write
// (a text/plain or form "simple" POST from another origin) nor read (DNS rebinding: Host
// evil.example). Configured CORS origins are allowed and answered with CORS headers.
func TestBrowserProtections(t *testing.T) {
	var calls int
	mk := func(keys string, opts ...httpapi.Option) http.Handler {
		parsed, _ := config.ParseKeys(keys)
		s := httpapi.New(httpapi.NewAuthenticator(parsed), prometheus.NewRegistry(), slog.New(slog.DiscardHandler), opts...)
		httpapi.Register(s, huma.Operation{Method: http.MethodPost, Path: "/api/v1/agents/{agentId}/tools/x", OperationID: "x", Summary: "test", Tags: []string{"Tools"}},
			func(context.Context, *browserPost) (*httpapi.Response[string], error) {
				calls++
				return httpapi.OK("ok"), nil
			})
		httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: "/api/v1/agents/{agentId}/x", OperationID: "readX", Summary: "test", Tags: []string{"Tools"}},
			func(context.Context, *httpapi.AgentPath) (*httpapi.Response[string], error) {
				return httpapi.OK("secret"), nil
			})
		return s
	}
	type tc struct {
		name, method, host, origin, ctype, body string
		keys                                    string
		want                                    int
	}
	const key = "k-0123456789abcdef"
	cases := []tc{
		{"text/plain cross-origin post", "POST", "127.0.0.1:8080", "http://evil.example", "text/plain", `{"a":1}`, "", 403},
		{"form post from the same origin", "POST", "127.0.0.1:8080", "", "application/x-www-form-urlencoded", `a=1`, "", 415},
		{"no content type", "POST", "127.0.0.1:8080", "", "", `{"a":1}`, "", 415},
		{"json cross-origin", "POST", "127.0.0.1:8080", "http://evil.example", "application/json", `{"a":1}`, "", 403},
		{"dns rebinding read", "GET", "evil.example:8080", "", "", "", "", 403},
		{"dns rebinding, same-origin header", "GET", "evil.example:8080", "http://evil.example:8080", "", "", "", 403},
		{"loopback json", "POST", "127.0.0.1:8080", "", "application/json; charset=utf-8", `{"a":1}`, "", 200},
		{"localhost read", "GET", "localhost:8080", "", "", "", "", 200},
		{"ipv6 loopback", "GET", "[::1]:8080", "", "", "", "", 200},
		{"same origin page", "POST", "127.0.0.1:8080", "http://127.0.0.1:8080", "application/json", `{"a":1}`, "", 200},
		{"configured cors origin", "POST", "127.0.0.1:8080", "https://app.example.com", "application/json", `{"a":1}`, "", 200},
		{"empty body needs no content type", "POST", "127.0.0.1:8080", "", "", "", "", 200},
		// With keys: any Host, but bodies are still JSON only.
		{"keys: any host", "GET", "api.example.com", "", "", "", key + "=*", 200},
		{"keys: text/plain", "POST", "api.example.com", "", "text/plain", `{"a":1}`, key + "=*", 415},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := mk(c.keys, httpapi.WithCORS([]string{"https://app.example.com"}))
			path := "/api/v1/agents/1/x"
			if c.method == "POST" {
				path = "/api/v1/agents/1/tools/x"
			}
			r := httptest.NewRequest(c.method, path, strings.NewReader(c.body))
			if c.body == "" {
				r = httptest.NewRequest(c.method, path, nil)
			}
			r.Host = c.host
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			if c.ctype != "" {
				r.Header.Set("Content-Type", c.ctype)
			}
			if c.keys != "" {
				r.Header.Set("Authorization", "Bearer "+key)
			}
			before := calls
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != c.want {
				t.Fatalf("status %d, want %d: %s", w.Code, c.want, w.Body)
			}
			if c.want >= 400 {
				if calls != before {
					t.Fatal("the handler ran for a refused request")
				}
				if !strings.Contains(w.Body.String(), `"msg"`) {
					t.Fatalf("no message: %s", w.Body)
				}
			}
			if c.origin == "https://app.example.com" && w.Header().Get("Access-Control-Allow-Origin") != c.origin {
				t.Fatalf("no CORS header for a configured origin: %v", w.Header())
			}
			if c.origin == "http://evil.example" && w.Header().Get("Access-Control-Allow-Origin") != "" {
				t.Fatal("CORS header for an unknown origin")
			}
		})
	}
	// A preflight from a configured origin is answered; from another, not.
	h := mk("", httpapi.WithCORS([]string{"https://app.example.com"}))
	r := httptest.NewRequest("OPTIONS", "/api/v1/agents/1/tools/x", nil)
	r.Host = "127.0.0.1:8080"
	r.Header.Set("Origin", "https://app.example.com")
	r.Header.Set("Access-Control-Request-Method", "POST")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 204 {
		t.Fatalf("preflight: %d %v", w.Code, w.Header())
	}
	// Every request header a client sends may be sent from a browser (the TypeScript client
	// sends X-Tool-Call-Id with a tool call, If-Match with a versioned write).
	allowed := strings.Split(w.Header().Get("Access-Control-Allow-Headers"), ", ")
	for _, h := range []string{"Authorization", "Content-Type", "If-Match", "X-Request-Id", "X-Tool-Call-Id"} {
		if !slices.Contains(allowed, h) {
			t.Errorf("preflight does not allow %s: %v", h, allowed)
		}
	}
}
