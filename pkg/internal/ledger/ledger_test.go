package ledger

import (
	"context"
	"github.com/matememory/matememory/pkg/api"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// The console filters runs by status and time and lists each agent's newest run.
func TestFiltersAndLatest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		l := New(db.DB, nil)
		t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		for i, st := range []string{"completed", "failed", "completed", "skipped"} {
			for _, agent := range []int64{1, 2} {
				if _, err := l.Record(ctx, Run{Kind: KindSummarize, AgentID: agent, Status: api.RunStatus(st), Reason: st,
					CreateTime: t0.Add(time.Duration(i) * time.Hour)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		got, err := l.List(ctx, Filter{AgentID: 1, Status: "completed"})
		if err != nil || len(got) != 2 {
			t.Fatalf("status filter: %d runs, %v", len(got), err)
		}
		got, err = l.List(ctx, Filter{AgentID: 1, Since: t0.Add(time.Hour), Until: t0.Add(3 * time.Hour)})
		if err != nil || len(got) != 2 || got[0].Status != "completed" || got[1].Status != "failed" {
			t.Fatalf("time filter: %+v, %v", got, err)
		}
		if got, err := l.List(ctx, Filter{AgentIDs: []int64{2}, Status: "failed"}); err != nil || len(got) != 1 || got[0].AgentID != 2 {
			t.Fatalf("agent set filter: %+v, %v", got, err)
		}
		first, err := l.List(ctx, Filter{AgentID: 1, Limit: 3})
		if err != nil || len(first) != 3 {
			t.Fatalf("first page: %+v, %v", first, err)
		}
		next, err := l.List(ctx, Filter{AgentID: 1, Limit: 3, BeforeRun: first[2].RunID})
		if err != nil || len(next) != 1 || next[0].Status != "completed" || !next[0].CreateTime.Equal(t0) {
			t.Fatalf("next page: %+v, %v", next, err)
		}
		if got, err := l.List(ctx, Filter{AgentIDs: []int64{}}); err != nil || len(got) != 0 {
			t.Fatalf("empty agent set: %+v, %v", got, err)
		}
		latest, err := l.Latest(ctx, []int64{1, 2, 3})
		if err != nil || len(latest) != 2 || latest[1].Status != "skipped" || latest[2].AgentID != 2 || latest[2].Status != "skipped" {
			t.Fatalf("latest: %+v, %v", latest, err)
		}
		pts, err := l.Points(ctx, t0.Add(2*time.Hour), 10)
		if err != nil || len(pts) != 4 || pts[0].Status != "skipped" || pts[0].CreateTime.Sub(t0) != 3*time.Hour {
			t.Fatalf("points: %+v, %v", pts, err)
		}
		if m, err := l.Latest(ctx, nil); err != nil || len(m) != 0 {
			t.Fatalf("latest of none: %v %v", m, err)
		}
	})
}
