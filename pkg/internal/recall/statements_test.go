package recall_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/recall/lexical"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// stmtCounter counts the statements gorm runs.
type stmtCounter struct{ n atomic.Int64 }

func (c *stmtCounter) LogMode(logger.LogLevel) logger.Interface { return c }
func (c *stmtCounter) Info(context.Context, string, ...any)     {}
func (c *stmtCounter) Warn(context.Context, string, ...any)     {}
func (c *stmtCounter) Error(context.Context, string, ...any)    {}
func (c *stmtCounter) Trace(context.Context, time.Time, func() (string, int64), error) {
	c.n.Add(1)
}

// Indexing a changed file (every extraction's daily note) reads the file and its index
// state in one statement: five statements in all, with the compare-and-swap of the state,
// the chunks replaced and the generation bumped (six before issue 32). A removed file is
// still found removed.
func TestSyncOfAChangedFileStatements(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		ws := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"))
		c := &stmtCounter{}
		ix := recall.NewIndexer(db.DB.Session(&gorm.Session{Logger: c}), lexical.NewAnalyzer(), recall.Settings{})
		const name = "memory/2026-05-01.md"
		ch := workspace.Change{Actor: store.ActorTool}
		if _, err := ws.Append(ctx, 1, name, "- green tea", "# 2026-05-01\n\n", ch); err != nil {
			t.Fatal(err)
		}
		if r, err := ix.Sync(ctx, 1, name); err != nil || r.Outcome != recall.Indexed {
			t.Fatalf("first sync: %+v %v", r, err)
		}
		if _, err := ws.Append(ctx, 1, name, "- long walks", "", ch); err != nil {
			t.Fatal(err)
		}
		before := c.n.Load()
		r, err := ix.Sync(ctx, 1, name)
		if err != nil || r.Outcome != recall.Indexed || r.Chunks == 0 {
			t.Fatalf("sync of the changed file: %+v %v", r, err)
		}
		if n := c.n.Load() - before; n != 5 {
			t.Errorf("indexing a changed file took %d statements, want 5", n)
		}
		before = c.n.Load()
		if r, err := ix.Sync(ctx, 1, name); err != nil || r.Outcome != recall.Unchanged {
			t.Fatalf("sync of an unchanged file: %+v %v", r, err)
		}
		if n := c.n.Load() - before; n != 1 {
			t.Errorf("an unchanged file took %d statements, want 1", n)
		}
		if err := ws.Delete(ctx, 1, name, workspace.AnyVersion, ch); err != nil {
			t.Fatal(err)
		}
		if r, err := ix.Sync(ctx, 1, name); err != nil || r.Outcome != recall.Removed {
			t.Fatalf("sync of a deleted file: %+v %v", r, err)
		}
	})
}
