package cronjob_test

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/matememory/matememory/pkg/internal/rest"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/cronjob"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/httpapi/apitest"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

type env struct {
	ws   *workspace.Service
	jobs *cronjob.Service
	srv  *httptest.Server
	now  time.Time
}

// setup wires the workspace (with the consolidation hook) and the cron job routes, with
// three keys: admin, agent 1 only, and agent 2 only.
func setup(t *testing.T, db storetest.DB) *env {
	t.Helper()
	e := &env{now: time.Date(2026, 4, 3, 10, 0, 0, 0, time.UTC)}
	clock := func() time.Time { return e.now }
	e.ws = workspace.New(db.DB, workspace.WithDefaults("en", "Asia/Shanghai"), workspace.WithClock(clock),
		workspace.WithAgentHook(cronjob.ConsolidationHook("0 2 * * *", clock)))
	var err error
	e.jobs, err = cronjob.New(db.DB, e.ws, cronjob.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	keys := []config.APIKey{
		{Key: "admin", Admin: true},
		{Key: "k1", Agents: []string{"1"}},
		{Key: "k2", Agents: []string{"2"}},
	}
	s := httpapi.New(httpapi.NewAuthenticator(keys), prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	rest.RegisterCronJobs(s, e.jobs)
	e.srv = apitest.Serve(t, s) // every response is held against the OpenAPI document
	return e
}

type reply struct {
	Code int             `json:"code"`
	Msg  string          `json:"msg"`
	Data json.RawMessage `json:"data"`
}

func (e *env) do(t *testing.T, key, method, path string, body any) (int, reply) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = strings.NewReader(b)
		default:
			raw, _ := json.Marshal(b)
			rd = bytes.NewReader(raw)
		}
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r reply
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("%s %s: decode: %v", method, path, err)
	}
	if r.Code != resp.StatusCode {
		t.Fatalf("%s %s: envelope code %d, HTTP status %d", method, path, r.Code, resp.StatusCode)
	}
	return resp.StatusCode, r
}

func jobsOf(t *testing.T, r reply) []cronjob.Job {
	t.Helper()
	var d struct {
		Count int           `json:"count"`
		Jobs  []cronjob.Job `json:"jobs"`
	}
	if err := json.Unmarshal(r.Data, &d); err != nil {
		t.Fatal(err)
	}
	if d.Count != len(d.Jobs) {
		t.Fatalf("count %d but %d jobs", d.Count, len(d.Jobs))
	}
	return d.Jobs
}

func TestNewAgentGetsConsolidationJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		e := setup(t, db)
		ctx := context.Background()
		if _, err := e.ws.EnsureAgent(ctx, 1); err != nil {
			t.Fatal(err)
		}
		_, r := e.do(t, "admin", "GET", "/api/v1/cron-jobs?agentId=1", nil)
		jobs := jobsOf(t, r)
		if len(jobs) != 1 {
			t.Fatalf("agent 1 jobs: %+v", jobs)
		}
		j := jobs[0]
		if j.Name != cronjob.ConsolidationName || j.TaskType != cronjob.TaskEmergence || j.CronExpression != "0 2 * * *" ||
			j.Timezone != "Asia/Shanghai" || !j.Enabled {
			t.Fatalf("consolidation job: %+v", j)
		}
		// 02:00 in Shanghai after 2026-04-03 10:00Z (18:00 there) is 2026-04-04 02:00 +08:00.
		want := time.Date(2026, 4, 3, 18, 0, 0, 0, time.UTC)
		if j.NextRunTime == nil || !j.NextRunTime.Equal(want) {
			t.Fatalf("next run %v, want %v", j.NextRunTime, want)
		}
		// Seen again (another process, a cold cache): still one job.
		ws2 := workspace.New(db.DB, workspace.WithAgentHook(cronjob.ConsolidationHook("0 2 * * *", nil)))
		if _, err := ws2.EnsureAgent(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if n, err := e.jobs.BackfillConsolidation(ctx); err != nil || n != 0 {
			t.Fatalf("backfill: %d, %v", n, err)
		}
		_, r = e.do(t, "k1", "GET", "/api/v1/cron-jobs", nil)
		if got := jobsOf(t, r); len(got) != 1 {
			t.Fatalf("agent key lists %d jobs", len(got))
		}
	})
}

func TestBackfillRespectsDeletion(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		e := setup(t, db)
		ctx := context.Background()
		// Agents recorded by a version without the hook.
		plain := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"))
		for _, id := range []int64{7, 8} {
			if _, err := plain.EnsureAgent(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		n, err := e.jobs.BackfillConsolidation(ctx)
		if err != nil || n != 2 {
			t.Fatalf("backfill: %d, %v", n, err)
		}
		jobs, _ := e.jobs.List(ctx, cronjob.Filter{AgentID: 7})
		if len(jobs) != 1 || jobs[0].Timezone != "UTC" {
			t.Fatalf("agent 7: %+v", jobs)
		}
		if err := e.jobs.Delete(ctx, jobs[0].ID); err != nil {
			t.Fatal(err)
		}
		if n, err := e.jobs.BackfillConsolidation(ctx); err != nil || n != 0 {
			t.Fatalf("second backfill recreated %d jobs (%v); a deleted job must stay deleted", n, err)
		}
	})
}

