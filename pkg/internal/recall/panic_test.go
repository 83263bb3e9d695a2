package recall_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/panics"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/recall/embed"
	"github.com/matememory/matememory/pkg/internal/recall/embed/embedtest"
	"github.com/matememory/matememory/pkg/internal/recall/lexical"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// panicFirst is an embedder that panics on its first call: a defect reached by one sweep.
type panicFirst struct {
	embed.Embedder
	calls atomic.Int64
}

func (p *panicFirst) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if p.calls.Add(1) == 1 {
		panic("embedder exploded")
	}
	return p.Embedder.Embed(ctx, texts)
}

// A panic during a reconcile sweep is recovered and counted; the loop goes on, and the next
// sweep indexes what the first could not.
func TestReconcilePanicIsRecovered(t *testing.T) {
	db := storetest.SQLite(t)
	ctx := context.Background()
	emb := &panicFirst{Embedder: embed.NewOpenAI(embedtest.New(t, 64).Config())}
	ix := recall.NewIndexer(db.DB, lexical.NewAnalyzer(), recall.Settings{}, recall.WithEmbedder(emb))
	nc, js := connect(t)
	if _, err := bus.EnsureStream(ctx, js, bus.DLQStreamConfig(1, time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := recall.Provision(ctx, js, 1, 30*time.Second, 5); err != nil {
		t.Fatal(err)
	}
	// Written without a notice: only the reconciler finds it.
	ws := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"))
	if _, _, err := ws.Write(ctx, 5, "notes/kite.md", "The kite festival is on the 12th.\n", workspace.AnyVersion, workspace.Change{Actor: store.ActorTool}); err != nil {
		t.Fatal(err)
	}
	g := panics.New(slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	w := recall.NewWorker(js, nc, db.DB, ix, slogDiscard(), 20*time.Millisecond, recall.WorkerWithGuard(g))
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	poll.Until(t, 20*time.Second, "notes/kite.md indexed after the panic", func() bool {
		var n int64
		db.DB.Model(&store.RecallFile{}).Where("agent_id = 5 AND filename = ?", "notes/kite.md").Count(&n)
		return n == 1
	})
	if got := g.Count("recall.reconcile"); got != 1 {
		t.Fatalf("recovered reconcile panics = %v, want 1", got)
	}
}

// armedModel is an embedder whose Model panics while armed (the searcher asks it when it
// builds an agent's snapshot).
type armedModel struct {
	embed.Embedder
	armed atomic.Bool
}

func (a *armedModel) Model() string {
	if a.armed.Load() {
		panic("model exploded")
	}
	return a.Embedder.Model()
}

// A panic while a searcher refreshes a cached agent in the background (an index notice) is
// recovered and counted; the next search loads the agent and finds the new file.
func TestRefreshPanicIsRecovered(t *testing.T) {
	db := storetest.SQLite(t)
	ctx := context.Background()
	emb := &armedModel{Embedder: embed.NewOpenAI(embedtest.New(t, 64).Config())}
	an := lexical.NewAnalyzer()
	ix := recall.NewIndexer(db.DB, an, recall.Settings{}, recall.WithEmbedder(emb))
	g := panics.New(slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	se := recall.NewSearcher(db.DB, an, recall.Settings{}, recall.SearchWithEmbedder(emb), recall.SearchWithGuard(g), recall.SearchWithLogger(slogDiscard()))
	ws := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"))
	write := func(name, content string) {
		t.Helper()
		if _, _, err := ws.Write(ctx, 6, name, content, workspace.AnyVersion, workspace.Change{Actor: store.ActorTool}); err != nil {
			t.Fatal(err)
		}
		if _, err := ix.Sync(ctx, 6, name); err != nil {
			t.Fatal(err)
		}
	}
	search := func(q string) int {
		t.Helper()
		res, err := se.Search(ctx, 6, recall.Query{Text: q})
		if err != nil {
			t.Fatal(err)
		}
		return len(res.Hits)
	}
	write("notes/kite.md", "The kite festival is on the 12th.\n")
	if search("kite festival") != 1 || se.CachedGeneration(6) < 0 {
		t.Fatal("the agent is not searched and cached")
	}
	write("notes/boat.md", "The boat trip is on the 20th.\n")
	emb.armed.Store(true)
	se.Refresh(6)
	poll.Until(t, 20*time.Second, "the refresh's panic recovered", func() bool { return g.Count("recall.refresh") == 1 })
	emb.armed.Store(false)
	if search("boat trip") != 1 {
		t.Fatal("after the refresh's panic the next search does not find the new file")
	}
}
