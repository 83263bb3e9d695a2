package emergence_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/archive"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/memedit"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// archiveNote is the archive note of the tests' day.
const archiveNote = "memory/archive/2026-04-03.md"

// writeAt writes an agent's file as a person would have at t (its history dated t).
func (f *fixture) writeAt(t time.Time, agent int64, name, content string) {
	f.t.Helper()
	ws := workspace.New(f.db.DB, workspace.WithDefaults("en", "UTC"), workspace.WithClock(func() time.Time { return t }))
	if _, _, err := ws.Write(context.Background(), agent, name, content, workspace.AnyVersion, workspace.Change{Actor: store.ActorAPI}); err != nil {
		f.t.Fatal(err)
	}
}

// An emergence whose answer grows MEMORY.md past its budget ends within the budget: the
// entries least recently introduced are demoted, verbatim and once, to the archive note,
// under a block that names the run, in the transaction of the write (a write that loses its
// compare-and-swap leaves no archive behind).
func TestEmergenceKeepsTheBudget(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		const agent = 20
		// Two long entries (an item with its continuation lines moves as a whole).
		oldA := "- The user lives in Lisbon and works from home on Fridays, with the office in Alfama otherwise.\n" +
			"  They take the 28 tram when it rains, and prefer meetings after ten in the morning.\n" +
			"  Their partner works in Porto during the week, so Friday evenings are kept free."
		oldB := "- The user's cat is called Miso; she is eleven, sleeps on the balcony in summer,\n" +
			"  needs a tablet with her dinner every evening, and goes to the vet in Graça each March.\n" +
			"  When the user travels, the neighbour on the third floor feeds her twice a day."
		newer := "- The user moved the team's services from Java to Go in March."
		person := "- A person added this during the model call: the standup is at 09:30."
		edits := make([]memedit.Edit, 6)
		for i := range edits {
			edits[i] = memedit.Edit{Op: "add", Under: "## Facts", Text: fmt.Sprintf("- Recurring this week (%d): the user reviews pull request batch %d before lunch.", i, i)}
		}
		var calls atomic.Int32
		var f *fixture
		f = newFixture(t, db, func(llmtest.Received) llmtest.Reply {
			if calls.Add(1) == 1 {
				// A person's edit lands during the first call: that attempt's write (and the
				// archive append in its transaction) must roll back.
				f.write(agent, "MEMORY.md", f.memory(agent).Content+person+"\n")
			}
			out := make([]map[string]string, len(edits))
			for i, e := range edits {
				out[i] = map[string]string{"op": e.Op, "under": e.Under, "text": e.Text}
			}
			return llmtest.Reply{Content: editsReply(out...)}
		})
		// Two facts from a month ago, then a newer one written above them ten days ago: the
		// demotion goes by when entries were introduced, not by their place in the file.
		f.writeAt(today.AddDate(0, 0, -30), agent, "MEMORY.md", "# MEMORY.md\n\n## Facts\n"+oldA+"\n"+oldB+"\n")
		v2 := "# MEMORY.md\n\n## Facts\n" + newer + "\n" + oldA + "\n" + oldB + "\n"
		f.writeAt(today.AddDate(0, 0, -10), agent, "MEMORY.md", v2)
		f.write(agent, "memory/2026-04-03.md", "# 2026-04-03\n\n- Reviewed pull requests before lunch again.\n")

		// A budget the answer passes, that demoting the two oldest facts meets (down to
		// consolidate.Target of it), and demoting only one does not.
		answer, err := memedit.Apply(v2+person+"\n", edits)
		if err != nil {
			t.Fatal(err)
		}
		answer = strings.TrimSpace(answer)
		without := func(s string, lines ...string) string {
			for _, l := range lines {
				s = strings.Replace(s, l+"\n", "", 1)
			}
			return s
		}
		budget := int(math.Ceil(float64(f.ws.CountTokens(without(answer, oldA, oldB))) / 0.7))
		first, err := memedit.Apply(v2, edits) // the first call's answer, whose write loses its compare-and-swap
		if err != nil {
			t.Fatal(err)
		}
		if n := f.ws.CountTokens(answer); n <= budget || f.ws.CountTokens(strings.TrimSpace(first)) <= budget ||
			float64(f.ws.CountTokens(without(answer, oldA))) <= 0.7*float64(budget) {
			t.Fatalf("the fixture does not discriminate: answer %d tokens, first answer %d, budget %d", n, f.ws.CountTokens(first), budget)
		}
		if _, err := f.ws.SetBudgets(context.Background(), agent, &budget, nil); err != nil {
			t.Fatal(err)
		}

		st, a := f.trigger(agent)
		if st != 200 || a.Data.Status != "completed" {
			t.Fatalf("trigger: %d %+v", st, a)
		}
		mem := f.memory(agent).Content
		if n := f.ws.CountTokens(mem); n > budget {
			t.Fatalf("MEMORY.md is %d tokens, over its budget of %d:\n%s", n, budget, mem)
		}
		if mem != without(answer, oldA, oldB) {
			t.Fatalf("MEMORY.md\n got %q\nwant %q (the answer less the two oldest facts)", mem, without(answer, oldA, oldB))
		}
		note, err := f.ws.Get(context.Background(), agent, archiveNote)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(note.Content, archive.Header("2026-04-03")) || note.Enabled {
			t.Fatalf("archive note (enabled %v):\n%s", note.Enabled, note.Content)
		}
		heading := "## 2026-04-03 20:00 +00:00 · MEMORY.md · demotion · run " + a.Data.RunID + "\n"
		if strings.Count(note.Content, heading) != 1 {
			t.Fatalf("archive note lacks one block %q:\n%s", heading, note.Content)
		}
		for _, l := range []string{oldA, oldB} {
			if strings.Count(note.Content, l+"\n") != 1 {
				t.Fatalf("archive note holds %q %d times, want once:\n%s", l, strings.Count(note.Content, l), note.Content)
			}
		}
		if strings.Contains(note.Content, newer) || strings.Contains(note.Content, "batch") || strings.Contains(note.Content, person) {
			t.Fatalf("archive note holds entries that stay:\n%s", note.Content)
		}
		if !strings.Contains(note.Content, "under Facts, MEMORY.md v") || !strings.Contains(note.Content, "2026-03-04") {
			t.Fatalf("archive entries do not say where they came from:\n%s", note.Content)
		}
		runs := f.runs(agent)
		if len(runs) != 1 || strings.Join(runs[0].FilesChanged, ",") != "MEMORY.md,"+archiveNote ||
			!strings.Contains(runs[0].Reason, fmt.Sprintf("over its budget of %d tokens: 2 entries demoted to the archive", budget)) {
			t.Fatalf("ledger %+v", runs)
		}
		// The model was told the size and the budget, of the file as each call saw it.
		got := f.fake.Received()
		if len(got) != 2 {
			t.Fatalf("%d model calls, want 2", len(got))
		}
		for i, read := range []string{v2, v2 + person + "\n"} {
			want := fmt.Sprintf("(%d tokens; its budget is %d tokens)", f.ws.CountTokens(read), budget)
			if user := got[i].Messages[1].Content; !strings.Contains(user, want) {
				t.Fatalf("prompt %d lacks %q:\n%s", i+1, want, user)
			}
		}
	})
}

