package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/tool"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// History, rollback, append and delete act on the caller's agent only, and each change is a
// tool change in the file's history.
func TestMoreTools(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ws := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"))
		tools := tool.New(ws)
		ctx := tool.WithRef(context.Background(), "call_more")
		if _, err := call(t, tools, ctx, 1, tool.WriteFile, `{"filename":"n.md","content":"one"}`); err != nil {
			t.Fatal(err)
		}
		ap, err := callFull(t, tools, ctx, 1, tool.AppendFile, `{"filename":"n.md","text":"two"}`)
		if err != nil || ap["version"] != 2.0 || ap["fileSizeAfter"] != float64(len("one\n\ntwo")) || ap["bytesAppended"] != 3.0 {
			t.Fatalf("append: %v %v", ap, err)
		}
		h, err := callFull(t, tools, ctx, 1, tool.HistoryFile, `{"filename":"n.md","includeContent":true}`)
		if err != nil || h["currentVersion"] != 2.0 || h["count"] != 1.0 {
			t.Fatalf("history: %v %v", h, err)
		}
		e := h["entries"].([]any)[0].(map[string]any)
		if e["version"] != 1.0 || e["content"] != "one" || e["actor"] != "tool" {
			t.Fatalf("history entry %v", e)
		}
		rb, err := callFull(t, tools, ctx, 1, tool.RollbackFile, `{"filename":"n.md","version":1}`)
		if err != nil || rb["version"] != 3.0 || rb["fromVersion"] != 1.0 {
			t.Fatalf("rollback: %v %v", rb, err)
		}
		if f, _ := ws.Get(ctx, 1, "n.md"); f.Content != "one" {
			t.Fatalf("after rollback %q", f.Content)
		}
		// Agent 2 has no n.md: every tool says so and changes nothing of agent 1's.
		for _, name := range []string{tool.HistoryFile, tool.DeleteFile} {
			if _, err := tools.CallFull(ctx, 2, name, []byte(`{"filename":"n.md"}`)); err == nil || !strings.Contains(err.Error(), "not found") {
				t.Fatalf("%s for agent 2: %v", name, err)
			}
		}
		// The REST execution endpoint's Call does not run them.
		if _, err := tools.Call(ctx, 1, tool.DeleteFile, []byte(`{"filename":"n.md"}`)); !errors.Is(err, tool.ErrUnknownTool) {
			t.Fatalf("Call ran %s: %v", tool.DeleteFile, err)
		}
		d, err := callFull(t, tools, ctx, 1, tool.DeleteFile, `{"filename":"n.md"}`)
		if err != nil || d["deleted"] != true {
			t.Fatalf("delete: %v %v", d, err)
		}
		if _, err := ws.Get(ctx, 1, "n.md"); err == nil {
			t.Fatal("n.md still there after delete")
		}
		for _, c := range []struct{ tool, args, msg string }{
			{tool.RollbackFile, `{"filename":"MEMORY.md","version":9}`, "not a previous version"},
			{tool.RollbackFile, `{"filename":"MEMORY.md"}`, "version is required"},
			{tool.AppendFile, `{"filename":"a.md","text":""}`, "text is empty"},
			{tool.DeleteFile, `{"filename":"a.md","agentId":1}`, "agentId is not an argument"},
			{tool.HistoryFile, `{"filename":"MEMORY.md","all":true}`, "accepted: filename, includeContent"},
		} {
			_, err := tools.CallFull(ctx, 1, c.tool, []byte(c.args))
			if st, msg := httpapi.Classify(err); st != 400 || !strings.Contains(msg, c.msg) {
				t.Errorf("%s %s: %d %q, want 400 with %q", c.tool, c.args, st, msg, c.msg)
			}
		}
	})
}

func callFull(t *testing.T, tools *tool.Tools, ctx context.Context, agent int64, name, args string) (map[string]any, error) {
	t.Helper()
	res, err := tools.CallFull(ctx, agent, name, json.RawMessage(args))
	if err != nil {
		return nil, err
	}
	b, _ := json.Marshal(res)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m, nil
}
