package mcpserver_test

import (
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/apptest"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/tool"
)

// A fact written by the tool over MCP is found by search_workspace_memory over MCP within
// 2 s, in Chinese and in English, and the other agent never sees it.
func TestMCPSearchFindsNewFactAndNotOtherAgents(t *testing.T) {
	a := apptest.Start(t, "k1=1;k2=2")
	cs1, err := connectHTTP(t, a, "1", "k1", "")
	if err != nil {
		t.Fatal(err)
	}
	cs2, err := connectHTTP(t, a, "2", "k2", "")
	if err != nil {
		t.Fatal(err)
	}
	day := time.Now().UTC().Format(time.DateOnly)
	note := "# " + day + "\n\n用户的新服务器叫 atlas-db-09，放在法兰克福机房。\n\nThe user's cat Pixel prefers salmon over tuna.\n"
	var w tool.WriteResult
	ok(t, call(t, cs1, tool.WriteFile, map[string]any{"filename": "memory/" + day + ".md", "content": note}), &w)
	written := time.Now()

	find := func(q, want string) bool {
		var r recall.Result
		ok(t, call(t, cs1, tool.SearchMemory, map[string]any{"query": q}), &r)
		for _, h := range r.Hits {
			if strings.Contains(h.Snippet, want) && h.Filename == "memory/"+day+".md" && h.StartLine >= 1 {
				return true
			}
		}
		return false
	}
	for _, q := range []struct{ q, want string }{{"法兰克福的服务器", "atlas-db-09"}, {"what does the cat Pixel prefer", "Pixel"}} {
		deadline := written.Add(2 * time.Second)
		for !find(q.q, q.want) {
			if time.Now().After(deadline) {
				t.Fatalf("%q not found within 2 s of the write", q.q)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	var r recall.Result
	ok(t, call(t, cs2, tool.SearchMemory, map[string]any{"query": "atlas-db-09 Pixel salmon 法兰克福"}), &r)
	for _, h := range r.Hits {
		if strings.Contains(h.Snippet, "atlas") || strings.Contains(h.Snippet, "Pixel") {
			t.Fatalf("agent 2 sees agent 1's memory: %+v", h)
		}
	}
	// The line range reads back through the lines tool.
	var lr tool.LinesResult
	ok(t, call(t, cs1, tool.ReadLines, map[string]any{"filename": "memory/" + day + ".md", "startLine": 3, "endLine": 3}), &lr)
	if !strings.Contains(lr.Content, "atlas-db-09") || lr.TotalLines != 5 {
		t.Fatalf("lines = %+v", lr)
	}
	// Bad input is a tool error with a message.
	res := call(t, cs1, tool.SearchMemory, map[string]any{"query": "  "})
	if !res.IsError || !strings.Contains(text(t, res), "query is empty") {
		t.Fatalf("empty query: %v %s", res.IsError, text(t, res))
	}
}
