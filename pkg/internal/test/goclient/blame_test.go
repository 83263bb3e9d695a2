package goclient_test

import (
	"testing"

	"github.com/matememory/matememory/pkg/client"
	"github.com/matememory/matememory/pkg/internal/apptest"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// Client.Blame against the composed app: a line a summarizer run wrote names the run's
// event and conversation, from the app's own ledger.
func TestBlame(t *testing.T) {
	a := apptest.Start(t, "")
	c := newClient(t, a, "")
	ctx := ctx(t)
	const name = "notes/blame.md"
	if _, err := c.WriteFile(ctx, 1, name, "# Notes\n", client.CreateOnly); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.New(a.DB, nil).Record(ctx, ledger.Run{RunID: "run-g", Kind: ledger.KindSummarize, AgentID: 1,
		EventID: "ev-g", Conversations: []string{"conv-g"}, Status: store.RunCompleted}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Workspace.Write(ctx, 1, name, "# Notes\n- plays go\n", workspace.AnyVersion,
		workspace.Change{Actor: store.ActorSummarizer, Ref: "run-g"}); err != nil {
		t.Fatal(err)
	}
	b, err := c.Blame(ctx, 1, name)
	if err != nil {
		t.Fatal(err)
	}
	if b.Version != 2 || b.Count != 2 || len(b.Lines) != 2 {
		t.Fatalf("blame %+v", b)
	}
	var l client.BlameLine = b.Lines[1]
	var o client.LineOrigin = l.Introduced
	if l.Text != "- plays go" || o.Version != 2 || o.Actor != store.ActorSummarizer || o.Ref != "run-g" || o.EventID != "ev-g" ||
		len(o.Conversations) != 1 || o.Conversations[0] != "conv-g" || o.RunKind != ledger.KindSummarize {
		t.Fatalf("the summarizer's line: %+v", l)
	}
	if _, err := c.Blame(ctx, 1, "notes/missing.md"); !client.IsNotFound(err) {
		t.Fatalf("blame of a missing file: %v", err)
	}
}
