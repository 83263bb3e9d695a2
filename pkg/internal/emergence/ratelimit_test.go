package emergence_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/matememory/matememory/pkg/internal/rest"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/emergence"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// Issue 9.11: five back-to-back manual requests for one agent make one LLM call: concurrent
// ones share the run, later ones within the cooldown get 429 with Retry-After.
func TestManualEmergenceCoalescedAndRateLimited(t *testing.T) {
	var calls atomic.Int32
	f := newFixture(t, storetest.SQLite(t), func(r llmtest.Received) llmtest.Reply {
		calls.Add(1)
		time.Sleep(200 * time.Millisecond)
		return llmtest.Reply{Content: `{"should_update": false, "reason": "nothing recurs"}`}
	})
	f.write(4, "memory/"+today.Format("2006-01-02")+".md", "# note\n\n- tea in the morning\n")
	js := f.connect("limited-api")
	kv, err := js.CreateOrUpdateKeyValue(context.Background(), emergence.ManualLimitBucket(1, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s := httpapi.New(httpapi.NewAuthenticator(nil), prometheus.NewRegistry(), f.quiet)
	rest.RegisterEmergence(s, emergence.NewTrigger(js, 15*time.Second).WithRateLimit(kv))
	srv := f.srv
	srv.Config.Handler = s

	start := time.Now() // before agent 4's first run: its cooldown ends 2 s after this at the earliest
	var wg sync.WaitGroup
	codes := make([]int, 5)
	ids := make([]string, 5)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], ids[i] = post(t, srv.URL+"/api/v1/memory/4/emergence")
		}()
	}
	wg.Wait()
	ran := 0
	for i, c := range codes {
		switch c {
		case 200:
			ran++
			if ids[i] != ids[0] && codes[0] == 200 {
				t.Errorf("concurrent requests did not share one run: %v", ids)
			}
		case 429:
		default:
			t.Fatalf("answer %d: %d", i, c)
		}
	}
	if ran == 0 || calls.Load() != 1 {
		t.Fatalf("%d answered 200, %d LLM calls; want at least one answer and exactly one call (codes %v)", ran, calls.Load(), codes)
	}
	// Right after: 429 with Retry-After.
	resp, err := http.Post(srv.URL+"/api/v1/memory/4/emergence", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != 429 || n < 1 || n > 2 {
		t.Fatalf("a request within the cooldown: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Another agent is not limited by agent 4's cooldown; after the cooldown agent 4 runs again.
	if c, _ := post(t, srv.URL+"/api/v1/memory/5/emergence"); c != 200 {
		t.Fatalf("agent 5: %d", c)
	}
	// Agent 4 is refused (429, nothing else) until its cooldown has passed, then runs again:
	// the bucket's TTL expires the key when the server gets to it, which a loaded machine may
	// delay, so the test polls rather than sleeping for the cooldown.
	poll.UntilReason(t, 20*time.Second, "agent 4 to run again after its cooldown", func() (bool, string) {
		c, _ := post(t, srv.URL+"/api/v1/memory/4/emergence")
		switch {
		case c == 200:
			if d := time.Since(start); d < 2*time.Second {
				t.Fatalf("agent 4 ran again %s after its first run, within its 2 s cooldown", d)
			}
			return true, ""
		case c != 429:
			t.Fatalf("agent 4 within or after the cooldown: %d, want 429 or 200", c)
		}
		return false, "429"
	}, poll.Every(100*time.Millisecond))
}

func post(t *testing.T, url string) (int, string) {
	resp, err := http.Post(url, "application/json", nil)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	var a answer
	_ = jsonDecode(resp, &a)
	return resp.StatusCode, fmt.Sprint(a.Data.RequestID)
}

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }
