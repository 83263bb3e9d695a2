package llmtest_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
)

func TestMain(m *testing.M) {
	llmtest.MaybeServe(llmtest.Handlers{
		// pid answers with the serving process's id, so a test can tell where it ran.
		"pid": func(r llmtest.Received) llmtest.Reply {
			return llmtest.Reply{Content: strconv.Itoa(os.Getpid()) + " " + r.Messages[len(r.Messages)-1].Content, TokensIn: 7, TokensOut: 2}
		},
		"overloaded": func(llmtest.Received) llmtest.Reply {
			return llmtest.Reply{Status: 503, Content: "overloaded", Header: http.Header{"Retry-After": {"3"}}}
		},
	})
	os.Exit(m.Run())
}

func TestExternalFake(t *testing.T) {
	fake := llmtest.NewExternal(t, "pid")
	cfg := fake.Config()
	if cfg.Model != "fake-model" || cfg.BaseURL != fake.URL+"/v1/" || !strings.HasPrefix(fake.URL, "http://127.0.0.1:") {
		t.Fatalf("config %+v for URL %s", cfg, fake.URL)
	}
	c := llm.NewOpenAI(cfg)
	temp := 0.25
	resp, err := c.Complete(context.Background(), llm.Request{
		Messages:  []llm.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "hello 世界"}},
		MaxTokens: 64, JSON: true, Temperature: &temp,
	})
	if err != nil {
		t.Fatal(err)
	}
	pid, content, _ := strings.Cut(resp.Content, " ")
	if pid == strconv.Itoa(os.Getpid()) || pid == "" || content != "hello 世界" || resp.TokensIn != 7 || resp.TokensOut != 2 || resp.Model != "fake-model" {
		t.Fatalf("response %+v from pid %s (this process is %d): want another process echoing the message", resp, pid, os.Getpid())
	}
	if n := fake.Calls(); n != 1 {
		t.Fatalf("Calls() = %d, want 1", n)
	}
	rec := fake.Received()
	if len(rec) != 1 {
		t.Fatalf("%d received", len(rec))
	}
	r := rec[0]
	if r.Model != "fake-model" || len(r.Messages) != 2 || r.Messages[0] != (llm.Message{Role: "system", Content: "s"}) ||
		r.Messages[1] != (llm.Message{Role: "user", Content: "hello 世界"}) || r.MaxTokens != 64 ||
		r.ResponseFormat == nil || r.ResponseFormat.Type != "json_object" || r.Temperature == nil || *r.Temperature != 0.25 {
		t.Fatalf("received %+v", r)
	}

	// Concurrent calls reach the child and are counted there.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := c.Complete(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: fmt.Sprint(i)}}}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := fake.Calls(); n != 9 {
		t.Fatalf("Calls() = %d after 9 calls", n)
	}
	if m := fake.MaxInFlight(); m < 1 || m > 8 {
		t.Fatalf("MaxInFlight() = %d", m)
	}
}

// TestExternalErrors: scripted failures cross the process boundary with their status and
// headers, so the client classifies them as it would an in-process fake's.
func TestExternalErrors(t *testing.T) {
	fake := llmtest.NewExternal(t, "overloaded")
	_, err := llm.NewOpenAI(fake.Config()).Complete(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}})
	if d, ok := llm.RetryAfter(err); llm.StatusCode(err) != 503 || !llm.Transient(err) || !ok || d != 3*time.Second {
		t.Fatalf("error %v (status %d, retry after %v %v)", err, llm.StatusCode(err), d, ok)
	}
}

// TestExternalStopsAtCleanup: the child is gone once the test that started it ends.
func TestExternalStopsAtCleanup(t *testing.T) {
	var url string
	t.Run("start", func(t *testing.T) {
		url = llmtest.NewExternal(t, "pid").URL
		if resp, err := http.Get(url + "/v1/models"); err != nil {
			t.Fatalf("child not answering: %v", err)
		} else {
			resp.Body.Close()
		}
	})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Second}
	if resp, err := client.Get(url + "/_llmtest/calls"); err == nil {
		resp.Body.Close()
		t.Fatalf("the child still answers at %s after its test ended", url)
	}
}

// fatalTB records the first failure of a helper and stops its goroutine, as t.Fatal does.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// TestExternalUnknownHandler: a name the TestMain did not register fails the test with a
// message that says so, instead of hanging.
func TestExternalUnknownHandler(t *testing.T) {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		llmtest.NewExternal(f, "no-such-handler")
	}()
	<-done
	if !strings.Contains(f.msg, "MaybeServe") {
		t.Fatalf("failure %q, want a hint at MaybeServe", f.msg)
	}
}
