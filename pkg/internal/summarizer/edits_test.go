package summarizer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/prompt"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

const editsMemory = "# MEMORY.md\n\n## Preferences\n- likes coffee\n\n## Projects\n- Apollo: migration in Q2\n- Hermes: paused\n"

// seedFile writes name's content for the agent as a person would (over REST).
func seedFile(t *testing.T, h *harness, agentID int64, name, content string) {
	t.Helper()
	ctx := context.Background()
	expect := workspace.CreateOnly
	if f, err := h.ws.Get(ctx, agentID, name); err == nil {
		expect = f.Version
	}
	if _, _, err := h.ws.Write(ctx, agentID, name, content, expect, workspace.Change{Actor: store.ActorAPI}); err != nil {
		t.Fatal(err)
	}
}

func dailyNotes(t *testing.T, h *harness, agentID int64) string {
	t.Helper()
	notes, err := h.ws.ListContent(context.Background(), agentID, "memory/", 0)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, n := range notes {
		b.WriteString(n.Content)
	}
	return b.String()
}

// Edits instead of whole files: each file's edits land exactly, and the output budget asked
// of the model is sized from the change, not from the (here large) files.
func TestEditsAppliedExactly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		var maxTokens atomic.Int64
		fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
			maxTokens.Store(int64(r.MaxTokens + r.MaxCompletionTokens))
			return answer(map[string]any{"should_update": true, "reason": "r", "daily_entry": "- talked about tea",
				"memory_edits": []map[string]string{
					{"op": "add", "under": "## Preferences", "text": "- likes tea"},
					{"op": "replace", "old": "migration in Q2", "new": "migration in Q3"},
					{"op": "delete", "old": "- Hermes: paused"},
				},
				"profile_edits": []map[string]string{{"op": "add", "text": "- Name: Alice"}},
			})
		})
		h := newHarness(t, db, withLLM(fake))
		// A large MEMORY.md, within a budget raised for it (the budget's consolidation and
		// demotion have tests of their own).
		big := 20000
		if _, err := h.ws.SetBudgets(context.Background(), 11, &big, nil); err != nil {
			t.Fatal(err)
		}
		padding := strings.Repeat("- an old fact that stays as it is, one of many.\n", 200)
		seedFile(t, h, 11, "MEMORY.md", editsMemory+padding)
		seedFile(t, h, 11, "PROFILE.md", "# PROFILE.md\n")
		h.conversation(11, "c1", "t11", 4)
		h.worker(h.service("w1"))
		h.publish(completed(11, "c1", "e-edits", 4))
		poll.Until(t, 20*time.Second, "settled", func() bool { return h.settled() && len(h.runs("e-edits")) > 0 })

		mem, _ := h.file(11, "MEMORY.md")
		want := "# MEMORY.md\n\n## Preferences\n- likes coffee\n- likes tea\n\n## Projects\n- Apollo: migration in Q3\n" + padding
		if mem.Content != want {
			t.Fatalf("MEMORY.md\n got %q\nwant %q", mem.Content, want)
		}
		if prof, _ := h.file(11, "PROFILE.md"); prof.Content != "# PROFILE.md\n- Name: Alice\n" {
			t.Fatalf("PROFILE.md = %q", prof.Content)
		}
		if !strings.Contains(dailyNotes(t, h, 11), "- talked about tea\n") {
			t.Fatalf("daily note lacks the entry: %q", dailyNotes(t, h, 11))
		}
		r := h.runs("e-edits")[0]
		if r.Status != store.RunCompleted || len(r.FilesChanged) != 4 || r.FilesChanged[0] != "PROFILE.md" || r.FilesChanged[1] != "MEMORY.md" ||
			!strings.HasPrefix(r.FilesChanged[3], "memory/archive/") {
			t.Fatalf("run %+v", r)
		}
		// What the edits replaced and deleted is in the archive, verbatim, with the run.
		arch, _ := h.file(11, r.FilesChanged[3])
		if !strings.Contains(arch.Content, "· MEMORY.md · edit · run "+r.RunID+"\n") || !strings.Contains(arch.Content, "\n- Apollo: migration in Q2\n") ||
			!strings.Contains(arch.Content, "\n- Hermes: paused\n") || strings.Contains(arch.Content, "likes coffee") || arch.Enabled {
			t.Fatalf("archive:\n%s", arch.Content)
		}
		// The whole-file budget would be 1000 + the files' bytes / 3 (about 4,000 here).
		if got := maxTokens.Load(); got != 2*int64(h.set.Memory.SummaryMaxTokens) {
			t.Fatalf("max tokens %d, want %d (sized from the change)", got, 2*h.set.Memory.SummaryMaxTokens)
		}
	})
}

