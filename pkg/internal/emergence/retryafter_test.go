package emergence_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// Issue 9 point 13: a 429 with Retry-After is retried no sooner than asked.
func TestEmergenceHonoursRetryAfter(t *testing.T) {
	db := storetest.SQLite(t)
	var mu sync.Mutex
	var calls []time.Time
	f := newFixture(t, db, func(llmtest.Received) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, time.Now())
		if len(calls) == 1 {
			return llmtest.Reply{Status: 429, Content: "slow down", Header: http.Header{"Retry-After": {"2"}}}
		}
		return llmtest.Reply{Content: jsonReply(false, "nothing", "")}
	})
	f.write(7, "memory/2026-04-02.md", "# 2026-04-02\n\n- talked about the release\n")
	st, a := f.trigger(7)
	if st != 500 || !strings.Contains(a.Msg, "will be retried") {
		t.Fatalf("429: %d %+v", st, a)
	}
	poll.Until(t, 15*time.Second, "the retry", func() bool { return f.runs(7)[0].Status == store.RunSkipped })
	mu.Lock()
	defer mu.Unlock()
	if gap := calls[1].Sub(calls[0]); gap < 2*time.Second {
		t.Fatalf("retried after %s; the endpoint asked for 2s", gap)
	}
}
