package goclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/client"
	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/apptest"
	"github.com/matememory/matememory/pkg/internal/httpapi/apitest"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/tool"
)

func newClient(t *testing.T, a *app.App, key string) *client.Client {
	t.Helper()
	// Every response the client receives is held against the OpenAPI document.
	hc := &http.Client{Timeout: 30 * time.Second, Transport: apitest.New(t, a.HTTP, nil)}
	c, err := client.New("http://"+a.Addr, key, client.WithTimeout(30*time.Second), client.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestFiles(t *testing.T) {
	a := apptest.Start(t, "")
	c := newClient(t, a, "")
	ctx := ctx(t)
	const name = "memory/2026-04-01.md"

	w, err := c.WriteFile(ctx, 1, name, "# 2026-04-01\n- tea\n", client.CreateOnly)
	if err != nil {
		t.Fatal(err)
	}
	if !w.Created || w.Version <= 0 || w.Filename != name || w.AgentID != 1 {
		t.Fatalf("create = %+v", w)
	}
	if _, err := c.WriteFile(ctx, 1, name, "again", client.CreateOnly); !client.IsConflict(err) {
		t.Fatalf("create-only over an existing file: err = %v, want a conflict", err)
	}
	f, err := c.ReadFile(ctx, 1, name)
	if err != nil {
		t.Fatal(err)
	}
	if f.Content != "# 2026-04-01\n- tea\n" || f.Version != w.Version {
		t.Fatalf("read = %+v", f)
	}
	w2, err := c.WriteFile(ctx, 1, name, "# 2026-04-01\n- green tea\n", f.Version)
	if err != nil {
		t.Fatal(err)
	}
	if w2.Created || w2.Version == f.Version {
		t.Fatalf("overwrite = %+v", w2)
	}
	// A writer holding the old version loses: no lost update.
	_, err = c.WriteFile(ctx, 1, name, "stale", f.Version)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != http.StatusConflict || !strings.Contains(ae.Msg, "re-read") {
		t.Fatalf("stale write: err = %#v", err)
	}

	enabled, order := true, 99
	p, err := c.PatchFile(ctx, 1, name, client.FilePatch{Enabled: &enabled, SortOrder: &order}, client.AnyVersion)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Enabled || p.SortOrder != 99 {
		t.Fatalf("patch = %+v", p)
	}
	sp, err := c.SystemPrompt(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sp, "green tea") {
		t.Fatalf("system prompt lacks the enabled file: %q", sp)
	}

	hist, err := c.History(ctx, 1, name)
	if err != nil {
		t.Fatal(err)
	}
	var first int64
	for _, h := range hist {
		if h.Content == "# 2026-04-01\n- tea\n" {
			first = h.Version
		}
	}
	if first == 0 {
		t.Fatalf("history %+v lacks the first version", hist)
	}
	rb, err := c.Rollback(ctx, 1, name, first, p.Version)
	if err != nil {
		t.Fatal(err)
	}
	if rb.Content != "# 2026-04-01\n- tea\n" {
		t.Fatalf("rollback = %+v", rb)
	}

	list, err := c.ListFiles(ctx, 1, "memory/")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Filename != name {
		t.Fatalf("list memory/ = %+v", list)
	}
	all, err := c.ListFiles(ctx, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 2 {
		t.Fatalf("list = %+v, want the core files too", all)
	}

	if err := c.DeleteFile(ctx, 1, name, rb.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadFile(ctx, 1, name); !client.IsNotFound(err) {
		t.Fatalf("read after delete: err = %v, want not found", err)
	}
	// A name that tries to leave the workspace is refused, not resolved elsewhere.
	if _, err := c.ReadFile(ctx, 1, "memory/../../x.md"); !client.IsBadRequest(err) {
		t.Fatalf("traversal: err = %v, want 400", err)
	}
	// Names with spaces and non-ASCII letters travel escaped.
	if _, err := c.WriteFile(ctx, 1, "notes/日记 one.md", "你好", client.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if f, err := c.ReadFile(ctx, 1, "notes/日记 one.md"); err != nil || f.Content != "你好" {
		t.Fatalf("read escaped name: %+v, %v", f, err)
	}

	ag, err := c.UpdateAgent(ctx, 1, "en", "Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	if ag.Language != "en" || ag.Timezone != "Asia/Shanghai" {
		t.Fatalf("agent = %+v", ag)
	}
	if ag, err = c.Agent(ctx, 1); err != nil || ag.Timezone != "Asia/Shanghai" {
		t.Fatalf("agent = %+v, %v", ag, err)
	}
	page, err := c.ListAgents(ctx, 0, 10)
	if err != nil || len(page.Agents) != 1 || page.Agents[0].AgentID != 1 || page.Agents[0].FileCount == 0 || page.NextAfter != 0 {
		t.Fatalf("ListAgents = %+v, %v", page, err)
	}
}

func TestTools(t *testing.T) {
	a := apptest.Start(t, "")
	c := newClient(t, a, "")
	ctx := ctx(t)

	defs, err := c.Tools(ctx, "en")
	if err != nil {
		t.Fatal(err)
	}
	// The four file tools, then the recall tools (memory search is on by default).
	names := append(append([]string(nil), tool.Names...), tool.SearchMemory, tool.ReadLines)
	if len(defs) != len(names) {
		t.Fatalf("%d tools, want %d", len(defs), len(names))
	}
	for i, d := range defs {
		if d.Type != "function" || d.Function.Name != names[i] || d.Function.Description == "" {
			t.Errorf("definition %d = %+v", i, d)
		}
		if strings.Contains(strings.ToLower(string(d.Function.Parameters)), "agentid") {
			t.Errorf("%s parameters mention an agent id: %s", d.Function.Name, d.Function.Parameters)
		}
	}
	if _, err := c.Tools(ctx, "fr"); !client.IsBadRequest(err) {
		t.Fatalf("language fr: err = %v, want 400", err)
	}

	// The model's arguments as it produced them (a JSON string), and a Go value.
	out, err := c.CallTool(ctx, 5, tool.WriteFile, `{"filename":"PROFILE.md","content":"name: Ada\n"}`, client.WithToolCallID("call_1"))
	if err != nil {
		t.Fatal(err)
	}
	var w tool.WriteResult
	if err := json.Unmarshal(out, &w); err != nil || w.AgentID != 5 || w.Filename != "PROFILE.md" {
		t.Fatalf("write = %s (%v)", out, err)
	}
	out, err = c.CallTool(ctx, 5, tool.EditFile, map[string]any{"filename": "PROFILE.md", "oldText": "Ada", "newText": "Ada Lovelace"}, client.WithToolCallID("call_2"))
	if err != nil {
		t.Fatal(err)
	}
	var e tool.EditResult
	if err := json.Unmarshal(out, &e); err != nil || e.Replacements != 1 {
		t.Fatalf("edit = %s (%v)", out, err)
	}
	out, err = c.CallTool(ctx, 5, tool.ReadFile, map[string]string{"filename": "PROFILE.md"})
	if err != nil {
		t.Fatal(err)
	}
	var r tool.ReadResult
	if err := json.Unmarshal(out, &r); err != nil || r.Content != "name: Ada Lovelace\n" {
		t.Fatalf("read = %s (%v)", out, err)
	}
	out, err = c.CallTool(ctx, 5, tool.ListFiles, nil)
	if err != nil {
		t.Fatal(err)
	}
	var l tool.ListResult
	if err := json.Unmarshal(out, &l); err != nil || l.Count == 0 {
		t.Fatalf("list = %s (%v)", out, err)
	}
	hist, err := c.History(ctx, 5, "PROFILE.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) == 0 || hist[0].Actor != store.ActorTool || hist[0].Ref != "call_2" {
		t.Fatalf("history = %+v, want the edit by a tool with ref call_2 first", hist)
	}

	_, err = c.CallTool(ctx, 5, tool.ReadFile, map[string]any{"filename": "PROFILE.md", "agentId": 6})
	if !client.IsBadRequest(err) || !strings.Contains(err.Error(), "agentId is not an argument") {
		t.Fatalf("agentId argument: err = %v", err)
	}
	if _, err := c.CallTool(ctx, 5, "delete_everything", nil); !client.IsNotFound(err) {
		t.Fatalf("unknown tool: err = %v, want 404", err)
	}
	if _, err := c.CallTool(ctx, 5, tool.ReadFile, map[string]any{"filename": "nope.md"}); !client.IsNotFound(err) || client.IsRetryable(err) {
		t.Fatalf("missing file: err = %v, want a 404 that is not retryable", err)
	}
}

func TestMessages(t *testing.T) {
	a := apptest.Start(t, "")
	c := newClient(t, a, "")
	ctx := ctx(t)
	const conv = "conv/1 ä"

	calls := json.RawMessage(`[{"id":"call_1","type":"function","function":{"name":"read_workspace_memory_file","arguments":"{\"filename\":\"MEMORY.md\"}"}}]`)
	stored, err := c.StoreMessages(ctx, 3, conv,
		client.Message{Role: "user", Content: "what do I like?"},
		client.Message{Role: "assistant", ToolCalls: calls},
		client.Message{Role: "tool", ToolCallID: "call_1", Content: "tea"},
		client.Message{Role: "assistant", Content: "tea"},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 4 || stored[0].ID == 0 || stored[0].ConversationID != conv || stored[0].AgentID != 3 {
		t.Fatalf("stored = %+v", stored)
	}
	got, err := c.Messages(ctx, 3, conv)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[1].Role != "assistant" || got[2].ToolCallID != "call_1" || got[3].Content != "tea" {
		t.Fatalf("messages = %+v", got)
	}
	var a1, a2 any
	_ = json.Unmarshal(calls, &a1)
	_ = json.Unmarshal(got[1].ToolCalls, &a2)
	if fmt.Sprint(a1) != fmt.Sprint(a2) {
		t.Fatalf("tool calls = %s, want %s", got[1].ToolCalls, calls)
	}

	// Another agent's view of the same conversation id is its own.
	if other, err := c.Messages(ctx, 4, conv); err != nil || len(other) != 0 {
		t.Fatalf("agent 4 sees %d messages (%v)", len(other), err)
	}

	page, err := c.MessagesPage(ctx, 3, conv, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if page.Count != 3 || !page.HasMore {
		t.Fatalf("page = %+v", page)
	}
	page, err = c.MessagesPage(ctx, 3, conv, page.Messages[2].ID, 3)
	if err != nil || page.Count != 1 || page.HasMore {
		t.Fatalf("second page = %+v (%v)", page, err)
	}

	if _, err := c.StoreMessages(ctx, 3, conv, client.Message{Role: "robot", Content: "x"}); !client.IsBadRequest(err) {
		t.Fatalf("bad role: err = %v, want 400", err)
	}
	if _, err := c.StoreMessages(ctx, 3, conv); err == nil {
		t.Fatal("no messages: no error")
	}
}

// TestMessagesFollowsPages stores more than one server page (1000) and reads them all back.
func TestMessagesFollowsPages(t *testing.T) {
	a := apptest.Start(t, "")
	c := newClient(t, a, "")
	ctx := ctx(t)
	const total = 1203
	var batch []client.Message
	for i := range total {
		batch = append(batch, client.Message{Role: "user", Content: fmt.Sprint("m", i)})
		if len(batch) == 1000 || i == total-1 {
			if _, err := c.StoreMessages(ctx, 9, "long", batch...); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
	got, err := c.Messages(ctx, 9, "long")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != total || got[0].Content != "m0" || got[total-1].Content != fmt.Sprint("m", total-1) {
		t.Fatalf("got %d messages, first %q", len(got), got[0].Content)
	}
}

func TestAuthErrors(t *testing.T) {
	a := apptest.Start(t, "k1=1;k2=2")
	ctx := ctx(t)
	if _, err := newClient(t, a, "k1").WriteFile(ctx, 1, "a.md", "x", client.AnyVersion); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		key   string
		check func(error) bool
		msg   string
	}{
		{"other agent", "k2", client.IsForbidden, "may not act for agent 1"},
		{"no key", "", client.IsUnauthorized, "missing API key"},
		{"wrong key", "k3", client.IsUnauthorized, "invalid API key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newClient(t, a, tc.key).ReadFile(ctx, 1, "a.md")
			var ae *client.APIError
			if !tc.check(err) || !errors.As(err, &ae) || !strings.Contains(ae.Msg, tc.msg) || ae.Method != http.MethodGet {
				t.Fatalf("err = %#v, want %q", err, tc.msg)
			}
			if client.IsRetryable(err) || client.IsNotFound(err) || client.IsConflict(err) {
				t.Fatalf("%v classified as retryable, not found or conflict", err)
			}
		})
	}
	// Messages are authorized by the agent in the body and the query.
	if _, err := newClient(t, a, "k2").StoreMessages(ctx, 1, "c", client.Message{Role: "user", Content: "x"}); !client.IsForbidden(err) {
		t.Fatalf("store for another agent: err = %v", err)
	}
	if _, err := newClient(t, a, "k2").Messages(ctx, 1, "c"); !client.IsForbidden(err) {
		t.Fatalf("read another agent's messages: err = %v", err)
	}
}
