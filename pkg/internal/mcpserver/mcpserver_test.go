package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/apptest"
	"github.com/matememory/matememory/pkg/internal/mcpserver"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/tool"
)

// bearer adds an API key to every request.
type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.key != "" {
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	return b.next.RoundTrip(r)
}

func httpClient(key string) *http.Client {
	return &http.Client{Transport: bearer{key: key, next: http.DefaultTransport}, Timeout: 30 * time.Second}
}

func connectHTTP(t *testing.T, a *app.App, agent, key, query string) (*mcp.ClientSession, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   "http://" + a.Addr + "/api/v1/agents/" + agent + "/mcp" + query,
		HTTPClient: httpClient(key),
		MaxRetries: -1,
	}, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	return res
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("want one content item, got %d", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("want text content, got %T", res.Content[0])
	}
	return tc.Text
}

// ok decodes a successful result's JSON text into v, and checks the structured content says
// the same.
func ok(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", text(t, res))
	}
	raw := text(t, res)
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		t.Fatalf("result %q: %v", raw, err)
	}
	sc, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	_ = json.Unmarshal([]byte(raw), &a)
	_ = json.Unmarshal(sc, &b)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Fatalf("structured content %s differs from text %s", jb, ja)
	}
}

func listTools(t *testing.T, cs *mcp.ClientSession) []*mcp.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Tools
}

// checkTools asserts the four tools are listed and no input schema mentions an agent id.
func checkTools(t *testing.T, tools []*mcp.Tool) {
	t.Helper()
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
		schema, err := json.Marshal(tl.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		if s := strings.ToLower(string(schema)); strings.Contains(s, "agentid") || strings.Contains(s, "agent_id") {
			t.Errorf("%s: input schema mentions an agent id: %s", tl.Name, schema)
		}
		var obj struct {
			Type       string         `json:"type"`
			Properties map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(schema, &obj); err != nil || obj.Type != "object" || obj.Properties == nil {
			t.Errorf("%s: input schema is not an object schema with properties: %s", tl.Name, schema)
		}
		if tl.Description == "" {
			t.Errorf("%s: no description", tl.Name)
		}
	}
	slices.Sort(names)
	// The app serves memory search too (mate.memory.search.enabled defaults to true).
	want := append(slices.Concat(tool.Names, tool.MoreNames), tool.SearchMemory, tool.ReadLines)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}
}

// exercise runs write → read → edit → list for the session's agent.
func exercise(t *testing.T, cs *mcp.ClientSession, agentID int64) {
	t.Helper()
	const name = "notes/mcp.md"
	var w tool.WriteResult
	ok(t, call(t, cs, tool.WriteFile, map[string]any{"filename": name, "content": "# MCP\nlikes: tea\n"}), &w)
	if !w.Created || w.AgentID != agentID || w.Filename != name {
		t.Fatalf("write = %+v", w)
	}
	var r tool.ReadResult
	ok(t, call(t, cs, tool.ReadFile, map[string]any{"filename": name}), &r)
	if r.Content != "# MCP\nlikes: tea\n" || r.AgentID != agentID {
		t.Fatalf("read = %+v", r)
	}
	// A budgeted core file carries its tokens and budget (issue 22); the output schema says so.
	var mem tool.ReadResult
	ok(t, call(t, cs, tool.ReadFile, map[string]any{"filename": "MEMORY.md"}), &mem)
	if mem.Tokens == nil || *mem.Tokens <= 0 || mem.BudgetTokens == nil || *mem.BudgetTokens != 2000 {
		t.Fatalf("MEMORY.md read without its tokens and budget: %v / %v", mem.Tokens, mem.BudgetTokens)
	}
	if r.Tokens != nil || r.BudgetTokens != nil {
		t.Fatalf("%s has no budget, yet reports one", name)
	}
	var e tool.EditResult
	ok(t, call(t, cs, tool.EditFile, map[string]any{"filename": name, "oldText": "tea", "newText": "green tea"}), &e)
	if e.Replacements != 1 || e.FileSizeAfter != int64(len("# MCP\nlikes: green tea\n")) {
		t.Fatalf("edit = %+v", e)
	}
	var l tool.ListResult
	ok(t, call(t, cs, tool.ListFiles, map[string]any{"filenamePrefix": "notes/"}), &l)
	if l.Count != 1 || len(l.Files) != 1 || l.Files[0].Filename != name || l.AgentID != agentID {
		t.Fatalf("list = %+v", l)
	}
}

