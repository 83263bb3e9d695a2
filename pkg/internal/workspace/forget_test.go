package workspace_test

import (
	"context"
	"slices"
	"testing"

	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// eraseRows deletes the agent's row and files as an erasure does (another process's).
func eraseRows(t *testing.T, db storetest.DB, agent int64) {
	t.Helper()
	for _, sql := range []string{"DELETE FROM mate_workspace_file WHERE agent_id = ?", "DELETE FROM mate_agent WHERE id = ?"} {
		if err := db.DB.Exec(sql, agent).Error; err != nil {
			t.Fatal(err)
		}
	}
}

// An erased agent's id starts anew in a process that had seen it: after Forget (the
// erasure's notice) any first use seeds the core files again; before the notice, reading the
// agent seeds it too instead of failing.
func TestErasedAgentIsSeededAgain(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		ws := workspace.New(db.DB)
		core := slices.Sorted(slices.Values(workspace.CoreFiles))
		listed := func() []string {
			t.Helper()
			infos, err := ws.List(ctx, 1, "")
			if err != nil {
				t.Fatal(err)
			}
			return slices.Sorted(slices.Values(names(infos)))
		}
		mustWrite(t, ws, 1, "notes.md", "- a fact")
		eraseRows(t, db, 1)
		ws.Forget(1)
		if got := listed(); !slices.Equal(got, core) {
			t.Fatalf("after Forget the files are %v, want the core files %v", got, core)
		}

		eraseRows(t, db, 1)
		if _, err := ws.EnsureAgent(ctx, 1); err != nil {
			t.Fatalf("reading an agent erased elsewhere, before the notice: %v", err)
		}
		if got := listed(); !slices.Equal(got, core) {
			t.Fatalf("after reading the agent the files are %v, want the core files %v", got, core)
		}
	})
}
