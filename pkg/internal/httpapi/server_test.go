package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

type coded struct{}

func (coded) Error() string   { return "teapot" }
func (coded) HTTPStatus() int { return http.StatusTeapot }

func TestEnvelopeAndErrors(t *testing.T) {
	s := newServer(t, "k1=1;adm=admin")
	s.Handle("GET /api/v1/agents/{agentId}/thing", "test", func(r *http.Request) (any, error) {
		id, err := httpapi.AgentID(r)
		if err != nil {
			return nil, err
		}
		switch r.URL.Query().Get("fail") {
		case "invalid":
			return nil, fmt.Errorf("wrapped: %w", &workspace.InvalidError{Msg: "bad name"})
		case "missing":
			return nil, fmt.Errorf("load: %w", workspace.ErrNotFound)
		case "conflict":
			return nil, &workspace.ConflictError{Filename: "a.md", Expected: 1, Actual: 2}
		case "coded":
			return nil, fmt.Errorf("x: %w", coded{})
		case "internal":
			return nil, errors.New("disk on fire")
		case "panic":
			panic("boom")
		case "created":
			return httpapi.Created(map[string]int64{"id": id}), nil
		case "header":
			return httpapi.Reply(http.StatusAccepted, http.Header{"Etag": {`"7"`}}, "ok"), nil
		}
		return map[string]int64{"agentId": id}, nil
	})
	s.Handle("GET /api/v1/admin-thing", "test", func(r *http.Request) (any, error) {
		return "ok", httpapi.RequireAdmin(r)
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
		{"/api/v1/agents/1/thing?fail=coded", "k1", 418, "teapot"},
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
		got, err := httpapi.IfMatch(r)
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

func TestDecode(t *testing.T) {
	var v struct {
		A int `json:"a"`
	}
	for _, c := range []struct {
		body   string
		status int
		msg    string
	}{
		{`{"a":1}`, 0, ""},
		{``, 400, "empty"},
		{`{"a":1,"b":2}`, 400, "unknown field"},
		{`{"a":1} {"a":2}`, 400, "more than one"},
		{`{"a":"x"}`, 400, "invalid JSON"},
		{`{"a":` + strings.Repeat(" ", httpapi.MaxBodyBytes) + `1}`, 413, "exceeds"},
	} {
		r := httptest.NewRequest("POST", "/", strings.NewReader(c.body))
		err := httpapi.Decode(r, &v)
		if c.status == 0 {
			if err != nil || v.A != 1 {
				t.Errorf("%q: %v", c.body, err)
			}
			continue
		}
		st, msg := httpapi.Classify(err)
		if st != c.status || !strings.Contains(msg, c.msg) {
			t.Errorf("%.40q: %d %q, want %d with %q", c.body, st, msg, c.status, c.msg)
		}
	}
}

func TestOpenAPIListsRoutes(t *testing.T) {
	s := newServer(t, "k=*")
	s.Handle("GET /api/v1/agents/{agentId}/files/{path...}", "read a file", func(*http.Request) (any, error) { return nil, nil })
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
