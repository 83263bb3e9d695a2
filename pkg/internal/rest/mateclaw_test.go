package rest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// TestMateClawRoutes: MateClaw's WorkspaceFileController routes answer on the same service,
// with MateClaw's shapes (200 on a create, content null in listings, the prompt-files list).
func TestMateClawRoutes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		s := start(t, db, "k1=1;k2=2")
		k1, k2 := []string{"Authorization", "Bearer k1"}, []string{"Authorization", "Bearer k2"}
		const base = "/api/v1/agents/1/workspace"

		// A create answers 200 (MateClaw's clients check code 200) and is a new, disabled file.
		r := s.req(t, "PUT", base+"/files/memory/notes.md", `{"content":"# notes"}`, k1...)
		expect(t, r, 200, "")
		var f workspace.File
		r.into(t, &f)
		if f.Filename != "memory/notes.md" || f.Content != "# notes" || f.Enabled || f.Version != 1 {
			t.Fatalf("created %+v", f)
		}
		expect(t, s.req(t, "PUT", base+"/files/memory/notes.md", `{"content":"# notes v2"}`, k1...), 200, "")
		r = s.req(t, "GET", base+"/files/memory/notes.md", "", k1...)
		expect(t, r, 200, "")
		r.into(t, &f)
		if f.Content != "# notes v2" || f.Version != 2 {
			t.Fatalf("read back %+v", f)
		}

		// The listing is an array without content, by sort order then name.
		r = s.req(t, "GET", base+"/files", "", k1...)
		expect(t, r, 200, "")
		var list []map[string]any
		r.into(t, &list)
		var names []string
		for _, e := range list {
			if c, ok := e["content"]; !ok || c != nil {
				t.Fatalf("listing entry has content %v (want null): %v", c, e)
			}
			names = append(names, e["filename"].(string))
		}
		if got := strings.Join(names, ","); got != "AGENTS.md,SOUL.md,PROFILE.md,MEMORY.md,memory/notes.md" {
			t.Fatalf("listing %s", got)
		}

		// prompt-files: GET the enabled files in order; PUT a new ordered list.
		var pf []string
		r = s.req(t, "GET", base+"/prompt-files", "", k1...)
		expect(t, r, 200, "")
		r.into(t, &pf)
		if strings.Join(pf, ",") != "AGENTS.md,SOUL.md,PROFILE.md,MEMORY.md" {
			t.Fatalf("prompt files %v", pf)
		}
		r = s.req(t, "PUT", base+"/prompt-files", `{"files":["MEMORY.md","memory/notes.md","AGENTS.md"]}`, k1...)
		expect(t, r, 200, "")
		r = s.req(t, "GET", base+"/prompt-files", "", k1...)
		r.into(t, &pf)
		if strings.Join(pf, ",") != "MEMORY.md,memory/notes.md,AGENTS.md" {
			t.Fatalf("prompt files after PUT %v", pf)
		}
		prompt, err := s.ws.SystemPrompt(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		iM, iN, iA := strings.Index(prompt, "--- MEMORY.md ---"), strings.Index(prompt, "--- memory/notes.md ---"), strings.Index(prompt, "--- AGENTS.md ---")
		if iM != 0 || iN < iM || iA < iN || strings.Contains(prompt, "--- SOUL.md ---") {
			t.Fatalf("system prompt does not follow the prompt files:\n%s", prompt)
		}
		if h, _ := s.ws.History(context.Background(), 1, "SOUL.md"); len(h) != 1 || h[0].Action != "flags" || !h[0].Enabled {
			t.Fatalf("disabling SOUL.md left no history: %+v", h)
		}
		// An unknown name changes nothing.
		expect(t, s.req(t, "PUT", base+"/prompt-files", `{"files":["SOUL.md","nope.md"]}`, k1...), 404, "nope.md")
		expect(t, s.req(t, "PUT", base+"/prompt-files", `{"files":["SOUL.md","SOUL.md"]}`, k1...), 400, "twice")
		expect(t, s.req(t, "PUT", base+"/prompt-files", `{}`, k1...), 400, "files is required")
		r = s.req(t, "GET", base+"/prompt-files", "", k1...)
		r.into(t, &pf)
		if strings.Join(pf, ",") != "MEMORY.md,memory/notes.md,AGENTS.md" {
			t.Fatalf("a refused PUT changed the prompt files: %v", pf)
		}

		// DELETE, and the agent scope holds on every route.
		expect(t, s.req(t, "DELETE", base+"/files/memory/notes.md", "", k1...), 200, "")
		expect(t, s.req(t, "GET", base+"/files/memory/notes.md", "", k1...), 404, "not found")
		for _, c := range []struct{ method, path, body string }{
			{"GET", base + "/files", ""}, {"GET", base + "/files/MEMORY.md", ""},
			{"PUT", base + "/files/MEMORY.md", `{"content":"pwned"}`}, {"DELETE", base + "/files/MEMORY.md", ""},
			{"GET", base + "/prompt-files", ""}, {"PUT", base + "/prompt-files", `{"files":[]}`},
		} {
			expect(t, s.req(t, c.method, c.path, c.body, k2...), 403, "agent 1")
		}
	})
}