// What an emergence's edits or whole-file answer take out of MEMORY.md goes to the archive,
// verbatim, with the reason and the run; what they put in does not.
func TestEmergenceArchivesWhatLeaves(t *testing.T) {
	replaced := "- 2026-03-10 — leases in NATS KV rather than Redis — one fewer service to run."
	deleted := "- Write the operator runbook for dead letters."
	cases := []struct {
		name, reason string
		reply        func(cur string) string
	}{
		{"edits", archive.ReasonEdit, func(string) string {
			return editsReply(
				map[string]string{"op": "replace", "old": replaced, "new": "- 2026-03-10 — leases in NATS KV — no Redis to run."},
				map[string]string{"op": "delete", "old": deleted + "\n"},
			)
		}},
		{"whole file", archive.ReasonRewrite, func(cur string) string {
			next := strings.Replace(cur, replaced, "- 2026-03-10 — leases in NATS KV — no Redis to run.", 1)
			return jsonReply(true, "merged", strings.Replace(next, deleted+"\n", "", 1))
		}},
	}
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				agent := int64(30 + i)
				var f *fixture
				f = newFixture(t, db, func(llmtest.Received) llmtest.Reply {
					return llmtest.Reply{Content: c.reply(f.memory(agent).Content)}
				})
				f.write(agent, "MEMORY.md", richMemory)
				f.write(agent, "memory/2026-04-02.md", "# 2026-04-02\n\n- The runbook was written; leases need no Redis.\n")
				st, a := f.trigger(agent)
				if st != 200 || a.Data.Status != "completed" {
					t.Fatalf("trigger: %d %+v", st, a)
				}
				if mem := f.memory(agent).Content; strings.Contains(mem, replaced) || strings.Contains(mem, deleted) {
					t.Fatalf("MEMORY.md still holds the old text:\n%s", mem)
				}
				note, err := f.ws.Get(context.Background(), agent, archiveNote)
				if err != nil {
					t.Fatal(err)
				}
				heading := "## 2026-04-03 20:00 +00:00 · MEMORY.md · " + c.reason + " · run " + a.Data.RunID + "\n"
				if strings.Count(note.Content, heading) != 1 || strings.Count(note.Content, replaced+"\n") != 1 ||
					strings.Count(note.Content, deleted+"\n") != 1 || strings.Contains(note.Content, "no Redis to run") {
					t.Fatalf("archive note, want one %q block with the old text only:\n%s", heading, note.Content)
				}
				if runs := f.runs(agent); len(runs) != 1 || strings.Join(runs[0].FilesChanged, ",") != "MEMORY.md,"+archiveNote ||
					strings.Contains(runs[0].Reason, "demoted") {
					t.Fatalf("ledger %+v", runs)
				}
			})
		}
	})
}

