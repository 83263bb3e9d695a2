package summarizer

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

func userOf(r llmtest.Received) string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

// A MEMORY.md past its high-water mark is consolidated before the extraction: the model is
// asked to fit it first, the extraction's edits apply to the consolidated file, and what the
// consolidation dropped is in the archive, in the extraction's one commit. When the model's
// consolidation is refused, the service demotes the oldest entries itself: the file ends
// within its budget whatever the model does, and nothing is lost.
func TestConsolidationKeepsTheBudget(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		t.Run(fmt.Sprintf("model-refuses=%v", refuse), func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db storetest.DB) {
				var consolidations atomic.Int64
				var sawConsolidated atomic.Bool
				fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
					user := userOf(r)
					if strings.Contains(user, "<core_file>") {
						consolidations.Add(1)
						if refuse {
							return llmtest.Reply{Content: `{"reason": "x", "edits": [{"op": "delete", "old": "no such line"}]}`}
						}
						return answer(map[string]any{"reason": "dropped the old facts", "content": "# MEMORY.md\n\n## Facts\n- fact 59 is kept\n"})
					}
					sawConsolidated.Store(strings.Contains(user, "- fact 59 is kept") && !strings.Contains(user, "- fact 0 is old"))
					return answer(map[string]any{"should_update": true, "reason": "r", "daily_entry": "- noted",
						"memory_edits": []map[string]string{{"op": "add", "under": "## Facts", "text": "- a new fact"}}})
				})
				h := newHarness(t, db, withLLM(fake))
				budget := 300
				if _, err := h.ws.SetBudgets(context.Background(), 21, &budget, nil); err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				b.WriteString("# MEMORY.md\n\n## Facts\n")
				for i := 0; i < 59; i++ {
					fmt.Fprintf(&b, "- fact %d is old\n", i)
				}
				b.WriteString("- fact 59 is kept\n")
				seedFile(t, h, 21, "MEMORY.md", b.String())
				h.conversation(21, "c1", "t21", 4)
				h.worker(h.service("w1"))
				h.publish(completed(21, "c1", "e-cons", 4))
				poll.Until(t, 20*time.Second, "settled", func() bool { return h.settled() && len(h.runs("e-cons")) > 0 })

				run := h.runs("e-cons")[0]
				mem, _ := h.file(21, "MEMORY.md")
				if n := h.ws.CountTokens(mem.Content); n > budget || run.Status != store.RunCompleted || consolidations.Load() != 1 {
					t.Fatalf("MEMORY.md %d tokens (budget %d), %d consolidations, run %+v:\n%s", n, budget, consolidations.Load(), run, mem.Content)
				}
				if !strings.Contains(mem.Content, "- a new fact\n") || !strings.Contains(mem.Content, "- fact 59 is kept\n") {
					t.Fatalf("MEMORY.md lost the new or the newest fact:\n%s", mem.Content)
				}
				if !refuse && (!sawConsolidated.Load() || !strings.Contains(run.Reason, "consolidated MEMORY.md from")) {
					t.Errorf("the extraction did not see the consolidated file (run %q)", run.Reason)
				}
				if refuse && (!strings.Contains(run.Reason, "consolidation not applied") || !strings.Contains(run.Reason, "entries to the archive")) {
					t.Errorf("run reason %q", run.Reason)
				}
				// Every old fact is in MEMORY.md or, verbatim and once, in the archive.
				name := run.FilesChanged[len(run.FilesChanged)-1]
				arch, _ := h.file(21, name)
				for i := 0; i < 59; i++ {
					line := fmt.Sprintf("- fact %d is old\n", i)
					if strings.Count(arch.Content, line)+strings.Count(mem.Content, line) != 1 {
						t.Fatalf("%q is in MEMORY.md %d times and in %s %d times", line, strings.Count(mem.Content, line), name, strings.Count(arch.Content, line))
					}
				}
				want := "consolidation"
				if refuse {
					want = "demotion"
				}
				if !strings.Contains(arch.Content, "· MEMORY.md · "+want+" · run "+run.RunID) || arch.Enabled {
					t.Errorf("archive %s (enabled %v):\n%.400s", name, arch.Enabled, arch.Content)
				}
			})
		})
	}
}
