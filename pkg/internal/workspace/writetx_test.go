package workspace_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/tokens"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// WriteTx writes in the caller's transaction: its write commits and rolls back with the
// caller's, keeps history, and a stale version is a conflict, not a retry.
func TestWriteTxFollowsTheCallersTransaction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ws := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"))
		ctx := context.Background()
		cur, err := ws.Get(ctx, 3, "MEMORY.md")
		if err != nil {
			t.Fatal(err)
		}
		rollback := errors.New("rolled back by the caller")
		err = db.DB.Transaction(func(tx *gorm.DB) error {
			if _, _, err := ws.WriteTx(store.InTx(tx), 3, "MEMORY.md", "# MEMORY.md\n- rolled back\n", cur.Version, workspace.Change{Actor: store.ActorSummarizer}); err != nil {
				return err
			}
			return rollback
		})
		if !errors.Is(err, rollback) {
			t.Fatalf("transaction: %v", err)
		}
		if f, _ := ws.Get(ctx, 3, "MEMORY.md"); f.Version != cur.Version || f.Content != cur.Content {
			t.Fatalf("rolled-back write kept: v%d %q", f.Version, f.Content)
		}

		var got workspace.File
		if err := db.DB.Transaction(func(tx *gorm.DB) error {
			var err error
			got, _, err = ws.WriteTx(store.InTx(tx), 3, "MEMORY.md", "# MEMORY.md\n- kept\n", cur.Version, workspace.Change{Actor: store.ActorSummarizer, Ref: "run-1"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if f, _ := ws.Get(ctx, 3, "MEMORY.md"); f.Version != cur.Version+1 || f.Content != "# MEMORY.md\n- kept\n" || got.Version != f.Version {
			t.Fatalf("MEMORY.md v%d %q (returned v%d)", f.Version, f.Content, got.Version)
		}
		if hist, err := ws.History(ctx, 3, "MEMORY.md"); err != nil || len(hist) == 0 || hist[0].Content != cur.Content || hist[0].Ref != "run-1" {
			t.Fatalf("history %+v (%v)", hist, err)
		}

		err = db.DB.Transaction(func(tx *gorm.DB) error {
			_, _, err := ws.WriteTx(store.InTx(tx), 3, "MEMORY.md", "# MEMORY.md\n- stale\n", cur.Version, workspace.Change{Actor: store.ActorSummarizer})
			return err
		})
		if !errors.Is(err, workspace.ErrConflict) {
			t.Fatalf("stale version: %v, want a conflict", err)
		}
	})
}

// Committed runs for a WriteTx what Write runs after its commit: an over-budget core file is
// warned about and counted, with the writer as actor.
func TestCommittedChecksTheBudget(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		var logs bytes.Buffer
		tk, err := tokens.NewCounter().For("gpt-4o")
		if err != nil {
			t.Fatal(err)
		}
		ws := workspace.New(db.DB, workspace.WithBudgets(workspace.Budgets{Memory: 100, Profile: 40, Tokenizer: tk}),
			workspace.WithBudgetMetrics(prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
		ctx := context.Background()
		cur, err := ws.Get(ctx, 4, "MEMORY.md")
		if err != nil {
			t.Fatal(err)
		}
		var f workspace.File
		if err := db.DB.Transaction(func(tx *gorm.DB) error {
			f, _, err = ws.WriteTx(store.InTx(tx), 4, "MEMORY.md", strings.Repeat("- a long remembered fact about the user\n", 40), cur.Version,
				workspace.Change{Actor: store.ActorSummarizer})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if logs.Len() != 0 {
			t.Fatalf("warned before the commit was announced: %s", logs.String())
		}
		ws.Committed(ctx, &f, store.ActorSummarizer)
		if out := logs.String(); strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, "file=MEMORY.md") || !strings.Contains(out, "actor=summarizer") {
			t.Fatalf("warnings: %s", out)
		}
		if f.Tokens == nil || *f.BudgetTokens != 100 {
			t.Fatalf("file not annotated: %+v", f)
		}
	})
}

// AppendTx appends in the caller's unit of work: from the caller's read (Base), a note
// changed since is a conflict for the caller to retry, and an effect applied before writes
// nothing and leaves the unit going on.
func TestAppendTxJoinsTheCallersUnit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ws := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"))
		units := store.NewUnits(db.DB)
		ctx := context.Background()
		if _, err := ws.EnsureAgent(ctx, 5); err != nil {
			t.Fatal(err)
		}
		const note = "memory/2026-12-01.md"
		appendIn := func(key string, base *workspace.File) (workspace.File, error) {
			var f workspace.File
			err := units.Do(ctx, func(tx *store.Tx) error {
				var err error
				f, err = ws.AppendTx(tx, 5, note, "- "+key+"\n", "# 2026-12-01\n\n", workspace.Change{Actor: store.ActorSummarizer, EffectKey: key, Base: base})
				return err
			})
			return f, err
		}
		first, err := appendIn("k1", &workspace.File{})
		if err != nil || first.Version != 1 || first.Content != "# 2026-12-01\n\n- k1\n" {
			t.Fatalf("first append: %+v %v", first, err)
		}
		// Read as version 0 (no note yet), but the note exists now: a conflict, nothing written.
		if _, err := appendIn("k2", &workspace.File{}); !errors.Is(err, workspace.ErrConflict) {
			t.Fatalf("append from a stale read: %v, want a conflict", err)
		}
		second, err := appendIn("k2", nil)
		if err != nil || second.Version != 2 || second.Content != "# 2026-12-01\n\n- k1\n\n- k2\n" {
			t.Fatalf("second append: %+v %v", second, err)
		}
		// The same effect again: ErrAlreadyApplied, and the unit still commits its other writes.
		cur, err := ws.Get(ctx, 5, "MEMORY.md")
		if err != nil {
			t.Fatal(err)
		}
		err = units.Do(ctx, func(tx *store.Tx) error {
			if _, err := ws.AppendTx(tx, 5, note, "- k1\n", "", workspace.Change{Actor: store.ActorSummarizer, EffectKey: "k1"}); !errors.Is(err, workspace.ErrAlreadyApplied) {
				t.Errorf("repeated effect: %v, want ErrAlreadyApplied", err)
			}
			_, _, err := ws.WriteTx(tx, 5, "MEMORY.md", "# MEMORY.md\n- with it\n", cur.Version, workspace.Change{Actor: store.ActorSummarizer})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if f, _ := ws.Get(ctx, 5, note); f.Version != 2 {
			t.Fatalf("note v%d after a repeated effect, want 2", f.Version)
		}
		if f, _ := ws.Get(ctx, 5, "MEMORY.md"); f.Version != cur.Version+1 {
			t.Fatalf("MEMORY.md v%d, want v%d: the unit did not go on", f.Version, cur.Version+1)
		}
	})
}