func TestCronJobCRUDAndValidation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		e := setup(t, db)
		bad := []struct {
			name string
			body any
			want string
		}{
			{"bad cron", map[string]any{"agentId": 1, "name": "x", "cronExpression": "61 * * * *", "triggerMessage": "hi"}, "cronExpression"},
			{"six fields", map[string]any{"agentId": 1, "name": "x", "cronExpression": "0 0 2 * * *", "triggerMessage": "hi"}, "6 fields"},
			{"unknown zone", map[string]any{"agentId": 1, "name": "x", "cronExpression": "0 9 * * *", "timezone": "Asia/Atlantis", "triggerMessage": "hi"}, "Asia/Atlantis"},
			{"unknown task type", map[string]any{"agentId": 1, "name": "x", "cronExpression": "0 9 * * *", "taskType": "shell"}, "taskType"},
			{"text without message", map[string]any{"agentId": 1, "name": "x", "cronExpression": "0 9 * * *"}, "triggerMessage"},
			{"no name", map[string]any{"agentId": 1, "cronExpression": "0 9 * * *", "triggerMessage": "hi"}, "name"},
			{"no agent", map[string]any{"name": "x", "cronExpression": "0 9 * * *", "triggerMessage": "hi"}, "agentId"},
			{"unknown field", `{"agentId":1,"name":"x","cron":"0 9 * * *"}`, "unknown field"},
		}
		for _, c := range bad {
			st, r := e.do(t, "admin", "POST", "/api/v1/cron-jobs", c.body)
			if st != 400 || !strings.Contains(r.Msg, c.want) {
				t.Errorf("%s: %d %q, want 400 naming %q", c.name, st, r.Msg, c.want)
			}
		}

		st, r := e.do(t, "k1", "POST", "/api/v1/cron-jobs", map[string]any{
			"agentId": 1, "name": "Stand-up", "cronExpression": "0 9 * * 1-5", "timezone": "Europe/Berlin",
			"triggerMessage": "Remind me of today's plan"})
		if st != 201 {
			t.Fatalf("create: %d %s", st, r.Msg)
		}
		var j cronjob.Job
		_ = json.Unmarshal(r.Data, &j)
		// 2026-04-03 is a Friday; 09:00 Berlin (CEST) = 07:00Z, already past at 10:00Z:
		// next is Monday 2026-04-06 07:00Z.
		if j.NextRunTime == nil || !j.NextRunTime.Equal(time.Date(2026, 4, 6, 7, 0, 0, 0, time.UTC)) || j.TaskType != "text" || !j.Enabled {
			t.Fatalf("created: %+v next %v", j, j.NextRunTime)
		}
		path := "/api/v1/cron-jobs/" + itoa(j.ID)

		// Refused: the name is taken; agent 2's key can neither create for agent 1 nor see its job.
		for _, c := range []struct {
			name, key, method, path string
			body                    any
			want                    int
		}{
			{"duplicate name", "k1", "POST", "/api/v1/cron-jobs", map[string]any{
				"agentId": 1, "name": "Stand-up", "cronExpression": "0 9 * * *", "triggerMessage": "x"}, 409},
			{"create for another agent", "k2", "POST", "/api/v1/cron-jobs", map[string]any{
				"agentId": 1, "name": "Other", "cronExpression": "0 9 * * *", "triggerMessage": "x"}, 403},
			{"other agent's key reads the job", "k2", "GET", path, nil, 404},
			{"other agent's key filters by agent 1", "k2", "GET", "/api/v1/cron-jobs?agentId=1", nil, 403},
		} {
			t.Run(c.name, func(t *testing.T) {
				if st, r := e.do(t, c.key, c.method, c.path, c.body); st != c.want {
					t.Fatalf("%d %s, want %d", st, r.Msg, c.want)
				}
			})
		}
		_, r = e.do(t, "k2", "GET", "/api/v1/cron-jobs", nil)
		for _, x := range jobsOf(t, r) {
			if x.AgentID != 2 {
				t.Fatalf("agent 2's key sees %+v", x)
			}
		}

		// PATCH: disable, then bad zone, then re-enable in another zone.
		st, r = e.do(t, "k1", "PATCH", path, map[string]any{"enabled": false})
		_ = json.Unmarshal(r.Data, &j)
		if st != 200 || j.Enabled || j.NextRunTime != nil || j.TriggerMessage != "Remind me of today's plan" {
			t.Fatalf("disable: %d %+v", st, j)
		}
		badPatch := func(name string, body map[string]any, want string) {
			t.Run(name, func(t *testing.T) {
				if st, r := e.do(t, "k1", "PATCH", path, body); st != 400 || !strings.Contains(r.Msg, want) {
					t.Fatalf("%d %s, want 400 naming %q", st, r.Msg, want)
				}
			})
		}
		badPatch("bad zone patch", map[string]any{"timezone": "Nowhere/Land"}, "Nowhere/Land")
		badPatch("bad cron patch", map[string]any{"cronExpression": "0 9 * *"}, "4 fields")
		st, r = e.do(t, "k1", "PATCH", path, map[string]any{"enabled": true, "timezone": "Asia/Tokyo"})
		_ = json.Unmarshal(r.Data, &j)
		// 09:00 Tokyo = 00:00Z; from Friday 10:00Z the next weekday 09:00 in Tokyo is Monday.
		if st != 200 || j.NextRunTime == nil || !j.NextRunTime.Equal(time.Date(2026, 4, 6, 0, 0, 0, 0, time.UTC)) {
			t.Fatalf("re-enable: %d %+v next %v", st, j, j.NextRunTime)
		}
		badPatch("move to another agent", map[string]any{"agentId": 2}, "cannot change")

		// PUT replaces: the omitted time zone goes back to the agent's, the task becomes emergence.
		st, r = e.do(t, "k1", "PUT", path, map[string]any{"name": "Nightly", "cronExpression": "30 3 * * *", "taskType": "emergence"})
		_ = json.Unmarshal(r.Data, &j)
		if st != 200 || j.Timezone != "Asia/Shanghai" || j.TaskType != "emergence" || j.TriggerMessage != "" || !j.Enabled {
			t.Fatalf("put: %d %s %+v", st, r.Msg, j)
		}
		if st, _ := e.do(t, "k1", "PUT", path, map[string]any{"name": "Nightly"}); st != 400 {
			t.Fatalf("put without cronExpression: %d, want 400", st)
		}

		// In this order: agent 2's key cannot delete the job, agent 1's can, and it is gone.
		for _, c := range []struct {
			name, key, method string
			want              int
		}{
			{"other agent deletes", "k2", "DELETE", 404},
			{"delete", "k1", "DELETE", 200},
			{"get deleted", "k1", "GET", 404},
		} {
			t.Run(c.name, func(t *testing.T) {
				if st, r := e.do(t, c.key, c.method, path, nil); st != c.want {
					t.Fatalf("%d %s, want %d", st, r.Msg, c.want)
				}
			})
		}
		// The name is free again.
		if st, r := e.do(t, "k1", "POST", "/api/v1/cron-jobs", map[string]any{
			"agentId": 1, "name": "Nightly", "cronExpression": "0 3 * * *", "taskType": "emergence"}); st != 201 {
			t.Fatalf("re-create after delete: %d %s", st, r.Msg)
		}
		_, r = e.do(t, "admin", "GET", "/api/v1/cron-jobs", nil)
		all := jobsOf(t, r)
		// Agent 1: its consolidation job and Nightly; agent 2 was never seen (every request for it was refused).
		if len(all) != 2 {
			t.Fatalf("admin lists %d jobs: %+v", len(all), all)
		}
	})
}