func TestHTTPListsAndCallsTheFourTools(t *testing.T) {
	a := apptest.Start(t, "k1=1;k2=2")
	cs, err := connectHTTP(t, a, "1", "k1", "")
	if err != nil {
		t.Fatal(err)
	}
	checkTools(t, listTools(t, cs))
	exercise(t, cs, 1)

	ctx := context.Background()
	f, err := a.Workspace.Get(ctx, 1, "notes/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	if f.Content != "# MCP\nlikes: green tea\n" {
		t.Fatalf("stored content = %q", f.Content)
	}
	hist, err := a.Workspace.History(ctx, 1, "notes/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) == 0 || hist[0].Actor != store.ActorTool {
		t.Fatalf("history = %+v, want the edit recorded as a tool change", hist)
	}
	if _, err := a.Workspace.Get(ctx, 2, "notes/mcp.md"); err == nil {
		t.Fatal("agent 2 has agent 1's file")
	}

	// Markdown reaches the model as written, not HTML-escaped (\u003e).
	var w tool.WriteResult
	ok(t, call(t, cs, tool.WriteFile, map[string]any{"filename": "q.md", "content": "> quote <b> & co"}), &w)
	if got := text(t, call(t, cs, tool.ReadFile, map[string]any{"filename": "q.md"})); !strings.Contains(got, `"content":"> quote <b> & co"`) {
		t.Fatalf("read text = %s", got)
	}
}

func TestHTTPAgentComesFromTheURLNotArguments(t *testing.T) {
	a := apptest.Start(t, "k1=1;k2=2;all=*")
	cs, err := connectHTTP(t, a, "1", "k1", "")
	if err != nil {
		t.Fatal(err)
	}
	res := call(t, cs, tool.WriteFile, map[string]any{"filename": "x.md", "content": "hi", "agentId": 2})
	if !res.IsError || !strings.Contains(text(t, res), "agentId is not an argument") {
		t.Fatalf("agentId argument: isError=%v text=%q", res.IsError, text(t, res))
	}
	for _, id := range []int64{1, 2} {
		if _, err := a.Workspace.Get(context.Background(), id, "x.md"); err == nil {
			t.Fatalf("agent %d got x.md from a refused call", id)
		}
	}

	// A key for every agent reaches agent 2 only through agent 2's URL.
	cs2, err := connectHTTP(t, a, "2", "all", "")
	if err != nil {
		t.Fatal(err)
	}
	var w tool.WriteResult
	ok(t, call(t, cs2, tool.WriteFile, map[string]any{"filename": "two.md", "content": "agent two"}), &w)
	if w.AgentID != 2 {
		t.Fatalf("write through /agents/2/mcp went to agent %d", w.AgentID)
	}
	if _, err := a.Workspace.Get(context.Background(), 1, "two.md"); err == nil {
		t.Fatal("agent 1 has agent 2's file")
	}
}

// post sends one raw JSON-RPC message to an MCP endpoint.
func post(t *testing.T, a *app.App, agent, key, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+a.Addr+"/api/v1/agents/"+agent+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := httpClient(key).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`

func TestHTTPAuthorization(t *testing.T) {
	a := apptest.Start(t, "k1=1;k2=2")
	cases := []struct {
		name, agent, key string
		status           int
		msg              string
	}{
		{"other agent's key", "1", "k2", http.StatusForbidden, "may not act for agent 1"},
		{"no key", "1", "", http.StatusUnauthorized, "missing API key"},
		{"unknown key", "1", "nope", http.StatusUnauthorized, "invalid API key"},
		{"bad agent id", "x", "k1", http.StatusBadRequest, "agentId must be a positive integer"},
		{"own agent", "1", "k1", http.StatusOK, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, a, tc.agent, tc.key, initialize)
			if status != tc.status {
				t.Fatalf("status = %d, want %d; body %s", status, tc.status, body)
			}
			if tc.msg == "" {
				if !bytes.Contains(body, []byte(`"serverInfo"`)) {
					t.Fatalf("initialize answered %s", body)
				}
				return
			}
			var env struct {
				Code int    `json:"code"`
				Msg  string `json:"msg"`
			}
			if err := json.Unmarshal(body, &env); err != nil || env.Code != tc.status || !strings.Contains(env.Msg, tc.msg) {
				t.Fatalf("body = %s, want code %d and msg containing %q", body, tc.status, tc.msg)
			}
		})
	}

	// The SDK client fails to connect with another agent's key.
	if _, err := connectHTTP(t, a, "1", "k2", ""); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("connect with agent 2's key to agent 1: err = %v, want a 403", err)
	}
	// GET (standalone stream) is answered by the MCP handler, after authorization.
	req, _ := http.NewRequest(http.MethodGet, "http://"+a.Addr+"/api/v1/agents/1/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := httpClient("k1").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET status = %d, want 405", resp.StatusCode)
	}
}

func TestHTTPToolErrorsCarryTheRESTMessage(t *testing.T) {
	a := apptest.Start(t, "")
	cs, err := connectHTTP(t, a, "7", "", "")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		tool   string
		args   map[string]any
		status int
		// schema: the input schema refuses the call before the tool runs, with this text
		// (REST, which has no schema validator in front, says it in its own words).
		schema string
	}{
		{"missing file", tool.ReadFile, map[string]any{"filename": "nope.md"}, http.StatusNotFound, ""},
		{"traversal", tool.ReadFile, map[string]any{"filename": "../x.md"}, http.StatusBadRequest, ""},
		{"missing argument", tool.WriteFile, map[string]any{"filename": "a.md"}, http.StatusBadRequest, `write_workspace_memory_file: invalid arguments: validating root: required: missing properties: ["content"]`},
		{"unknown argument", tool.ListFiles, map[string]any{"prefix": "memory/"}, http.StatusBadRequest, `list_workspace_memory_files: invalid arguments: validating root: unexpected additional properties ["prefix"]; accepted: filenamePrefix`},
		{"empty oldText", tool.EditFile, map[string]any{"filename": "MEMORY.md", "oldText": "", "newText": "x"}, http.StatusBadRequest, "minLength"},
		{"wrong type", tool.EditFile, map[string]any{"filename": "MEMORY.md", "oldText": "a", "newText": "b", "replaceAll": "yes"}, http.StatusBadRequest, "replaceAll"},
		{"line below 1", tool.ReadLines, map[string]any{"filename": "MEMORY.md", "startLine": 0}, http.StatusBadRequest, "minimum"},
		{"edit text absent", tool.EditFile, map[string]any{"filename": "MEMORY.md", "oldText": "no such text anywhere", "newText": "x"}, http.StatusBadRequest, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, cs, tc.tool, tc.args)
			if !res.IsError {
				t.Fatalf("want a tool error, got %s", text(t, res))
			}
			got := text(t, res)
			if st, _ := res.Meta["matememory/status"].(float64); int(st) != tc.status {
				t.Errorf("status meta = %v, want %d", res.Meta["matememory/status"], tc.status)
			}
			// The REST execution endpoint answers the same message.
			body, _ := json.Marshal(tc.args)
			resp, err := http.Post("http://"+a.Addr+"/api/v1/agents/7/tools/"+tc.tool, "application/json", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var env struct {
				Code int    `json:"code"`
				Msg  string `json:"msg"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
				t.Fatal(err)
			}
			if tc.schema != "" {
				if env.Code != tc.status || !strings.Contains(got, tc.schema) {
					t.Fatalf("REST answered %d; MCP said %q (want status %d and %q)", env.Code, got, tc.status, tc.schema)
				}
				return
			}
			if env.Code != tc.status || env.Msg != got {
				t.Fatalf("REST answered %d %q; MCP said %q (want status %d)", env.Code, env.Msg, got, tc.status)
			}
		})
	}
}

