package summarizer

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/archive"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// Issue 29: the core memory's bound and its archive hold under any model and any file.

// archived is every archive note of the agent, concatenated, and the largest note's size.
func archived(t *testing.T, h *harness, agentID int64) (string, int) {
	t.Helper()
	notes, err := h.ws.ListContent(context.Background(), agentID, archive.Dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	largest := 0
	for _, n := range notes {
		b.WriteString(n.Content)
		b.WriteString("\n")
		largest = max(largest, len(n.Content))
	}
	return b.String(), largest
}

// lost lists the non-blank lines of before that are neither in now nor, verbatim, in the
// archive.
func lost(before, now, arch string) []string {
	have := map[string]bool{}
	for _, l := range strings.Split(now+"\n"+arch, "\n") {
		have[l] = true
	}
	var out []string
	for _, l := range strings.Split(before, "\n") {
		if strings.TrimSpace(l) != "" && !have[l] {
			out = append(out, l)
		}
	}
	return out
}

// bigMemory is a MEMORY.md of n entries under a heading of its own each tenth entry.
func bigMemory(n int) string {
	var b strings.Builder
	b.WriteString("# MEMORY.md\n")
	for i := 0; i < n; i++ {
		if i%10 == 0 {
			fmt.Fprintf(&b, "\n## Project P-%05d\n\n", i/10)
		}
		fmt.Fprintf(&b, "- F-%06d: the order for customer C-%06d ships from warehouse W-%03d on day %d of the quarter\n", i, i, i%997, i%90)
	}
	return b.String()
}

// A MEMORY.md of about 560 KB (within max-file-bytes, so a person may store it) no longer
// stops the agent's extraction: the file is fitted without the model (too large to ask it),
// the archive of what left it spreads over as many notes of the day as it needs, none over
// the cap, and the extraction commits; every old line is in MEMORY.md or the archive.
func TestLargeCoreFileIsFittedAndArchived(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		var consolidations atomic.Int64
		fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
			if strings.Contains(userOf(r), "<core_file>") {
				consolidations.Add(1)
				return llmtest.Reply{Content: "not json"}
			}
			return answer(map[string]any{"should_update": true, "reason": "r", "daily_entry": "- noted",
				"memory_edits": []map[string]string{{"op": "add", "text": "- F-999999: a new fact"}}})
		})
		h := newHarness(t, db, withLLM(fake))
		budget := 2000
		if _, err := h.ws.SetBudgets(context.Background(), 21, &budget, nil); err != nil {
			t.Fatal(err)
		}
		before := bigMemory(5800)
		if len(before) < 560_000 || len(before) > h.ws.MaxBytes() {
			t.Fatalf("MEMORY.md of %d bytes", len(before))
		}
		seedFile(t, h, 21, "MEMORY.md", before)
		h.conversation(21, "c1", "t21", 4)
		h.worker(h.service("w1"))
		h.publish(completed(21, "c1", "e-big", 4))
		poll.Until(t, 60*time.Second, "settled", func() bool { return h.settled() && len(h.runs("e-big")) > 0 })

		run := h.runs("e-big")[0]
		mem, _ := h.file(21, "MEMORY.md")
		if n := h.ws.CountTokens(mem.Content); run.Status != store.RunCompleted || n > budget {
			t.Fatalf("run %s (%s), MEMORY.md %d tokens of %d", run.Status, run.Reason, n, budget)
		}
		if consolidations.Load() != 0 || !strings.Contains(mem.Content, "- F-999999: a new fact") {
			t.Errorf("%d consolidation calls (want none: too large to ask); MEMORY.md tail %q", consolidations.Load(), mem.Content[max(0, len(mem.Content)-200):])
		}
		arch, largest := archived(t, h, 21)
		if largest > h.ws.MaxBytes() {
			t.Errorf("an archive note of %d bytes, over the cap %d", largest, h.ws.MaxBytes())
		}
		if l := lost(before, mem.Content, arch); len(l) > 0 {
			t.Fatalf("%d lines lost, first %q", len(l), l[0])
		}
	})
}

