package summarizer

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// TestForcedManualSummarize: after a refused run, a manual summarize with force re-extracts
// the conversation already extracted (under the lease), rewrites MEMORY.md this time, and
// does not append the daily entry of the same message range a second time. Without force
// the same request says it is already extracted.
func TestForcedManualSummarize(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		var good atomic.Bool
		long := "# MEMORY.md\n\n- Project Apollo: the migration to MariaDB is planned for the second quarter.\n" +
			"- Decision: SQLite for the embedded mode, MariaDB in production clusters.\n" +
			"- Alice owns the release checklist and Bob the benchmark report.\n" +
			"- The beta deadline is 2026-05-01 and must not slip.\n"
		fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
			mem := "# MEMORY.md\n\n- The user likes tea." // destructive: refused
			if good.Load() {
				mem = long + "- The user plans the release with a checklist."
			}
			return answer(map[string]any{"should_update": true, "reason": "r", "daily_entry": "- planned the release",
				"memory_update": mem, "profile_update": ""})
		})
		h := newHarness(t, db, withLLM(fake), withSettings(func(s *Settings) { s.ManualTimeout = 60 * time.Second }))
		ctx := context.Background()
		f, err := h.ws.Get(ctx, 3, "MEMORY.md")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := h.ws.Write(ctx, 3, "MEMORY.md", long, f.Version, workspace.Change{Actor: store.ActorAPI}); err != nil {
			t.Fatal(err)
		}
		h.conversation(3, "c1", "t3-1", 4)
		h.worker(h.service("w1"))
		srv := h.httpServer()
		url := srv.URL + "/api/v1/memory/3/summarize/c1"
		type outcome struct{ Status, Reason, RunID string }
		post := func(query, body string) (int, outcome, string) {
			st, r := call(t, "POST", url+query, "", body)
			var o outcome
			_ = json.Unmarshal(r.Data, &o)
			return st, o, r.Msg
		}

		if st, o, msg := post("", ""); st != 200 || o.Status != store.RunRefused {
			t.Fatalf("first run: %d %+v %s; want refused", st, o, msg)
		}
		good.Store(true)
		if st, o, _ := post("", ""); st != 200 || o.Status != store.RunSkipped || !strings.Contains(o.Reason, "already extracted") {
			t.Fatalf("without force: %d %+v; want skipped, already extracted", st, o)
		}
		calls := fake.Calls.Load()
		st, o, msg := post("?force=true", "")
		if st != 200 || o.Status != store.RunCompleted || !strings.HasPrefix(o.Reason, "force: ") {
			t.Fatalf("forced: %d %+v %s; want completed", st, o, msg)
		}
		if fake.Calls.Load() != calls+1 {
			t.Fatalf("forced run made %d LLM calls, want 1", fake.Calls.Load()-calls)
		}
		if mem, _ := h.file(3, "MEMORY.md"); !strings.Contains(mem.Content, "plans the release with a checklist") {
			t.Fatalf("MEMORY.md not rewritten by the forced run:\n%s", mem.Content)
		}
		// The same range again, by body this time: the daily entry is still there once.
		if st, o, msg := post("", `{"force": true}`); st != 200 || o.Status == store.RunFailed {
			t.Fatalf("second forced run: %d %+v %s", st, o, msg)
		}
		notes, _ := h.ws.ListContent(ctx, 3, "memory/", 0)
		if len(notes) != 1 || strings.Count(notes[0].Content, "planned the release") != 1 {
			t.Fatalf("daily notes after forced runs: %+v; want the entry once", notes)
		}
		if st, _, msg := post("?force=maybe", ""); st != 400 || !strings.Contains(msg, "force must be true or false") {
			t.Fatalf("bad force: %d %s", st, msg)
		}
		if st, _, msg := post("", `{"forse": true}`); st != 400 || !strings.Contains(msg, "unknown field") {
			t.Fatalf("misspelt body: %d %s", st, msg)
		}
	})
}
