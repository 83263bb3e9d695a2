package mcpserver_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/apptest"
	"github.com/matememory/matememory/pkg/internal/npmtest"
	"github.com/matememory/matememory/pkg/internal/tool"
)

// TestTypeScriptSDK runs the official MCP TypeScript SDK (pinned by
// testdata/tsclient/package-lock.json, installed with npm ci into a temporary directory)
// against the app: it lists and calls every tool, reads a resource, receives a change
// notification, and gets an unknown method's error as an McpError (a JSON-RPC error in a
// 200 answer), not as a transport failure. Without npm it is skipped, except under CI=true,
// where it fails.
func TestTypeScriptSDK(t *testing.T) {
	dir := npmtest.Install(t, filepath.Join("testdata", "tsclient"), "package.json", "package-lock.json", "client.mjs")

	a := apptest.Start(t, "k1=1")
	run := exec.Command("node", "client.mjs", "http://"+a.Addr+"/api/v1/agents/1/mcp?language=en", "k1")
	run.Dir = dir
	out, err := run.Output()
	if err != nil {
		t.Fatalf("node client.mjs: %v\n%s", err, out)
	}
	var r struct {
		Tools          []string        `json:"tools"`
		Called         map[string]bool `json:"called"`
		Errors         []string        `json:"errors"`
		Untitled       []string        `json:"untitled"`
		NoOutputSchema []string        `json:"noOutputSchema"`
		BadFilename    string          `json:"badFilename"`
		Resources      []string        `json:"resources"`
		Templates      []string        `json:"templates"`
		Memory         string          `json:"memory"`
		Updated        []string        `json:"updated"`
		UnknownMethod  string          `json:"unknownMethod"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("report %q: %v", out, err)
	}
	if len(r.Errors) > 0 {
		t.Fatalf("the TypeScript client failed:\n%s", strings.Join(r.Errors, "\n"))
	}
	want := append(slices.Concat(tool.Names, tool.MoreNames), tool.SearchMemory, tool.ReadLines)
	for _, name := range want {
		if !slices.Contains(r.Tools, name) || !r.Called[name] {
			t.Errorf("%s: listed %v, called %v", name, slices.Contains(r.Tools, name), r.Called[name])
		}
	}
	if len(r.Tools) != len(want) || len(r.Untitled) > 0 || len(r.NoOutputSchema) > 0 {
		t.Errorf("tools %v; without title %v; without output schema %v", r.Tools, r.Untitled, r.NoOutputSchema)
	}
	if r.UnknownMethod != "McpError -32601" {
		t.Errorf("an unknown method reached the TypeScript client as %q, want an McpError -32601", r.UnknownMethod)
	}
	if !strings.Contains(r.BadFilename, "'..'") {
		t.Errorf("../x.md answered %q", r.BadFilename)
	}
	if !slices.Contains(r.Resources, "memory:///MEMORY.md") || !slices.Equal(r.Templates, []string{"memory:///{+filename}"}) {
		t.Errorf("resources %v, templates %v", r.Resources, r.Templates)
	}
	if f, err := a.Workspace.Get(t.Context(), 1, "MEMORY.md"); err != nil || !strings.HasPrefix(f.Content, r.Memory) || r.Memory == "" {
		t.Errorf("resource MEMORY.md read %q; stored %q (%v)", r.Memory, f.Content, err)
	}
	if !slices.Contains(r.Updated, "memory:///MEMORY.md") {
		t.Errorf("no notifications/resources/updated for memory://MEMORY.md reached the TypeScript client: %v", r.Updated)
	}
}