// A missing or ambiguous anchor refuses that file's edits, all of them: the file is left as
// it was, the reason is in the ledger, the other file's edits and the daily note still land,
// and the model is not asked again.
func TestEditAnchorRefusedLeavesTheFile(t *testing.T) {
	cases := []struct {
		name   string
		edits  []map[string]string
		reason string
	}{
		{"missing heading", []map[string]string{
			{"op": "replace", "old": "migration in Q2", "new": "migration in Q3"},
			{"op": "add", "under": "## Hobbies", "text": "- chess"}},
			`MEMORY.md: memory_edits refused, file unchanged: edit 2 (add): heading "## Hobbies" not found`},
		{"ambiguous text", []map[string]string{{"op": "delete", "old": "- likes"}},
			`MEMORY.md: memory_edits refused, file unchanged: edit 1 (delete): text "- likes" is ambiguous: it occurs 2 times`},
	}
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				var calls atomic.Int32
				fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
					calls.Add(1)
					return answer(map[string]any{"should_update": true, "reason": "r", "daily_entry": "- talked about chess",
						"memory_edits": c.edits, "profile_edits": []map[string]string{{"op": "add", "text": "- Name: Alice"}}})
				})
				h := newHarness(t, db, withLLM(fake))
				agent := int64(20 + i)
				memory := editsMemory + "- likes tea\n"
				seedFile(t, h, agent, "MEMORY.md", memory)
				seedFile(t, h, agent, "PROFILE.md", "# PROFILE.md\n")
				h.conversation(agent, "c1", "t", 4)
				h.worker(h.service("w1"))
				event := fmt.Sprintf("e-anchor-%d", i)
				h.publish(completed(agent, "c1", event, 4))
				poll.Until(t, 20*time.Second, "settled", func() bool { return h.settled() && len(h.runs(event)) > 0 })

				if mem, _ := h.file(agent, "MEMORY.md"); mem.Content != memory {
					t.Fatalf("MEMORY.md changed:\n%s", mem.Content)
				}
				if prof, _ := h.file(agent, "PROFILE.md"); prof.Content != "# PROFILE.md\n- Name: Alice\n" {
					t.Fatalf("PROFILE.md = %q", prof.Content)
				}
				if !strings.Contains(dailyNotes(t, h, agent), "- talked about chess\n") {
					t.Fatal("the daily note did not land")
				}
				r := h.runs(event)
				if len(r) != 1 || r[0].Status != store.RunRefused || !strings.Contains(r[0].Reason, c.reason) ||
					len(r[0].FilesChanged) != 2 || r[0].FilesChanged[0] != "PROFILE.md" || !strings.HasPrefix(r[0].FilesChanged[1], "memory/") {
					t.Fatalf("runs %+v\nwant reason %q", r, c.reason)
				}
				if calls.Load() != 1 {
					t.Fatalf("LLM called %d times, want 1 (no retry after a refused edit)", calls.Load())
				}
				refused := counterValue(t, h.metrics.CoreChanges, "MEMORY.md", "edits", "refused")
				written := counterValue(t, h.metrics.CoreChanges, "PROFILE.md", "edits", "written")
				if refused != 1 || written != 1 {
					t.Fatalf("core changes: MEMORY.md edits refused %v, PROFILE.md edits written %v; want 1 and 1", refused, written)
				}
			})
		}
	})
}

