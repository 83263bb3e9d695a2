package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/httpapi"
)

type probeInput struct {
	httpapi.AgentPath
	Name  string `path:"name" minLength:"1" maxLength:"8"`
	Limit int    `query:"limit" minimum:"1" maximum:"100"`
	After int64  `query:"after" minimum:"0"`
	Lang  string `query:"lang" enum:"zh,en"`
	Force bool   `query:"force"`
	Need  int64  `query:"need" required:"true" minimum:"1"`
	Body  struct {
		Text  *string `json:"text"`
		Count int     `json:"count,omitempty" minimum:"1" maximum:"50"`
		Lang  string  `json:"lang,omitempty" enum:"zh,en"`
		Opts  *struct {
			Deep bool `json:"deep"`
		} `json:"opts,omitempty"`
	}
}

type probeOutput struct {
	Name string `json:"name"`
}

// TestTypedOperationMessages: huma's parameter and body errors reach the client as the
// envelope, status 400 (never 422), with a message naming the parameter, its rule and the
// value; the handler's own errors keep Classify's statuses.
func TestTypedOperationMessages(t *testing.T) {
	keys, _ := config.ParseKeys("k1=1")
	reg := prometheus.NewRegistry()
	s := httpapi.New(httpapi.NewAuthenticator(keys), reg, slog.New(slog.DiscardHandler))
	httpapi.Register(s, huma.Operation{Method: http.MethodPost, Path: "/api/v1/agents/{agentId}/probe/{name}", OperationID: "probe",
		Summary: "probe", Tags: []string{"Agents"}, Errors: []int{403}},
		func(ctx context.Context, in *probeInput) (*httpapi.Response[probeOutput], error) {
			if err := httpapi.Act(ctx, in.AgentID); err != nil {
				return nil, err
			}
			if in.Body.Text == nil {
				return nil, httpapi.BadRequest("text may not be null")
			}
			return httpapi.OK(probeOutput{Name: in.Name}), nil
		})
	ts := httptest.NewServer(s)
	defer ts.Close()
	const ok = "/api/v1/agents/1/probe/ab?need=1"
	for _, c := range []struct {
		path, body string
		status     int
		msg        string
	}{
		{ok, `{"text":"x"}`, 200, ""},
		{"/api/v1/agents/0/probe/ab?need=1", `{"text":"x"}`, 400, `agentId must be a positive integer, got "0"`},
		{"/api/v1/agents/x/probe/ab?need=1", `{"text":"x"}`, 400, `agentId must be a positive integer, got "x"`},
		{"/api/v1/agents/2/probe/ab?need=1", `{"text":"x"}`, 403, "may not act for agent 2"},
		{"/api/v1/agents/1/probe/abcdefghij?need=1", `{"text":"x"}`, 400, "name must be 1 to 8 characters long, got 10"},
		{ok + "&limit=0", `{"text":"x"}`, 400, `limit must be 1 to 100, got "0"`},
		{ok + "&limit=x", `{"text":"x"}`, 400, `limit must be 1 to 100, got "x"`},
		{ok + "&after=-1", `{"text":"x"}`, 400, `after must be a whole number of at least 0, got "-1"`},
		{ok + "&lang=fr", `{"text":"x"}`, 400, `lang "fr" is not supported; accepted: zh, en`},
		{ok + "&force=maybe", `{"text":"x"}`, 400, `force must be true or false, got "maybe"`},
		{"/api/v1/agents/1/probe/ab", `{"text":"x"}`, 400, "query parameter need is required"},
		{ok, ``, 400, "request body is empty"},
		// The body is validated against the schema the document shows, each broken rule named.
		{ok, `{"text":"x","other":1}`, 400, `unknown field "other"; accepted: count, lang, opts, text$`},
		// A nested object's field: its own object's names are the accepted ones.
		{ok, `{"text":"x","opts":{"deep":true,"deeper":true}}`, 400, `unknown field "opts.deeper"; accepted: deep$`},
		{ok, `{"text":"x","opts":{}}`, 400, `opts.deep is required$`},
		{ok, `{"text":1}`, 400, "text must be a string or null, got 1$"},
		{ok, `{"text":"x","n":0}`, 400, `unknown field "n"`},
		{ok, `{"text":"x","count":0}`, 400, `count must be 1 to 50, got 0$`},
		{ok, `{"text":"x","count":51}`, 400, `count must be 1 to 50, got 51$`},
		{ok, `{"text":"x","lang":"fr"}`, 400, `lang "fr" is not supported; accepted: zh, en$`},
		{ok, `{"text":"x"} {}`, 400, "invalid JSON body: more than one JSON value"},
		{ok, `{"text":"` + strings.Repeat("x", httpapi.MaxBodyBytes) + `"}`, 413, "request body exceeds 8388608 bytes"},
		{ok, `{}`, 400, "text is required$"},
		// null passes the schema (a nullable field); the handler's own rule refuses it.
		{ok, `{"text":null}`, 400, "text may not be null$"},
	} {
		req, _ := http.NewRequest("POST", ts.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer k1")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || !strings.Contains(string(raw), `"code":`+strconv.Itoa(c.status)) {
			t.Errorf("%s %.40q: %d %s, want %d", c.path, c.body, resp.StatusCode, raw, c.status)
			continue
		}
		// A message ending in $ must end the envelope's msg.
		want := strings.ReplaceAll(strings.TrimSuffix(c.msg, "$"), `"`, `\"`)
		if strings.HasSuffix(c.msg, "$") {
			want += `"}`
		}
		if c.msg != "" && !strings.Contains(string(raw), want) {
			t.Errorf("%s %.40q: %s, want a message with %q", c.path, c.body, raw, c.msg)
		}
	}
	// Metrics are labelled by the route pattern.
	if n := counter(t, reg, "POST /api/v1/agents/{agentId}/probe/{name}", "200"); n != 1 {
		t.Errorf("matememory_http_requests_total for the probe's 200: %v", n)
	}
}

