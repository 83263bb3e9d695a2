package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/danielgtaylor/huma/v2"
	"github.com/matememory/matememory/pkg/internal/fault"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

func newServer(t *testing.T, keys string) *httpapi.Server {
	t.Helper()
	parsed, err := config.ParseKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	return httpapi.New(httpapi.NewAuthenticator(parsed), prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
}

func TestListenRefusesOpenNonLoopback(t *testing.T) {
	open := newServer(t, "")
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		ln, err := open.Listen(addr)
		if err == nil {
			ln.Close()
			t.Fatalf("listened on %s without API keys", addr)
		}
		if !strings.Contains(err.Error(), "without API keys") || !strings.Contains(err.Error(), "MATE_AUTH_KEYS") {
			t.Errorf("%s: refusal does not say why or what to do: %v", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		ln, err := open.Listen(addr)
		if err != nil {
			t.Fatalf("loopback %s refused: %v", addr, err)
		}
		ln.Close()
	}
	// With keys, any interface is fine.
	ln, err := newServer(t, "k=*").Listen("0.0.0.0:0")
	if err != nil {
		t.Fatalf("with keys: %v", err)
	}
	ln.Close()
}

type envelope struct {
	Code int             `json:"code"`
	Msg  string          `json:"msg"`
	Data json.RawMessage `json:"data"`
}

func get(t *testing.T, base, method, path, key string) (int, envelope, http.Header) {
	t.Helper()
	r, _ := http.NewRequest(method, base+path, nil)
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("%s %s: %d %q is not an envelope", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, env, resp.Header
}

type thingInput struct {
	httpapi.AgentPath
	Fail string `query:"fail"`
}

// TestEnvelopeAndErrors: the envelope, fault's kinds mapped to statuses in one place,
// authentication and scopes, panics, canonical paths.
func TestEnvelopeAndErrors(t *testing.T) {
	s := newServer(t, "k1=1;adm=admin")
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: "/api/v1/agents/{agentId}/thing", OperationID: "thing", Summary: "test", Tags: []string{"Agents"}},
		func(ctx context.Context, in *thingInput) (*httpapi.Versioned[map[string]int64], error) {
			if err := httpapi.Act(ctx, in.AgentID); err != nil {
				return nil, err
			}
			switch in.Fail {
			case "invalid":
				return nil, fmt.Errorf("wrapped: %w", &workspace.InvalidError{Msg: "bad name"})
			case "missing":
				return nil, fmt.Errorf("load: %w", workspace.ErrNotFound)
			case "conflict":
				return nil, &workspace.ConflictError{Filename: "a.md", Expected: 1, Actual: 2}
			case "precondition":
				return nil, fault.New(fault.ErrPrecondition, "a.md exists")
			case "erased":
				return nil, fmt.Errorf("x: %w", fault.New(fault.ErrErased, "agent 1 was erased"))
			case "large":
				return nil, fault.New(fault.ErrTooLarge, "too many tokens")
			case "limited":
				return nil, &fault.Limited{Msg: "try again in 3 s", RetryAfter: 2500 * time.Millisecond}
			case "unavailable":
				return nil, fault.New(fault.ErrUnavailable, "JetStream is unavailable")
			case "http":
				return nil, httpapi.Errorf(http.StatusTeapot, "teapot")
			case "internal":
				return nil, errors.New("disk on fire")
			case "panic":
				panic("boom")
			case "created":
				return httpapi.AnswerVersion(http.StatusCreated, 1, map[string]int64{"id": in.AgentID}), nil
			case "header":
				return httpapi.AnswerVersion(http.StatusAccepted, 7, map[string]int64{"ok": 1}), nil
			}
			return httpapi.AnswerVersion(http.StatusOK, 1, map[string]int64{"agentId": in.AgentID}), nil
		})
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: "/api/v1/admin-thing", OperationID: "adminThing", Summary: "test", Tags: []string{"Admin"}},
		func(ctx context.Context, _ *struct{}) (*httpapi.Response[string], error) {
			if err := httpapi.Admin(ctx); err != nil {
				return nil, err
			}
			return httpapi.OK("ok"), nil
		})
	ts := httptest.NewServer(s)
	defer ts.Close()

	cases := []struct {
		path, key string
		status    int
		msg       string
	}{
		{"/api/v1/agents/1/thing", "k1", 200, ""},
		{"/api/v1/agents/1/thing?fail=invalid", "k1", 400, "bad name"},
		{"/api/v1/agents/1/thing?fail=missing", "k1", 404, "not found"},
		{"/api/v1/agents/1/thing?fail=conflict", "k1", 409, "expected version 1, current version is 2"},
		{"/api/v1/agents/1/thing?fail=precondition", "k1", 412, "a.md exists"},
		{"/api/v1/agents/1/thing?fail=erased", "k1", 409, "agent 1 was erased"},
		{"/api/v1/agents/1/thing?fail=large", "k1", 413, "too many tokens"},
		{"/api/v1/agents/1/thing?fail=limited", "k1", 429, "try again in 3 s"},
		{"/api/v1/agents/1/thing?fail=unavailable", "k1", 503, "JetStream is unavailable"},
		{"/api/v1/agents/1/thing?fail=http", "k1", 418, "teapot"},
		{"/api/v1/agents/1/thing?fail=internal", "k1", 500, "disk on fire"},
		{"/api/v1/agents/1/thing?fail=panic", "k1", 500, "internal error"},
		{"/api/v1/agents/1/thing?fail=created", "k1", 201, ""},
		{"/api/v1/agents/2/thing", "k1", 403, "may not act for agent 2"},
		{"/api/v1/agents/2/thing", "adm", 403, "may not act for agent 2"},
		{"/api/v1/agents/0/thing", "k1", 400, "positive integer"},
		{"/api/v1/agents/1/thing", "", 401, "missing API key"},
		{"/api/v1/agents/1/thing", "nope", 401, "invalid API key"},
		{"/api/v1/admin-thing", "k1", 403, "admin"},
		{"/api/v1/admin-thing", "adm", 200, ""},
		{"/api/v1/agents/1/../2/thing", "k1", 400, "not canonical"},
		{"/api/v1/agents/1//thing", "k1", 400, "not canonical"},
		{"/api/v1/agents/./1/thing", "k1", 400, "not canonical"},
		{"/api/v1/unknown", "k1", 404, "no route"},
	}
	for _, c := range cases {
		status, env, _ := get(t, ts.URL, "GET", c.path, c.key)
		if status != c.status || env.Code != c.status {
			t.Errorf("%s (key %q): HTTP %d, code %d; want %d (%+v)", c.path, c.key, status, env.Code, c.status, env)
			continue
		}
		if c.status >= 400 && !strings.Contains(env.Msg, c.msg) {
			t.Errorf("%s: message %q lacks %q", c.path, env.Msg, c.msg)
		}
		if c.status < 400 && (env.Msg != "" || len(env.Data) == 0) {
			t.Errorf("%s: success envelope %+v", c.path, env)
		}
	}
	status, env, hdr := get(t, ts.URL, "GET", "/api/v1/agents/1/thing?fail=header", "k1")
	if status != 202 || env.Code != 202 || hdr.Get("ETag") != `"7"` {
		t.Errorf("Reply: %d %+v ETag %q", status, env, hdr.Get("ETag"))
	}
	if _, _, hdr := get(t, ts.URL, "GET", "/api/v1/agents/1/thing?fail=limited", "k1"); hdr.Get("Retry-After") != "3" {
		t.Errorf("rate limited: Retry-After %q, want 3 (seconds, rounded up)", hdr.Get("Retry-After"))
	}
	// A trailing slash is canonical enough: it reaches the mux (which has no such route).
	if status, env, _ := get(t, ts.URL, "GET", "/api/v1/agents/1/thing/", "k1"); status != 404 || !strings.Contains(env.Msg, "no route") {
		t.Errorf("trailing slash: %d %+v", status, env)
	}
	// Health endpoints need no key.
	if status, _, _ := get(t, ts.URL, "GET", "/healthz", ""); status != 200 {
		t.Errorf("/healthz: %d", status)
	}
}

