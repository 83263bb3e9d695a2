package client_test

// The client's own tests use only the standard library and httptest servers: whatever they
// import lands in the module graph of every program that imports pkg/client (go mod tidy
// reads the tests of the packages it builds). The tests against the real service are in
// pkg/internal/test/goclient, the dependency checks in pkg/internal/test/clientdeps.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/client"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestNew(t *testing.T) {
	for _, bad := range []string{"", "localhost:8080", "ftp://x", "http://", "http://h/?q=1", "://x"} {
		if _, err := client.New(bad, ""); err == nil {
			t.Errorf("New(%q): no error", bad)
		}
	}
	hc := &http.Client{Timeout: time.Minute}
	if _, err := client.New("http://127.0.0.1:1/prefix/", "k", client.WithHTTPClient(hc), client.WithTimeout(time.Second)); err != nil {
		t.Fatal(err)
	}
	if hc.Timeout != time.Minute {
		t.Fatalf("WithTimeout changed the caller's http.Client: %v", hc.Timeout)
	}
}

func TestTransportErrorIsRetryable(t *testing.T) {
	c, err := client.New("http://127.0.0.1:1", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ReadFile(ctx(t), 1, "MEMORY.md")
	if err == nil || !client.IsRetryable(err) {
		t.Fatalf("connection refused: err = %v, want retryable", err)
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.ReadFile(cctx, 1, "MEMORY.md"); err == nil || client.IsRetryable(err) {
		t.Fatalf("canceled: err = %v, want not retryable", err)
	}
}

// Safe requests are retried with backoff, honouring Retry-After; a POST is retried only on
// 429 (the server did nothing); the User-Agent is sent.
func TestRetries(t *testing.T) {
	var gets, posts atomic.Int32
	var ua atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ua.Store(r.Header.Get("User-Agent"))
		w.Header().Set("Content-Type", "application/json")
		switch r.Method {
		case http.MethodGet:
			if gets.Add(1) < 3 {
				w.Header().Set("Retry-After", "0")
				w.WriteHeader(503)
				fmt.Fprint(w, `{"code":503,"msg":"jetstream unavailable"}`)
				return
			}
			fmt.Fprint(w, `{"code":200,"data":{"content":"ok","version":1}}`)
		default:
			n := posts.Add(1)
			if strings.Contains(r.URL.Path, "/limited/") && n == 1 {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(429)
				fmt.Fprint(w, `{"code":429,"msg":"slow down"}`)
				return
			}
			w.WriteHeader(503)
			fmt.Fprint(w, `{"code":503,"msg":"database unavailable"}`)
		}
	}))
	defer srv.Close()
	c, err := client.New(srv.URL, "", client.WithRetry(client.Retry{Attempts: 4, Base: 5 * time.Millisecond, Max: 2 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.ReadFile(ctx(t), 1, "a.md")
	if err != nil || f.Content != "ok" || gets.Load() != 3 {
		t.Fatalf("GET after two 503s: %+v %v (%d tries)", f, err, gets.Load())
	}
	if got, _ := ua.Load().(string); !strings.HasPrefix(got, "matememory-go-client") {
		t.Fatalf("User-Agent %q", got)
	}
	if _, err := c.StoreMessages(ctx(t), 1, "c", client.Message{Role: "user", Content: "x"}); !errors.Is(err, client.ErrUnavailable) || posts.Load() != 1 {
		t.Fatalf("a POST must not be repeated after a 503: %v (%d tries)", err, posts.Load())
	}
	posts.Store(0)
	start := time.Now()
	_, err = c.StoreMessages(ctx(t), 1, "limited", client.Message{Role: "user", Content: "x"})
	if posts.Load() != 2 || time.Since(start) < 900*time.Millisecond {
		t.Fatalf("429 with Retry-After: 1: %d tries after %s (%v)", posts.Load(), time.Since(start), err)
	}
}