// A core file larger than the model's context does not dead-letter the extraction: a file
// too large to ask about is fitted before any call; one the model answers
// context_length_exceeded to (the consolidation or the extraction) is fitted by demotion and
// the model asked again.
func TestCoreFileOverTheModelsContextIsFitted(t *testing.T) {
	for _, c := range []struct {
		name    string
		entries int
		budget  int
		// limit is the largest prompt (bytes) the model takes.
		limit int
	}{
		{"too-large-to-ask", 1300, 2000, 60_000},     // ~131 KB: fitted before any call
		{"consolidation-refused", 220, 2000, 18_000}, // ~22 KB: the consolidation's prompt is refused
		{"extraction-refused", 150, 2000, 14_000},    // within 90% of 4,000: only the extraction's is
	} {
		t.Run(c.name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db storetest.DB) {
				var refused atomic.Int64
				fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
					size := 0
					for _, m := range r.Messages {
						size += len(m.Content)
					}
					if size > c.limit {
						refused.Add(1)
						return llmtest.Reply{Status: http.StatusBadRequest, Content: `{"error":{"message":"This model's maximum context length is 4096 tokens","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`}
					}
					if strings.Contains(userOf(r), "<core_file>") {
						return llmtest.Reply{Content: "not json"}
					}
					return answer(map[string]any{"should_update": true, "reason": "r", "daily_entry": "- noted",
						"memory_edits": []map[string]string{{"op": "add", "text": "- F-999999: a new fact"}}})
				})
				h := newHarness(t, db, withLLM(fake))
				budget := c.budget
				if c.name == "extraction-refused" {
					budget = 4000
				}
				if _, err := h.ws.SetBudgets(context.Background(), 21, &budget, nil); err != nil {
					t.Fatal(err)
				}
				before := bigMemory(c.entries)
				seedFile(t, h, 21, "MEMORY.md", before)
				h.conversation(21, "c1", "t21", 4)
				h.worker(h.service("w1"))
				h.publish(completed(21, "c1", "e-ctx", 4))
				poll.Until(t, 60*time.Second, "settled", func() bool { return h.settled() && len(h.runs("e-ctx")) > 0 })
				runs := h.runs("e-ctx")
				run := runs[len(runs)-1]
				mem, _ := h.file(21, "MEMORY.md")
				if run.Status != store.RunCompleted || !strings.Contains(mem.Content, "- F-999999: a new fact") {
					t.Fatalf("run %s: %s (%d context refusals)", run.Status, run.Reason, refused.Load())
				}
				if c.name != "too-large-to-ask" && refused.Load() == 0 {
					t.Errorf("the model never refused a prompt: the case tests nothing")
				}
				arch, _ := archived(t, h, 21)
				if l := lost(before, mem.Content, arch); len(l) > 0 {
					t.Fatalf("%d lines lost, first %q", len(l), l[0])
				}
			})
		})
	}
}

// A model that files each fact under a section of its own cannot grow MEMORY.md past its
// budget: a section whose entries are gone goes with them, and the bound counts every line.
// Nothing that leaves the file is lost.
func TestSectionPerFactKeepsTheBound(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		var n atomic.Int64
		fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
			if strings.Contains(userOf(r), "<core_file>") {
				return llmtest.Reply{Content: `{"reason": "keep all headings", "edits": []}`}
			}
			i := n.Add(1)
			return answer(map[string]any{"should_update": true, "reason": "r", "daily_entry": "- noted",
				"memory_edits": []map[string]string{{"op": "add", "text": fmt.Sprintf("## Topic T-%04d\n\n- F-%06d: fact number %d\n", i, i, i)}}})
		})
		h := newHarness(t, db, withLLM(fake))
		budget := 150
		if _, err := h.ws.SetBudgets(context.Background(), 21, &budget, nil); err != nil {
			t.Fatal(err)
		}
		h.worker(h.service("w1"))
		for d := 0; d < 25; d++ {
			conv := fmt.Sprintf("c%d", d)
			h.conversation(21, conv, "t"+conv, 4)
			ev := fmt.Sprintf("e-%d", d)
			h.publish(completed(21, conv, ev, 4))
			poll.Until(t, 20*time.Second, "settled", func() bool { return h.settled() && len(h.runs(ev)) > 0 })
		}
		hist, err := h.ws.History(context.Background(), 21, "MEMORY.md")
		if err != nil {
			t.Fatal(err)
		}
		mem, _ := h.file(21, "MEMORY.md")
		versions := []string{mem.Content}
		for _, e := range hist {
			versions = append(versions, e.Content)
		}
		for _, v := range versions {
			if tk := h.ws.CountTokens(v); tk > budget {
				t.Fatalf("a MEMORY.md version of %d tokens, budget %d:\n%s", tk, budget, v)
			}
		}
		if n.Load() < 20 {
			t.Fatalf("%d extractions asked the model, want 25", n.Load())
		}
		arch, _ := archived(t, h, 21)
		for i := int64(1); i <= n.Load(); i++ {
			for _, l := range []string{fmt.Sprintf("## Topic T-%04d", i), fmt.Sprintf("- F-%06d: fact number %d", i, i)} {
				if !strings.Contains(mem.Content, l+"\n") && !strings.Contains(arch, l+"\n") {
					t.Fatalf("%q lost", l)
				}
			}
		}
	})
}