// A tool edit of MEMORY.md that lands while the model is thinking survives edits too: the
// write against the version read fails, the summarizer re-reads and asks again, and the
// edits apply to the file with the tool's change.
func TestToolEditDuringEditsExtractionSurvives(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		var h *harness
		var calls atomic.Int32
		fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
			if calls.Add(1) == 1 {
				if _, err := h.ws.Append(context.Background(), 12, "MEMORY.md", "- TOOL: the user moved to Berlin.\n", "",
					workspace.Change{Actor: store.ActorTool}); err != nil {
					t.Errorf("tool edit: %v", err)
				}
			}
			return answer(map[string]any{"should_update": true, "reason": "r", "daily_entry": "- talked",
				"memory_edits":  []map[string]string{{"op": "add", "under": "## Preferences", "text": "- SUMMARIZER: likes tea"}},
				"profile_edits": []map[string]string{{"op": "add", "text": "- Name: Alice"}}})
		})
		h = newHarness(t, db, withLLM(fake))
		seedFile(t, h, 12, "MEMORY.md", editsMemory)
		seedFile(t, h, 12, "PROFILE.md", "# PROFILE.md\n")
		h.conversation(12, "c1", "t12", 4)
		h.worker(h.service("w1"))
		h.publish(completed(12, "c1", "e-tool-edits", 4))
		poll.Until(t, 20*time.Second, "settled", func() bool { return h.settled() && len(h.runs("e-tool-edits")) > 0 })
		mem, _ := h.file(12, "MEMORY.md")
		if !strings.Contains(mem.Content, "- likes coffee\n- SUMMARIZER: likes tea\n\n## Projects") ||
			!strings.HasSuffix(mem.Content, "- TOOL: the user moved to Berlin.\n") {
			t.Fatalf("MEMORY.md lost an update:\n%s", mem.Content)
		}
		if calls.Load() != 2 {
			t.Fatalf("LLM called %d times, want 2 (asked again after the conflict)", calls.Load())
		}
		// PROFILE.md's edits landed in the first round: the second round's answer does not
		// apply them again (an add is not idempotent).
		if prof, _ := h.file(12, "PROFILE.md"); prof.Content != "# PROFILE.md\n- Name: Alice\n" {
			t.Fatalf("PROFILE.md = %q", prof.Content)
		}
		if r := h.runs("e-tool-edits"); len(r) != 1 || r[0].Status != store.RunCompleted {
			t.Fatalf("runs %+v", r)
		}
	})
}

// The output budget follows what the template asks for: the default templates ask for edits
// (summary-max-tokens twice, whatever the files' size), the spec's whole-file templates get
// room for the files.
func TestOutputBudgetFollowsTheTemplate(t *testing.T) {
	var got atomic.Int64
	fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
		got.Store(int64(r.MaxTokens + r.MaxCompletionTokens))
		return llmtest.Reply{Content: `{"should_update":false,"reason":"","daily_entry":""}`}
	})
	memory := strings.Repeat("- a fact of many.\n", 500) // 9,000 bytes
	cases := []struct {
		name    string
		prompts *prompt.Loader
		want    int
	}{
		{"default templates ask for edits", prompt.NewLoader(""), 2000},
		{"the spec's whole-file templates", prompt.NewLoader("testdata/spec-prompt"), 1000 + len(memory)/3},
	}
	for _, c := range cases {
		for _, lang := range []string{"zh", "en"} {
			p := &llmProvider{c: llm.NewOpenAI(fake.Config()), prompts: c.prompts, json: true, maxTokens: 1000, m: NewMetrics(nil)}
			if _, err := p.extract(context.Background(), extractInput{Language: lang, Date: "2026-12-01", Memory: memory,
				Messages: []store.Message{{ID: 1, ConversationID: "c", Role: "user", Content: "hi"}}}); err != nil {
				t.Fatal(err)
			}
			if int(got.Load()) != c.want {
				t.Errorf("%s (%s): max tokens %d, want %d", c.name, lang, got.Load(), c.want)
			}
		}
	}
}

