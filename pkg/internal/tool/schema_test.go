package tool_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/tool"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// The filename schema (validated by jsonschema-go, as MCP does) accepts exactly the names
// workspace.ValidateName accepts.
func TestFilenameSchemaMatchesValidateName(t *testing.T) {
	tools := tool.New(workspace.New(storetest.SQLite(t).DB))
	var params struct {
		Properties map[string]*jsonschema.Schema `json:"properties"`
	}
	var write tool.Definition
	for _, d := range tools.FullDefinitions("en") {
		if d.Function.Name == tool.WriteFile {
			write = d
		}
	}
	if err := json.Unmarshal(write.Function.Parameters, &params); err != nil {
		t.Fatal(err)
	}
	rs, err := params.Properties["filename"].Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{
		"MEMORY.md", "memory/2026-04-01.md", "a/b/c.md", "记忆/笔记.md", "x.md", ".a.md", "a.b.md",
		"a b/c d.md", "a .md", "a. b.md", ". a/x.md", "a/.x.md", "md.md", "a.md.md",
		"../x.md", "/etc/a.md", "a.txt", "memory/../../x.md", "..", ".md", "a/.md", "a..b.md",
		"\\x.md", "a\\b.md", "C:/x.md", "c:x.md", "a\x00.md", "a\n.md", "a\u202e.md", "a\u200b.md",
		"./a.md", "a/./b.md", "a//b.md", "a/", " a.md", "a /b.md", "a.MD", "a.md ", "a\u00a0/b.md",
		"a\u3000.md", "a\u3000b.md", ". /a.md", "./.md", "a/. .md", "1:x.md", "a:b.md",
		strings.Repeat("a", 253) + ".md", strings.Repeat("a", 254) + ".md", "",
	}
	for _, n := range names {
		want := workspace.ValidateName(n) == nil
		got := rs.Validate(n) == nil
		if got != want {
			t.Errorf("%q: schema accepts=%v, ValidateName accepts=%v", n, got, want)
		}
	}
}

// Every full definition is a closed object schema with a description per argument.
func TestFullDefinitions(t *testing.T) {
	tools := tool.New(workspace.New(storetest.SQLite(t).DB, workspace.WithMaxBytes(1000)))
	defs := tools.FullDefinitions("zh")
	if len(defs) != len(tool.Names)+len(tool.MoreNames) {
		t.Fatalf("%d definitions", len(defs))
	}
	for _, d := range defs {
		var s jsonschema.Schema
		if err := json.Unmarshal(d.Function.Parameters, &s); err != nil {
			t.Fatalf("%s: %v", d.Function.Name, err)
		}
		if _, err := s.Resolve(nil); err != nil {
			t.Fatalf("%s: schema does not resolve: %v", d.Function.Name, err)
		}
		if d.Function.Name == tool.WriteFile && (s.Properties["content"].MaxLength == nil || *s.Properties["content"].MaxLength != 1000) {
			t.Errorf("content maxLength = %v, want the workspace limit 1000", s.Properties["content"].MaxLength)
		}
		if d.Function.Name == tool.EditFile && (s.Properties["oldText"].MinLength == nil || *s.Properties["oldText"].MinLength != 1) {
			t.Errorf("oldText minLength = %v, want 1", s.Properties["oldText"].MinLength)
		}
	}
}