func TestHTTPLanguage(t *testing.T) {
	a := apptest.Start(t, "")
	for _, lang := range []string{"en", "zh"} {
		cs, err := connectHTTP(t, a, "1", "", "?language="+lang)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, tl := range listTools(t, cs) {
			got[tl.Name] = tl.Description
		}
		for _, d := range tool.Definitions(lang) {
			if got[d.Function.Name] != d.Function.Description {
				t.Errorf("%s %s: description %q, want %q", lang, d.Function.Name, got[d.Function.Name], d.Function.Description)
			}
		}
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+a.Addr+"/api/v1/agents/1/mcp?language=fr", strings.NewReader(initialize))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("language=fr: status %d, want 400", resp.StatusCode)
	}
}

// TestServeStdio runs the stdio server over pipes with the SDK client on the other ends.
func TestServeStdio(t *testing.T) {
	a := apptest.Start(t, "")
	cs := connectPipes(t, func(ctx context.Context, in io.Reader, out io.Writer) error {
		return mcpserver.ServeStdio(ctx, a.Tools, 3, "en", a.MCPHub, nil, in, out)
	})
	checkTools(t, listTools(t, cs))
	exercise(t, cs, 3)
	if _, err := a.Workspace.Get(context.Background(), 3, "notes/mcp.md"); err != nil {
		t.Fatal(err)
	}
}

// connectPipes starts serve on one end of two pipes and connects an SDK client to the other;
// closing the client ends serve, which must then return nil.
func connectPipes(t *testing.T, serve func(ctx context.Context, in io.Reader, out io.Writer) error) *mcp.ClientSession {
	t.Helper()
	clientToServerR, clientToServerW := io.Pipe()
	serverToClientR, serverToClientW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := serve(context.Background(), clientToServerR, serverToClientW)
		serverToClientW.Close()
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: serverToClientR, Writer: clientToServerW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("stdio server ended with %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("stdio server did not end after the client closed")
		}
	})
	return cs
}

// Issue 9.9: MCP stores X-Request-Id through the same sanitiser as REST: at most 128 bytes,
// no control characters.
func TestHTTPRequestIDIsSanitised(t *testing.T) {
	a := apptest.Start(t, "")
	long := strings.Repeat("é", 200)
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_workspace_memory_file","arguments":{"filename":"notes/ref.md","content":"v1"}}}`
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequest(http.MethodPost, "http://"+a.Addr+"/api/v1/agents/4/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header["X-Request-Id"] = []string{strings.Repeat("x", 10) + "\t" + long}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("tools/call: %d", resp.StatusCode)
		}
		body = strings.Replace(body, `"v1"`, `"v2"`, 1)
	}
	hist, err := a.Workspace.History(context.Background(), 4, "notes/ref.md")
	if err != nil || len(hist) == 0 {
		t.Fatalf("history %v %v", hist, err)
	}
	ref := hist[0].Ref
	if ref == "" || len(ref) > 128 || strings.ContainsAny(ref, "\t\r\n") || !utf8.ValidString(ref) {
		t.Fatalf("ref stored as %q (%d bytes)", ref, len(ref))
	}
}
