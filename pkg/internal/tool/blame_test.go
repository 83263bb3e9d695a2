package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/blame"
	"github.com/matememory/matememory/pkg/internal/fault"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/tool"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// blame_workspace_memory_file answers, for the caller's agent, each line with the change
// that introduced it (and the run behind a pipeline's change) and, only when another
// change kept it since, the change that last confirmed it.
func TestBlameTool(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ws := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"))
		led := ledger.New(db.DB, nil)
		tools := tool.New(ws)
		tools.EnableBlame(blame.New(ws, led))
		ctx := tool.WithRef(context.Background(), "call_1")
		if _, err := call(t, tools, ctx, 1, tool.WriteFile, `{"filename":"n.md","content":"# N\n- one\n"}`); err != nil {
			t.Fatal(err)
		}
		if _, err := led.Record(ctx, ledger.Run{RunID: "run-e", Kind: ledger.KindEmergence, AgentID: 1, EventID: "ev-2",
			Conversations: []string{"c-1", "c-2"}, Status: store.RunCompleted}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ws.Write(ctx, 1, "n.md", "# N\n- one\n- two\n", workspace.AnyVersion, workspace.Change{Actor: store.ActorEmergence, Ref: "run-e"}); err != nil {
			t.Fatal(err)
		}
		res, err := tools.CallFull(ctx, 1, tool.BlameFile, json.RawMessage(`{"filename":"n.md"}`))
		if err != nil {
			t.Fatal(err)
		}
		b := res.(tool.BlameResult)
		if b.Version != 2 || b.TotalLines != 3 || b.StartLine != 1 || b.EndLine != 3 || len(b.Lines) != 3 {
			t.Fatalf("blame: %+v", b)
		}
		two := b.Lines[2]
		if two.Line != 3 || two.Text != "- two" || two.Introduced.Version != 2 || two.Introduced.Actor != store.ActorEmergence ||
			two.Introduced.Run != "run-e" || two.Introduced.RunKind != ledger.KindEmergence || two.Introduced.EventID != "ev-2" ||
			strings.Join(two.Introduced.Conversations, ",") != "c-1,c-2" || two.Confirmed != nil {
			t.Errorf("emergence's line: %+v", two)
		}
		one := b.Lines[1]
		if one.Introduced.Version != 1 || one.Confirmed == nil || one.Confirmed.Version != 2 || one.Confirmed.Run != "run-e" {
			t.Errorf("the tool's line kept by emergence: %+v (confirmed %+v)", one, one.Confirmed)
		}
		// The answer is compact: no field repeats what the line's introduction already says.
		raw, _ := json.Marshal(two)
		if strings.Contains(string(raw), "confirmed") {
			t.Errorf("an unconfirmed line carries confirmed: %s", raw)
		}

		// A range.
		part, err := callFull(t, tools, ctx, 1, tool.BlameFile, `{"filename":"n.md","startLine":2,"endLine":2}`)
		if err != nil || part["startLine"] != 2.0 || part["endLine"] != 2.0 || len(part["lines"].([]any)) != 1 {
			t.Fatalf("range: %v %v", part, err)
		}

		// Refusals: another agent's file, bad names and arguments, a range past the end.
		for _, c := range []struct {
			agent int64
			args  string
			kind  error
			msg   string
		}{
			{2, `{"filename":"n.md"}`, fault.ErrNotFound, "not found"},
			{1, `{"filename":"../x.md"}`, fault.ErrInvalid, "filename"},
			{1, `{}`, fault.ErrInvalid, "filename is required"},
			{1, `{"filename":"n.md","agentId":2}`, fault.ErrInvalid, "agentId is not an argument"},
			{1, `{"filename":"n.md","all":true}`, fault.ErrInvalid, "accepted: filename, startLine, endLine"},
			{1, `{"filename":"n.md","startLine":5}`, fault.ErrInvalid, "past the end"},
			{1, `{"filename":"n.md","startLine":1,"endLine":401}`, fault.ErrInvalid, "at most 400 lines"},
			{1, `{"filename":"n.md","startLine":3,"endLine":2}`, fault.ErrInvalid, "before startLine"},
		} {
			_, err := tools.CallFull(ctx, c.agent, tool.BlameFile, json.RawMessage(c.args))
			if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("agent %d %s: %v, want %v with %q", c.agent, c.args, err, c.kind, c.msg)
			}
		}
		// Not a tool of the REST execution endpoint, where the blame route answers.
		if _, err := tools.Call(ctx, 1, tool.BlameFile, json.RawMessage(`{"filename":"n.md"}`)); !errors.Is(err, tool.ErrUnknownTool) {
			t.Fatalf("Call ran %s: %v", tool.BlameFile, err)
		}
	})
}
