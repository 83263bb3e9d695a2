package panics

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// The process's outermost handler (app's http.Server) is Guard.HTTP: a panic outside the
// API's own recovery (the console, MCP over HTTP, metrics) answers 500, is logged with the
// request and counted, and the server goes on; http.ErrAbortHandler still aborts.
func TestHTTPRecoversAndAnswers500(t *testing.T) {
	var logs bytes.Buffer
	g := New(slog.New(slog.NewTextHandler(&logs, nil)), prometheus.NewRegistry())
	srv := httptest.NewServer(g.HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/panic":
			panic("handler exploded")
		case "/abort":
			panic(http.ErrAbortHandler)
		}
		_, _ = io.WriteString(w, "ok")
	})))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/panic")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("a panicking handler answered %d, want 500", resp.StatusCode)
	}
	if got := g.Count("http"); got != 1 {
		t.Fatalf("recovered http panics = %v, want 1", got)
	}
	for _, want := range []string{"handler exploded", "path=/panic", "method=GET"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q", want)
		}
	}
	// A deliberate abort is no defect: the connection is cut, nothing is counted.
	if resp, err := http.Get(srv.URL + "/abort"); err == nil {
		resp.Body.Close()
		t.Fatalf("an aborted handler answered %d, want the connection cut", resp.StatusCode)
	}
	if got := g.Count("http"); got != 1 {
		t.Errorf("an abort was counted as a panic (%v)", got)
	}
	resp, err = http.Get(srv.URL + "/")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the server after the panics: %v %v", resp, err)
	}
	resp.Body.Close()
}