// The file edits produce passes the same guard as a whole file: a secret an edit brings is
// masked, and edits that delete most of the file are refused like a destructive rewrite.
func TestEditsPassTheGuard(t *testing.T) {
	long := "# MEMORY.md\n\n## Projects\n" +
		"- Project Apollo: the migration to MariaDB is planned for the second quarter.\n" +
		"- Decision: SQLite for the embedded mode, MariaDB in production clusters.\n" +
		"- Alice owns the release checklist and Bob the benchmark report.\n" +
		"- The beta deadline is 2026-05-01 and must not slip.\n"
	cases := []struct {
		name  string
		edits []map[string]string
		check func(t *testing.T, mem string, r []ledger.Run)
	}{
		{"a secret is masked", []map[string]string{{"op": "add", "under": "## Projects", "text": "- CI key: sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz012345"}},
			func(t *testing.T, mem string, r []ledger.Run) {
				if !strings.HasSuffix(mem, "- CI key: [REDACTED]\n") || r[0].Status != store.RunCompleted {
					t.Fatalf("MEMORY.md %q, runs %+v", mem, r)
				}
			}},
		{"deleting most of the file is refused", []map[string]string{
			{"op": "delete", "old": "- Project Apollo: the migration to MariaDB is planned for the second quarter."},
			{"op": "delete", "old": "- Decision: SQLite for the embedded mode, MariaDB in production clusters."},
			{"op": "delete", "old": "- Alice owns the release checklist and Bob the benchmark report."}},
			func(t *testing.T, mem string, r []ledger.Run) {
				if mem != long || r[0].Status != store.RunRefused || !strings.Contains(r[0].Reason, "MEMORY.md: rewrite refused") {
					t.Fatalf("MEMORY.md %q, runs %+v", mem, r)
				}
			}},
	}
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
					return answer(map[string]any{"should_update": true, "reason": "r", "daily_entry": "- talked", "memory_edits": c.edits})
				})
				h := newHarness(t, db, withLLM(fake))
				agent := int64(30 + i)
				seedFile(t, h, agent, "MEMORY.md", long)
				h.conversation(agent, "c1", "t", 4)
				h.worker(h.service("w1"))
				event := fmt.Sprintf("e-guard-%d", i)
				h.publish(completed(agent, "c1", event, 4))
				poll.Until(t, 20*time.Second, "settled", func() bool { return h.settled() && len(h.runs(event)) > 0 })
				mem, _ := h.file(agent, "MEMORY.md")
				c.check(t, mem.Content, h.runs(event))
			})
		}
	})
}

// A file's edits commit with the daily append and the watermarks, or not at all: an
// extraction that fails before its commit (a crash) has not edited MEMORY.md, so the
// redelivery's extraction, answered with the same edits, adds the line once, not twice.
func TestEditsCommitWithTheDailyNote(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
			return answer(map[string]any{"should_update": true, "reason": "r", "daily_entry": "- talked about tea",
				"memory_edits": []map[string]string{{"op": "add", "under": "## Preferences", "text": "- likes tea"}}})
		})
		h := newHarness(t, db, withLLM(fake))
		seedFile(t, h, 13, "MEMORY.md", editsMemory)
		h.conversation(13, "c1", "t13", 4)
		svc := h.service("w1")
		var crashes atomic.Int32
		svc.hookBeforeCommit = func() error {
			if crashes.Add(1) == 1 {
				return errors.New("simulated crash")
			}
			return nil
		}
		h.worker(svc)
		h.publish(completed(13, "c1", "e-edits-crash", 4))
		poll.Until(t, 20*time.Second, "settled", func() bool {
			r := h.runs("e-edits-crash")
			return h.settled() && len(r) > 0 && r[0].Status == store.RunCompleted
		})
		mem, _ := h.file(13, "MEMORY.md")
		if n := strings.Count(mem.Content, "- likes tea\n"); n != 1 {
			t.Fatalf("the edit applied %d times:\n%s", n, mem.Content)
		}
		if n := strings.Count(dailyNotes(t, h, 13), "- talked about tea\n"); n != 1 {
			t.Fatalf("the daily entry appended %d times", n)
		}
		if crashes.Load() < 2 {
			t.Fatalf("the commit hook ran %d times, want the crash and the redelivery", crashes.Load())
		}
	})
}

func counterValue(t *testing.T, c prometheus.Collector, file, form, result string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["file"] == file && labels["form"] == form && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
