package emergence_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

func editsReply(edits ...map[string]string) string {
	b, _ := json.Marshal(map[string]any{"should_update": true, "reason": "merge", "memory_edits": edits})
	return string(b)
}

// memory_edits instead of the whole MEMORY.md: applied exactly, and the output budget is
// sized from the notes, not from MEMORY.md.
func TestEmergenceEditsApplied(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		f := newFixture(t, db, func(llmtest.Received) llmtest.Reply {
			return llmtest.Reply{Content: editsReply(
				map[string]string{"op": "add", "under": "## Key decisions", "text": "- 2026-04-03 — PR review every morning — a habit over three days."},
				map[string]string{"op": "replace", "old": "one fewer service to run", "new": "one service fewer to run"},
			)}
		})
		padding := strings.Repeat("- an older fact that stays.\n", 400)
		f.write(7, "MEMORY.md", richMemory+padding)
		// A large MEMORY.md within its budget (over it, emergence would demote entries).
		budget := 10000
		if _, err := f.ws.SetBudgets(context.Background(), 7, &budget, nil); err != nil {
			t.Fatal(err)
		}
		f.write(7, "memory/2026-04-03.md", "# 2026-04-03\n\n- Reviewed pull requests first thing.\n")
		st, a := f.trigger(7)
		if st != 200 || a.Data.Status != "completed" {
			t.Fatalf("trigger: %d %+v", st, a)
		}
		want := strings.Replace(richMemory, "- 2026-03-10 — leases in NATS KV rather than Redis — one fewer service to run.\n",
			"- 2026-03-10 — leases in NATS KV rather than Redis — one service fewer to run.\n", 1)
		want = strings.Replace(want, "one service fewer to run.\n", "one service fewer to run.\n- 2026-04-03 — PR review every morning — a habit over three days.\n", 1)
		if got := f.memory(7).Content; got != strings.TrimSpace(want+padding) {
			t.Fatalf("MEMORY.md\n got %q\nwant %q", got, strings.TrimSpace(want+padding))
		}
		// The replaced text went to the archive note (budget_test.go).
		if runs := f.runs(7); len(runs) != 1 || runs[0].Status != store.RunCompleted || strings.Join(runs[0].FilesChanged, ",") != "MEMORY.md,memory/archive/2026-04-03.md" {
			t.Fatalf("ledger %+v", runs)
		}
		// The whole-file budget would be above 4,000 tokens for this MEMORY.md.
		got := f.fake.Received()
		if len(got) != 1 {
			t.Fatalf("%d model calls, want 1", len(got))
		}
		if n := got[0].MaxTokens + got[0].MaxCompletionTokens; n != 2048 {
			t.Fatalf("max tokens %d, want 2048 (sized from the notes)", n)
		}
	})
}

// A missing or ambiguous anchor refuses the edits: MEMORY.md stays as it was, the ledger
// row is refused with the reason, and the model is not asked again.
func TestEmergenceEditAnchorRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		var calls atomic.Int32
		f := newFixture(t, db, func(llmtest.Received) llmtest.Reply {
			calls.Add(1)
			return llmtest.Reply{Content: editsReply(
				map[string]string{"op": "add", "under": "## Key decisions", "text": "- a decision"},
				map[string]string{"op": "delete", "old": "- an old line that is not there"},
			)}
		})
		f.write(8, "MEMORY.md", richMemory)
		f.write(8, "memory/2026-04-03.md", "# 2026-04-03\n\n- note\n")
		before := f.memory(8)
		st, a := f.trigger(8)
		want := `memory_edits refused: edit 2 (delete): text "- an old line that is not there" not found; MEMORY.md left unchanged`
		if st != 200 || a.Data.RunStatus != store.RunRefused || !strings.Contains(a.Data.Reason, want) {
			t.Fatalf("trigger: %d %+v\nwant reason %q", st, a, want)
		}
		if after := f.memory(8); after.Version != before.Version || after.Content != richMemory {
			t.Fatalf("MEMORY.md changed: %q", after.Content)
		}
		if runs := f.runs(8); len(runs) != 1 || runs[0].Status != store.RunRefused || !strings.Contains(runs[0].Reason, want) || len(runs[0].FilesChanged) != 0 {
			t.Fatalf("ledger %+v", runs)
		}
		if calls.Load() != 1 {
			t.Fatalf("model called %d times, want 1", calls.Load())
		}
	})
}

// A tool edit during the model call survives edits: the write against the version read
// conflicts, the model is asked again with the tool's change, and its edits apply on top.
func TestEmergenceEditsKeepAConcurrentEdit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		var calls atomic.Int32
		var f *fixture
		f = newFixture(t, db, func(llmtest.Received) llmtest.Reply {
			if calls.Add(1) == 1 {
				f.write(9, "MEMORY.md", f.memory(9).Content+"\n- Added by a tool mid-call.\n")
			}
			return llmtest.Reply{Content: editsReply(map[string]string{"op": "add", "under": "## Key decisions", "text": "- consolidated"})}
		})
		f.write(9, "MEMORY.md", richMemory)
		f.write(9, "memory/2026-04-03.md", "# 2026-04-03\n\n- note\n")
		if st, a := f.trigger(9); st != 200 || a.Data.Status != "completed" {
			t.Fatalf("%d %+v", st, a)
		}
		mem := f.memory(9).Content
		if calls.Load() != 2 || !strings.Contains(mem, "Added by a tool mid-call.") || !strings.Contains(mem, "one fewer service to run.\n- consolidated\n") {
			t.Fatalf("%d model calls; MEMORY.md %q", calls.Load(), mem)
		}
	})
}
