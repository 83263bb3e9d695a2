package blame_test

import (
	"context"
	"testing"

	"github.com/matememory/matememory/pkg/internal/blame"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// TestBlameFromTheWorkspace blames a file written by a person and two pipeline runs, on
// SQLite and MariaDB: every line names the version, actor, run, event and conversations that
// introduced it.
func TestBlameFromTheWorkspace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		ws := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"))
		led := ledger.New(db.DB, nil)
		const agent = 7
		if _, err := ws.EnsureAgent(ctx, agent); err != nil {
			t.Fatal(err)
		}
		write := func(content string, ch workspace.Change) {
			t.Helper()
			if _, _, err := ws.Write(ctx, agent, "notes.md", content, workspace.AnyVersion, ch); err != nil {
				t.Fatal(err)
			}
		}
		write("# Notes\n- likes tea\n", workspace.Change{Actor: store.ActorAPI})
		if _, err := led.Record(ctx, ledger.Run{RunID: "run-a", Kind: "summarize", AgentID: agent, EventID: "ev-1",
			Conversations: []string{"conv-1"}, Status: store.RunCompleted}); err != nil {
			t.Fatal(err)
		}
		write("# Notes\n- likes tea\n- lives in Hangzhou\n", workspace.Change{Actor: store.ActorSummarizer, Ref: "run-a"})
		write("# Notes\n- lives in Hangzhou\n- likes green tea\n", workspace.Change{Actor: store.ActorEmergence, Ref: "run-b"})

		got, err := blame.New(ws, led).Blame(ctx, agent, "notes.md")
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != 3 || len(got.Lines) != 3 {
			t.Fatalf("blame: v%d, %d lines: %+v", got.Version, len(got.Lines), got.Lines)
		}
		head, city, tea := got.Lines[0], got.Lines[1], got.Lines[2]
		if head.Introduced.Version != 1 || head.Introduced.Action != "create" || head.Confirmed.Version != 3 {
			t.Errorf("heading: %+v", head)
		}
		if city.Introduced.Version != 2 || city.Introduced.Actor != store.ActorSummarizer || city.Introduced.Ref != "run-a" ||
			city.Introduced.EventID != "ev-1" || len(city.Introduced.Conversations) != 1 || city.Introduced.Conversations[0] != "conv-1" ||
			city.Confirmed.Version != 3 || city.Confirmed.Actor != store.ActorEmergence {
			t.Errorf("city: %+v", city)
		}
		if tea.Text != "- likes green tea" || tea.Introduced.Version != 3 || tea.Introduced.Actor != store.ActorEmergence ||
			tea.Introduced.EventID != "" {
			t.Errorf("tea: %+v", tea)
		}
		if _, err := blame.New(ws, led).Blame(ctx, agent, "missing.md"); err == nil {
			t.Error("blame of a missing file: no error")
		}
	})
}