func TestReadyz(t *testing.T) {
	s := newServer(t, "")
	var down atomic.Bool
	s.AddCheck("db", func(context.Context) error {
		if !down.Load() {
			return nil
		}
		return errors.New("down")
	})
	ts := httptest.NewServer(s)
	defer ts.Close()
	if status, _, _ := get(t, ts.URL, "GET", "/readyz", ""); status != 200 {
		t.Fatalf("ready: %d", status)
	}
	down.Store(true)
	status, env, _ := get(t, ts.URL, "GET", "/readyz", "")
	if status != 503 || !strings.Contains(string(env.Data), "down") {
		t.Fatalf("not ready: %d %+v", status, env)
	}
}

// Issue 9 point 18: a check that hangs (a stalled database) is reported alone; the other
// checks run with their own deadline and answer truthfully.
func TestReadyzChecksHaveTheirOwnDeadlines(t *testing.T) {
	s := newServer(t, "")
	s.AddCheck("database", func(ctx context.Context) error {
		<-ctx.Done()
		return fmt.Errorf("database: %w", ctx.Err())
	})
	s.AddCheck("nats", func(ctx context.Context) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
			return nil
		}
	})
	ts := httptest.NewServer(s)
	defer ts.Close()
	start := time.Now()
	status, env, _ := get(t, ts.URL, "GET", "/readyz", "")
	var checks map[string]string
	if err := json.Unmarshal(env.Data, &checks); err != nil {
		t.Fatal(err)
	}
	if status != 503 || checks["nats"] != "ok" || !strings.Contains(checks["database"], "deadline") {
		t.Fatalf("readyz: %d %v", status, checks)
	}
	if took := time.Since(start); took > httpapi.CheckTimeout+time.Second {
		t.Fatalf("readyz took %s", took)
	}
}