// counter reads matememory_http_requests_total for route and code.
func counter(t *testing.T, reg *prometheus.Registry, route, code string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "matememory_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["route"] == route && labels["code"] == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no matememory_http_requests_total{route=%q,code=%q}", route, code)
	return 0
}

type fileInput struct {
	httpapi.AgentPath
	Filename string `path:"filename"`
}

// TestSuffixOperations: an operation on …/{filename}/history is its own operation, served
// from the rest route; a method with only a suffix operation answers 405 on the file.
func TestSuffixOperations(t *testing.T) {
	s := newServer(t, "")
	read := func(what string) func(context.Context, *fileInput) (*httpapi.Response[probeOutput], error) {
		return func(_ context.Context, in *fileInput) (*httpapi.Response[probeOutput], error) {
			return httpapi.OK(probeOutput{Name: what + ":" + in.Filename}), nil
		}
	}
	const files = "/api/v1/agents/{agentId}/files/{filename}"
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: files, OperationID: "get", Summary: "get", Tags: []string{"Workspace"},
		Metadata: map[string]any{httpapi.MetaRest: "filename"}}, read("file"))
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: files + "/history", OperationID: "history", Summary: "history", Tags: []string{"Workspace"},
		Metadata: map[string]any{httpapi.MetaRest: "filename", httpapi.MetaSuffix: "history"}}, read("history"))
	httpapi.Register(s, huma.Operation{Method: http.MethodPost, Path: files + "/rollback", OperationID: "rollback", Summary: "rollback", Tags: []string{"Workspace"},
		Metadata: map[string]any{httpapi.MetaRest: "filename", httpapi.MetaSuffix: "rollback", httpapi.MetaFallback: "POST is not supported on a file"}}, read("rollback"))
	ts := httptest.NewServer(s)
	defer ts.Close()
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/api/v1/agents/1/files/memory/a.md", `"file:memory/a.md"`},
		{"GET", "/api/v1/agents/1/files/memory%2Fa.md", `"file:memory/a.md"`},
		{"GET", "/api/v1/agents/1/files/memory/a.md/history", `"history:memory/a.md"`},
		{"GET", "/api/v1/agents/1/files/memory%2Fa.md/history", `"history:memory/a.md"`},
		{"POST", "/api/v1/agents/1/files/memory/a.md/rollback", `"rollback:memory/a.md"`},
		{"POST", "/api/v1/agents/1/files/memory/a.md", `"code":405,"msg":"POST is not supported on a file"`},
	} {
		req, _ := http.NewRequest(c.method, ts.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(raw), c.want) {
			t.Errorf("%s %s: %d %s, want %s", c.method, c.path, resp.StatusCode, raw, c.want)
		}
	}
}

// BenchmarkBodyValidation measures what validating a request body against its schema costs
// (huma parses the body once more, into a map, before decoding it into the type): the same
// 1 MiB file write through an operation that validates and one that skips it
// (SkipValidateBody, the baseline), in the same run.
func BenchmarkBodyValidation(b *testing.B) {
	s := httpapi.New(httpapi.NewAuthenticator(nil), prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	type in struct {
		httpapi.AgentPath
		Body struct {
			Content string `json:"content" maxLength:"2000000"`
		}
	}
	for _, skip := range []bool{false, true} {
		httpapi.Register(s, huma.Operation{Method: http.MethodPut, Path: "/api/v1/agents/{agentId}/bench/" + strconv.FormatBool(skip),
			OperationID: "bench" + strconv.FormatBool(skip), Summary: "bench", Tags: []string{"Agents"}, SkipValidateBody: skip},
			func(_ context.Context, in *in) (*httpapi.Response[probeOutput], error) {
				return httpapi.OK(probeOutput{Name: strconv.Itoa(len(in.Body.Content))}), nil
			})
	}
	body := `{"content":"` + strings.Repeat("记忆 memory line\\n", 1<<16) + `"}`
	for _, c := range []struct {
		name string
		skip bool
	}{{"validated", false}, {"baseline-skip", true}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPut, "http://127.0.0.1/api/v1/agents/1/bench/"+strconv.FormatBool(c.skip), strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				s.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}
