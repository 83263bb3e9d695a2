package workspace_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// Issue 9 point 19: unconditional edits of one file by many writers at once all land (the
// retries back off instead of colliding again at once), and a conflict never shows the
// internal "any version" placeholder.
func TestUnconditionalEditsUnderContention(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ws := workspace.New(db.DB)
		ctx := context.Background()
		var lines []string
		for i := 0; i < 200; i++ {
			lines = append(lines, fmt.Sprintf("item %03d: todo", i))
		}
		mustWrite(t, ws, 1, "notes.md", strings.Join(lines, "\n")+"\n")
		var wg sync.WaitGroup
		errs := make(chan error, len(lines))
		for i := range lines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, err := ws.Edit(ctx, 1, "notes.md", fmt.Sprintf("item %03d: todo", i), fmt.Sprintf("item %03d: done", i),
					false, workspace.AnyVersion, tool)
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("unconditional edit: %v", err)
		}
		f, err := ws.Get(ctx, 1, "notes.md")
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(f.Content, ": done"); n != len(lines) {
			t.Fatalf("%d of %d edits landed", n, len(lines))
		}
	})
}

func TestConflictMessageHasNoPlaceholder(t *testing.T) {
	msg := (&workspace.ConflictError{Filename: "MEMORY.md", Expected: workspace.AnyVersion, Actual: 9, Attempts: 51}).Error()
	if strings.Contains(msg, "-1") || !strings.Contains(msg, "MEMORY.md") {
		t.Fatalf("conflict message: %q", msg)
	}
}
