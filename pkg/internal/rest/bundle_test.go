package rest_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/bundle"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/httpapi/apitest"
	"github.com/matememory/matememory/pkg/internal/rest"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

var ndjsonDecoder sync.Once

// startBundle is start with the bundle routes, every answer held against the document (a
// bundle, application/x-ndjson, as the string its schema says it is).
func startBundle(t *testing.T, db storetest.DB, keys string) *server {
	t.Helper()
	ndjsonDecoder.Do(func() {
		openapi3filter.RegisterBodyDecoder(bundle.ContentType, func(r io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
			b, err := io.ReadAll(r)
			return string(b), err
		})
	})
	parsed, err := config.ParseKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	ws := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"))
	s := httpapi.New(httpapi.NewAuthenticator(parsed), prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	rest.RegisterWorkspace(s, ws)
	rest.RegisterBundle(s, bundle.New(db.DB), slog.New(slog.DiscardHandler))
	ln, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return &server{base: "http://" + ln.Addr().String(), ws: ws, client: apitest.New(t, s, nil).Client()}
}

// raw sends body as a bundle and returns the status, the headers and the body.
func (s *server) raw(t *testing.T, method, path, body, key string) (int, http.Header, string) {
	t.Helper()
	r, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		r.Header.Set("Content-Type", bundle.ContentType)
	}
	resp, err := s.client.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestExportImportOverREST(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		s := startBundle(t, db, "k1=1;k2=2;k7=7;adm=admin")
		one := []string{"Authorization", "Bearer k1"}
		expect(t, s.req(t, "PUT", "/api/v1/agents/1/files/notes/a.md", `{"content":"likes green tea"}`, one...), 201, "")
		expect(t, s.req(t, "PUT", "/api/v1/agents/1/files/notes/a.md", `{"content":"likes black tea"}`, one...), 200, "")

		st, hdr, b := s.raw(t, "GET", "/api/v1/agents/1/export?history=true", "", "k1")
		if st != 200 || hdr.Get("Content-Type") != bundle.ContentType || !strings.HasPrefix(hdr.Get("Content-Disposition"), `attachment; filename="agent-1-`) {
			t.Fatalf("export: %d %v", st, hdr)
		}
		if !strings.HasPrefix(b, `{"kind":"manifest","format":"matememory-agent-bundle","version":1,"agentId":1`) || !strings.Contains(b, "likes green tea") {
			t.Fatalf("bundle: %.300s", b)
		}
		for _, c := range []struct {
			method, path, body, key string
			status                  int
			msg                     string
		}{
			{"GET", "/api/v1/agents/2/export", "", "k1", 403, "may not act for agent 2"},
			{"GET", "/api/v1/agents/7/export", "", "k7", 404, "agent 7 not found: it has never been used"},
			// A bundle is the agent's memory: an admin-only key reaches none of it.
			{"GET", "/api/v1/agents/1/export", "", "adm", 403, "may not act for agent 1"},
			{"POST", "/api/v1/agents/1/import?mode=merge&dryRun=true", b, "adm", 403, "may not act for agent 1"},
			{"POST", "/api/v1/agents/2/import?mode=merge", b, "adm", 403, "may not act for agent 2"},
			{"GET", "/api/v1/agents/1/export?history=maybe", "", "k1", 400, `history must be true or false, got "maybe"`},
			{"POST", "/api/v1/agents/2/import", b, "k1", 403, "may not act for agent 2"},
			{"POST", "/api/v1/agents/2/import?mode=replace", b, "k2", 400, `mode "replace" is not an import mode`},
			{"POST", "/api/v1/agents/2/import", strings.Replace(b, `"version":1`, `"version":9`, 1), "k2", 400, "it supports version 1 and older"},
			{"POST", "/api/v1/agents/2/import", strings.Replace(b, "black", "white", 1), "k2", 400, "the bundle is damaged or was edited"},
			{"POST", "/api/v1/agents/3/import", b, "k1", 403, "may not act for agent 3"},
		} {
			st, _, body := s.raw(t, c.method, c.path, c.body, c.key)
			var e struct {
				Code int    `json:"code"`
				Msg  string `json:"msg"`
			}
			_ = json.Unmarshal([]byte(body), &e)
			if st != c.status || e.Code != st || !strings.Contains(e.Msg, c.msg) {
				t.Errorf("%s %s: %d %s; want %d with %q", c.method, c.path, st, body, c.status, c.msg)
			}
		}
		for i, want := range []string{`"changes":7`, `"changes":0`} { // 4 core files, the note, its history, the agent
			st, _, body := s.raw(t, "POST", "/api/v1/agents/2/import", b, "k2")
			if st != 200 || !strings.Contains(body, want) || !strings.Contains(body, `"conflictCount":0`) {
				t.Fatalf("import %d: %d %s; want %s", i+1, st, body, want)
			}
		}
		// Into an agent that changed since: not empty, so mode=merge is the way.
		expect(t, s.req(t, "PUT", "/api/v1/agents/1/files/notes/b.md", `{"content":"new"}`, one...), 201, "")
		if st, _, body := s.raw(t, "POST", "/api/v1/agents/1/import", b, "k1"); st != 409 || !strings.Contains(body, "agent 1 is not empty") {
			t.Fatalf("import into a changed agent: %d %s", st, body)
		}
		if st, _, body := s.raw(t, "POST", "/api/v1/agents/1/import?mode=merge&dryRun=true", b, "k1"); st != 200 || !strings.Contains(body, `"changes":0`) {
			t.Fatalf("dry-run merge: %d %s", st, body)
		}
		var f workspace.File
		r := s.req(t, "GET", "/api/v1/agents/2/files/notes/a.md", "", "Authorization", "Bearer k2")
		expect(t, r, 200, "")
		r.into(t, &f)
		if f.Content != "likes black tea" || f.Version != 2 {
			t.Fatalf("imported file: %+v", f)
		}
	})
}