// The archive note lies under memory/ beside the daily notes, but it is not emergence's
// input: demoted facts do not flow back into MEMORY.md unasked.
func TestArchiveIsNotEmergenceInput(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		const agent = 40
		f := newFixture(t, db, func(llmtest.Received) llmtest.Reply {
			return llmtest.Reply{Content: jsonReply(false, "nothing recurs", "")}
		})
		f.write(agent, "memory/2026-04-03.md", "# 2026-04-03\n\n- A daily note.\n")
		f.write(agent, archiveNote, archive.Header("2026-04-03")+"## 2026-04-02 10:00 · MEMORY.md · demotion · run r1\n\n- ARCHIVED-FACT-7731\n")
		f.write(agent, "memory/archive/2026-04-02.md", "- ARCHIVED-FACT-7732\n")
		f.write(agent, "memory/archive/2026-04.md", "- ARCHIVED-FACT-7733 (a monthly note, as archives were once named)\n")
		if st, a := f.trigger(agent); st != 200 || a.Data.Status != "skipped" {
			t.Fatalf("trigger: %d %+v", st, a)
		}
		got := f.fake.Received()
		if len(got) != 1 {
			t.Fatalf("%d model calls, want 1", len(got))
		}
		user := got[0].Messages[1].Content
		if !strings.Contains(user, "- A daily note.") || strings.Contains(user, "ARCHIVED-FACT") || strings.Contains(user, "memory/archive") ||
			!strings.Contains(user, "(1 notes, newest first)") {
			t.Fatalf("prompt:\n%s", user)
		}
	})
}

// A MateClaw .txt user template names no budget: it renders as before, and the budget holds
// all the same.
func TestMateClawTemplateWithoutBudget(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		const agent = 41
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "memory"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "memory", "emergence-user.txt"), []byte("{day_range} 天\n{daily_notes}\n---\n{memory}"), 0o644); err != nil {
			t.Fatal(err)
		}
		var f *fixture
		f = newFixture(t, db, func(llmtest.Received) llmtest.Reply {
			return llmtest.Reply{Content: jsonReply(true, "a habit recurs", f.memory(agent).Content+"\n- The user reviews pull requests every morning.\n")}
		}, func(f *fixture) { f.prompts = dir })
		f.write(agent, "MEMORY.md", richMemory)
		f.write(agent, "memory/2026-04-03.md", "# 2026-04-03\n\n- Reviewed pull requests first thing.\n")
		st, a := f.trigger(agent)
		if st != 200 || a.Data.Status != "completed" {
			t.Fatalf("trigger: %d %+v", st, a)
		}
		got := f.fake.Received()
		if len(got) != 1 {
			t.Fatalf("%d model calls, want 1", len(got))
		}
		want := "7 天\n### memory/2026-04-03.md\n# 2026-04-03\n\n- Reviewed pull requests first thing.\n\n---\n" + richMemory
		if user := got[0].Messages[1].Content; user != want {
			t.Fatalf("user prompt\n got %q\nwant %q", user, want)
		}
		if mem := f.memory(agent).Content; !strings.HasSuffix(mem, "- The user reviews pull requests every morning.") {
			t.Fatalf("MEMORY.md %q", mem)
		}
	})
}