func TestAdvanceIsCompareAndSwap(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		e := setup(t, db)
		ctx := context.Background()
		j, err := e.jobs.Create(ctx, cronjob.Input{AgentID: ptr(int64(3)), Name: ptr("every minute"),
			CronExpression: ptr("* * * * *"), TaskType: ptr("emergence")})
		if err != nil {
			t.Fatal(err)
		}
		from := *j.NextRunTime
		due, err := e.jobs.Due(ctx, from, 10)
		if err != nil || len(due) != 1 || due[0].ID != j.ID {
			t.Fatalf("due at its next run: %+v %v", due, err)
		}
		if due, _ := e.jobs.Due(ctx, from.Add(-time.Second), 10); len(due) != 0 {
			t.Fatalf("due a second early: %+v", due)
		}
		next := from.Add(time.Minute)
		won, err := e.jobs.Advance(ctx, j.ID, from, &next, &from)
		if err != nil || !won {
			t.Fatalf("first advance: %v %v", won, err)
		}
		if won, err := e.jobs.Advance(ctx, j.ID, from, &next, &from); err != nil || won {
			t.Fatalf("second advance of the same slot won: %v %v", won, err)
		}
		got, _ := e.jobs.Get(ctx, j.ID)
		if !got.NextRunTime.Equal(next) || !got.LastRunTime.Equal(from) {
			t.Fatalf("after advance: next %v last %v", got.NextRunTime, got.LastRunTime)
		}
	})
}

func ptr[T any](v T) *T { return &v }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