// A consolidation the model refuses is not asked again on every extraction: the service fits
// the file by demotion at once (even a file the extraction does not write), and the model is
// not asked to consolidate that file again for a while.
func TestRefusedConsolidationBacksOff(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		var consolidations atomic.Int64
		fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
			if strings.Contains(userOf(r), "<core_file>") {
				consolidations.Add(1)
				return llmtest.Reply{Content: `{"reason": "x", "edits": [{"op": "delete", "old": "no such line"}]}`}
			}
			return answer(map[string]any{"should_update": true, "reason": "r", "daily_entry": "- noted"})
		})
		h := newHarness(t, db, withLLM(fake))
		budget := 200
		if _, err := h.ws.SetBudgets(context.Background(), 21, nil, &budget); err != nil {
			t.Fatal(err)
		}
		h.worker(h.service("w1"))
		for d := 0; d < 4; d++ {
			// A person writes PROFILE.md over its budget again before each extraction.
			var b strings.Builder
			b.WriteString("# PROFILE.md\n\n")
			for i := 0; i < 40; i++ {
				fmt.Fprintf(&b, "- P-%d-%02d: the user prefers option %d on day %d\n", d, i, i, d)
			}
			seedFile(t, h, 21, "PROFILE.md", b.String())
			conv := fmt.Sprintf("c%d", d)
			h.conversation(21, conv, "t"+conv, 4)
			ev := fmt.Sprintf("e-%d", d)
			h.publish(completed(21, conv, ev, 4))
			poll.Until(t, 20*time.Second, "settled", func() bool { return h.settled() && len(h.runs(ev)) > 0 })
			prof, _ := h.file(21, "PROFILE.md")
			if n := h.ws.CountTokens(prof.Content); n > budget {
				t.Fatalf("extraction %d: PROFILE.md %d tokens, budget %d (run %q)", d, n, budget, h.runs(ev)[0].Reason)
			}
			// What the extraction took out of the person's PROFILE.md is in the archive.
			arch, _ := archived(t, h, 21)
			if l := lost(b.String(), prof.Content, arch); len(l) > 0 {
				t.Fatalf("extraction %d: %d lines lost, first %q", d, len(l), l[0])
			}
		}
		if n := consolidations.Load(); n != 1 {
			t.Errorf("%d consolidation calls for 4 extractions, want 1 (then backed off)", n)
		}
	})
}

// A model's whole-file answer larger than max-file-bytes is not refused when the file has a
// budget: the service fits it without the model, and what it demoted is in the archive.
func TestOversizedAnswerIsFitted(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		var huge string
		fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
			return answer(map[string]any{"should_update": true, "reason": "r", "daily_entry": "- noted", "memory_update": huge})
		})
		h := newHarness(t, db, withLLM(fake))
		budget := 2000
		if _, err := h.ws.SetBudgets(context.Background(), 21, &budget, nil); err != nil {
			t.Fatal(err)
		}
		huge = bigMemory(12000)
		if len(huge) <= h.ws.MaxBytes() {
			t.Fatalf("answer of %d bytes, within the cap", len(huge))
		}
		h.conversation(21, "c1", "t21", 4)
		h.worker(h.service("w1"))
		h.publish(completed(21, "c1", "e-huge", 4))
		poll.Until(t, 60*time.Second, "settled", func() bool { return h.settled() && len(h.runs("e-huge")) > 0 })
		run := h.runs("e-huge")[0]
		mem, _ := h.file(21, "MEMORY.md")
		if n := h.ws.CountTokens(mem.Content); run.Status != store.RunCompleted || n > budget {
			t.Fatalf("run %s (%.300s), MEMORY.md %d tokens of %d", run.Status, run.Reason, n, budget)
		}
		arch, largest := archived(t, h, 21)
		if largest > h.ws.MaxBytes() {
			t.Errorf("an archive note of %d bytes", largest)
		}
		if l := lost(huge, mem.Content, arch); len(l) > 0 {
			t.Fatalf("%d lines lost, first %q", len(l), l[0])
		}
	})
}
