package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/cronjob"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// TestEmergenceDoneWhen walks issue 4's acceptance list against the all-in-one process with
// a fake model and a controllable clock.
func TestEmergenceDoneWhen(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		var base string
		fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
			// Keep the whole MEMORY.md from the prompt and add one consolidated line.
			user := r.Messages[len(r.Messages)-1].Content
			i, j := strings.Index(user, "<memory_md>\n"), strings.Index(user, "\n</memory_md>")
			cur := user[i+len("<memory_md>\n") : j]
			b, _ := json.Marshal(map[string]any{"should_update": true, "reason": "a habit recurs",
				"memory_content": cur + "\n- The user reviews pull requests every morning.\n"})
			return llmtest.Reply{Content: string(b)}
		})
		clk := &testClock{t: time.Date(2026, 4, 3, 9, 0, 30, 0, time.UTC)}
		cfg := config.Default()
		cfg.Mate.DataDir = t.TempDir()
		cfg.Mate.HTTP.Addr = "127.0.0.1:0"
		cfg.Mate.Timezone = "UTC"
		cfg.Mate.Language = "en"
		cfg.Mate.Sched.TickSeconds = 0.02
		cfg.Mate.LLM.BaseURL, cfg.Mate.LLM.APIKey, cfg.Mate.LLM.Model = fake.URL+"/v1/", "test-key", "fake-model"
		if db.Driver == "mysql" {
			cfg.Mate.Database = config.Database{Driver: "mysql", DSN: db.DSN}
		}
		cfg.Mate.Auth.Keys, _ = config.ParseKeys("k1=1;adm=admin")
		ctx := context.Background()
		a, err := app.New(ctx, app.Options{Config: cfg, Log: slog.New(slog.DiscardHandler), Clock: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Close)
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		base = "http://" + a.Addr

		// Daily notes written for an agent (its first sight).
		for _, d := range []string{"2026-04-02", "2026-04-03"} {
			if r := do(t, "PUT", base+"/api/v1/agents/1/files/memory/"+d+".md", "k1",
				`{"content":"# `+d+`\n\n- Reviewed pull requests first thing in the morning.\n"}`); r.status/100 != 2 {
				t.Fatalf("write note: %d %s", r.status, r.Msg)
			}
		}
		// A new agent has its consolidation job listed.
		r := do(t, "GET", base+"/api/v1/cron-jobs?agentId=1", "k1", "")
		var list struct {
			Jobs []cronjob.Job `json:"jobs"`
		}
		_ = json.Unmarshal(r.Data, &list)
		if r.status != 200 || len(list.Jobs) != 1 || list.Jobs[0].Name != cronjob.ConsolidationName ||
			list.Jobs[0].CronExpression != "0 2 * * *" || list.Jobs[0].TaskType != "emergence" || list.Jobs[0].Timezone != "UTC" {
			t.Fatalf("cron jobs of agent 1: %d %s %+v", r.status, r.Msg, list.Jobs)
		}

		// The manual trigger answers completed; MEMORY.md holds the consolidation, the
		// previous one is in its history.
		r = do(t, "POST", base+"/api/v1/memory/1/emergence", "k1", "")
		var res struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(r.Data, &res)
		if r.status != 200 || r.Code != 200 || res.Status != "completed" {
			t.Fatalf("manual emergence: %d %s %s", r.status, r.Msg, r.Data)
		}
		r = do(t, "GET", base+"/api/v1/agents/1/files/MEMORY.md", "k1", "")
		var mem workspace.File
		_ = json.Unmarshal(r.Data, &mem)
		if mem.Version != 2 || !strings.Contains(mem.Content, "reviews pull requests every morning") {
			t.Fatalf("MEMORY.md after emergence: v%d %q", mem.Version, mem.Content)
		}
		r = do(t, "GET", base+"/api/v1/agents/1/files/MEMORY.md/history", "k1", "")
		var hist struct {
			History []workspace.HistoryEntry `json:"history"`
		}
		_ = json.Unmarshal(r.Data, &hist)
		if len(hist.History) != 1 || hist.History[0].Version != 1 || hist.History[0].Actor != store.ActorEmergence {
			t.Fatalf("history: %s", r.Data)
		}

		// A job set to fire every minute fires once a minute.
		r = do(t, "POST", base+"/api/v1/cron-jobs", "k1",
			`{"agentId":1,"name":"every minute","cronExpression":"* * * * *","taskType":"emergence","timezone":"Asia/Shanghai"}`)
		var job cronjob.Job
		_ = json.Unmarshal(r.Data, &job)
		if r.status != 201 || job.NextRunTime == nil {
			t.Fatalf("create job: %d %s", r.status, r.Msg)
		}
		runs := ledger.New(a.DB, nil) // the app's own database (its SQLite file lives in its data folder)
		var slots []time.Time
		for i := 0; i < 3; i++ {
			slot := job.NextRunTime.Add(time.Duration(i) * time.Minute)
			slots = append(slots, slot)
			clk.Set(slot.Add(time.Second))
			id := fmt.Sprintf("cron:%d:%s", job.ID, slot.UTC().Format(time.RFC3339))
			deadline := time.Now().Add(15 * time.Second)
			for {
				got, err := runs.List(ctx, ledger.Filter{AgentID: 1, EventID: id})
				if err != nil {
					t.Fatal(err)
				}
				if len(got) > 0 && got[0].Status == store.RunCompleted {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("slot %s: runs %+v", slot, got)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		all, _ := runs.List(ctx, ledger.Filter{AgentID: 1, Kind: ledger.KindEmergence})
		perEvent := map[string]int{}
		for _, run := range all {
			if strings.HasPrefix(run.EventID, "cron:") {
				perEvent[run.EventID]++
			}
		}
		if len(perEvent) != len(slots) {
			t.Fatalf("cron runs %v, want one per slot of %v", perEvent, slots)
		}
		for id, n := range perEvent {
			if n != 1 {
				t.Fatalf("%s ran %d times", id, n)
			}
		}
	})
}
