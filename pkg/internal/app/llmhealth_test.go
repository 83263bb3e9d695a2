package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
)

// lockedBuffer collects log output written from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLLMFailuresAreLoggedAndShownInReadyz: a failing LLM is logged at WARN with the agent,
// the run id and the cause, and shows in /readyz's detail while readiness stays 200.
func TestLLMFailuresAreLoggedAndShownInReadyz(t *testing.T) {
	fake := llmtest.New(t, func(llmtest.Received) llmtest.Reply {
		return llmtest.Reply{Status: 400, Content: "model fake-model does not exist"}
	})
	logs := &lockedBuffer{}
	cfg := config.Default()
	cfg.Mate.DataDir = t.TempDir()
	cfg.Mate.HTTP.Addr = "127.0.0.1:0"
	cfg.Mate.LLM.BaseURL, cfg.Mate.LLM.APIKey, cfg.Mate.LLM.Model = fake.URL+"/v1/", "test-key", "fake-model"
	ctx := context.Background()
	a, err := app.New(ctx, app.Options{Config: cfg, Log: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	base := "http://" + a.Addr

	readyLLM := func() (int, string) {
		r := do(t, "GET", base+"/readyz", "", "")
		var st map[string]string
		_ = json.Unmarshal(r.Data, &st)
		return r.status, st["llm"]
	}
	if st, llm := readyLLM(); st != 200 || llm != "no calls yet" {
		t.Fatalf("readyz before any call: %d llm %q", st, llm)
	}
	postConversation(t, base, 4, "c-llm", 3)
	r := do(t, "POST", base+"/api/v1/memory/4/summarize/c-llm", "", "")
	if r.status != 500 || !strings.Contains(r.Msg, "does not exist") {
		t.Fatalf("summarize with a failing LLM: %d %s", r.status, r.Msg)
	}
	var runs struct {
		Runs []struct {
			RunID  string `json:"runId"`
			Status string `json:"status"`
		} `json:"runs"`
	}
	rr := do(t, "GET", base+"/api/v1/memory/4/runs?kind=summarize", "", "")
	_ = json.Unmarshal(rr.Data, &runs)
	if len(runs.Runs) == 0 || runs.Runs[0].Status != "failed" {
		t.Fatalf("runs %s", rr.Data)
	}
	var warned bool
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if rec["level"] == "WARN" && rec["msg"] == "summarize run failed" && rec["agent"] == float64(4) &&
			rec["run"] == runs.Runs[0].RunID && strings.Contains(rec["cause"].(string), "does not exist") {
			warned = true
		}
	}
	if !warned {
		t.Fatalf("no WARN line with agent 4, run %s and the cause; logs:\n%s", runs.Runs[0].RunID, logs.String())
	}
	if st, llm := readyLLM(); st != 200 || !strings.HasPrefix(llm, "failing: ") || !strings.Contains(llm, "400") {
		t.Fatalf("readyz with a failing LLM: %d llm %q; want 200 and the failure in the detail", st, llm)
	}
}