func TestIfMatch(t *testing.T) {
	for _, c := range []struct {
		header string
		want   int64
		bad    bool
	}{
		{"", workspace.AnyVersion, false},
		{"*", workspace.AnyVersion, false},
		{"0", workspace.CreateOnly, false},
		{"3", 3, false},
		{`"3"`, 3, false},
		{`W/"12"`, 12, false},
		{"-2", 0, true},
		{"abc", 0, true},
		{"1.5", 0, true},
	} {
		r := httptest.NewRequest("PUT", "/", nil)
		if c.header != "" {
			r.Header.Set("If-Match", c.header)
		}
		got, err := httpapi.ParseIfMatch(r.Header.Get("If-Match"))
		if c.bad {
			if st, _ := httpapi.Classify(err); st != 400 {
				t.Errorf("If-Match %q: %v, want a 400", c.header, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("If-Match %q: %d %v, want %d", c.header, got, err, c.want)
		}
	}
}

func TestOpenAPIListsRoutes(t *testing.T) {
	s := newServer(t, "k=*")
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: "/api/v1/agents/{agentId}/files/{path}", OperationID: "readFile", Summary: "read a file", Tags: []string{"Workspace"},
		Metadata: map[string]any{httpapi.MetaRest: "path"}},
		func(context.Context, *struct {
			httpapi.AgentPath
			Path string `path:"path"`
		}) (*httpapi.Response[string], error) {
			return httpapi.OK(""), nil
		})
	ts := httptest.NewServer(s)
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	op := doc.Paths["/api/v1/agents/{agentId}/files/{path}"]["get"]
	if doc.OpenAPI == "" || op == nil || op["summary"] != "read a file" {
		t.Fatalf("openapi document: %+v", doc)
	}
}
