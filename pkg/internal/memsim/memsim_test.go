package memsim

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
)

func ask(m Model, user string) map[string]any {
	var out map[string]any
	rep := m.Reply(llmtest.Received{Messages: []llm.Message{{Role: "system", Content: "curate"}, {Role: "user", Content: user}}})
	if err := json.Unmarshal([]byte(rep.Content), &out); err != nil {
		panic(err)
	}
	return out
}

func TestScriptIsDeterministic(t *testing.T) {
	a, b := NewScript(Options{Days: 30, CorrectionShare: 0.2, Seed: 1}), NewScript(Options{Days: 30, CorrectionShare: 0.2, Seed: 1})
	fa, fb := a.Facts(), b.Facts()
	if len(fa) < 360 || len(fa) != len(fb) || fa[100] != fb[100] {
		t.Fatalf("%d and %d facts", len(fa), len(fb))
	}
	fixes := 0
	for _, f := range fa {
		if f.Corrects != "" {
			fixes++
		}
	}
	if fixes < 10 {
		t.Errorf("%d corrections in 180 conversations at 0.2", fixes)
	}
}

func TestModelAccretes(t *testing.T) {
	user := "<memory>\n# MEMORY\n" + Section + "\n- F-000001: the owner of ticket 120 is Priya\n</memory>\n<transcript>\nUser: Please remember\n" +
		"F-000002: the budget code of workstream 300 is BC-7731\nF-000001: correction, it is now Chen Wei\n</transcript>"
	edits := ask(Model{}, user)["memory_edits"].([]any)
	if len(edits) != 2 || edits[0].(map[string]any)["op"] != "add" || edits[1].(map[string]any)["op"] != "replace" {
		t.Fatalf("edits %v", edits)
	}
	whole := ask(Model{Whole: true}, user)["memory_update"].(string)
	if !strings.Contains(whole, "- F-000002: the budget") || !strings.Contains(whole, "- F-000001: correction") || strings.Contains(whole, "Priya") {
		t.Errorf("whole file:\n%s", whole)
	}
	var facts []string
	for i := 0; i < 200; i++ {
		facts = append(facts, fmt.Sprintf("- F-%06d: fact number %d %s", i+1, i, strings.Repeat("x", 20)))
	}
	content := ask(Model{}, "(4000 tokens; budget 500)\n<core_file>\n# MEMORY\n"+Section+"\n"+strings.Join(facts, "\n")+"\n</core_file>")["content"].(string)
	if len(content) > 1500 || !strings.HasPrefix(content, "# MEMORY\n"+Section+"\n") || !strings.Contains(content, facts[199]) {
		t.Errorf("consolidated to %d bytes:\n%.300s", len(content), content)
	}
}