// The rewrite guard does not punish the model that obeys: an answer that brings an
// over-budget MEMORY.md within its budget by leaving entries to the archive loses nothing,
// so it is not refused as destructive (issue 29); what it left out is in the archive.
func TestEmergenceShrinkingAnOverBudgetFileIsKept(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		const agent = 23
		var full, kept strings.Builder
		full.WriteString("# MEMORY.md\n\n## Facts\n")
		kept.WriteString("# MEMORY.md\n\n## Facts\n")
		for i := 0; i < 60; i++ {
			l := fmt.Sprintf("- F-%03d: the user's order %d ships from warehouse %d\n", i, i, i%7)
			full.WriteString(l)
			if i >= 50 {
				kept.WriteString(l)
			}
		}
		f := newFixture(t, db, func(llmtest.Received) llmtest.Reply {
			return llmtest.Reply{Content: jsonReply(true, "fitted to the budget", kept.String())}
		})
		budget := 300
		if _, err := f.ws.SetBudgets(context.Background(), agent, &budget, nil); err != nil {
			t.Fatal(err)
		}
		f.write(agent, "MEMORY.md", full.String())
		f.write(agent, "memory/2026-04-03.md", "# 2026-04-03\n\n- Orders reviewed.\n")
		if n := f.ws.CountTokens(full.String()); n <= budget {
			t.Fatalf("the fixture's MEMORY.md is %d tokens, within its budget %d", n, budget)
		}
		st, a := f.trigger(agent)
		if st != 200 || a.Data.RunStatus != store.RunCompleted {
			t.Fatalf("trigger: %d %+v", st, a)
		}
		if mem := f.memory(agent).Content; mem != strings.TrimSpace(kept.String()) {
			t.Fatalf("MEMORY.md:\n%s", mem)
		}
		note, err := f.ws.Get(context.Background(), agent, archiveNote)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 50; i++ {
			if l := fmt.Sprintf("- F-%03d: the user's order %d ships from warehouse %d\n", i, i, i%7); !strings.Contains(note.Content, l) {
				t.Fatalf("%q not in the archive", l)
			}
		}
	})
}

// A MEMORY.md too large for the model's context does not fail the emergence: the service fits
// it by demotion before the call (too large to ask about), the model is asked about the
// fitted file, and what was demoted is in the archive (issue 29).
func TestEmergenceFitsAFileOverTheModelsContext(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		const agent = 24
		var full strings.Builder
		full.WriteString("# MEMORY.md\n\n## Facts\n")
		for i := 0; i < 1300; i++ {
			fmt.Fprintf(&full, "- F-%05d: the order for customer C-%05d ships from warehouse W-%03d on day %d\n", i, i, i%997, i%90)
		}
		var refused atomic.Int32
		f := newFixture(t, db, func(r llmtest.Received) llmtest.Reply {
			size := 0
			for _, m := range r.Messages {
				size += len(m.Content)
			}
			if size > 60_000 {
				refused.Add(1)
				return llmtest.Reply{Status: 400, Content: `{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}`}
			}
			return llmtest.Reply{Content: jsonReply(false, "nothing new", "")}
		})
		budget := 2000
		if _, err := f.ws.SetBudgets(context.Background(), agent, &budget, nil); err != nil {
			t.Fatal(err)
		}
		f.write(agent, "MEMORY.md", full.String())
		f.write(agent, "memory/2026-04-03.md", "# 2026-04-03\n\n- Orders reviewed.\n")
		st, a := f.trigger(agent)
		if st != 200 || a.Data.RunStatus != store.RunCompleted {
			t.Fatalf("trigger: %d %+v", st, a)
		}
		mem := f.memory(agent).Content
		if n := f.ws.CountTokens(mem); n > budget || refused.Load() != 0 {
			t.Fatalf("MEMORY.md %d tokens of %d, %d context refusals", n, budget, refused.Load())
		}
		note, err := f.ws.Get(context.Background(), agent, archiveNote)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(full.String()), "\n") {
			if strings.TrimSpace(l) != "" && !strings.Contains(mem+"\n", l+"\n") && !strings.Contains(note.Content, l+"\n") {
				t.Fatalf("%q lost", l)
			}
		}
	})
}
