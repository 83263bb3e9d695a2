package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/matememory/matememory/pkg/internal/apptest"
	"github.com/matememory/matememory/pkg/internal/mcpserver"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/tool"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

func resolve(t *testing.T, what string, schema any) *jsonschema.Resolved {
	t.Helper()
	raw, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("%s does not resolve: %v\n%s", what, err, raw)
	}
	return rs
}

// Every listed tool has a title, an input schema carrying the argument rules and an output
// schema; every tool is called, and its structuredContent validates against its output
// schema.
func TestHTTPEveryToolIsTitledTypedAndCallable(t *testing.T) {
	a := apptest.Start(t, "k1=1")
	cs, err := connectHTTP(t, a, "1", "k1", "?language=en")
	if err != nil {
		t.Fatal(err)
	}
	tools := listTools(t, cs)
	out := map[string]*jsonschema.Resolved{}
	for _, tl := range tools {
		if tl.Title == "" || tl.Annotations == nil || tl.Annotations.Title != tl.Title {
			t.Errorf("%s: title %q, annotations %+v", tl.Name, tl.Title, tl.Annotations)
		}
		if tl.OutputSchema == nil {
			t.Fatalf("%s: no output schema", tl.Name)
		}
		out[tl.Name] = resolve(t, tl.Name+" output schema", tl.OutputSchema)
		in := resolve(t, tl.Name+" input schema", tl.InputSchema)
		raw, _ := json.Marshal(tl.InputSchema)
		var s jsonschema.Schema
		_ = json.Unmarshal(raw, &s)
		if f := s.Properties["filename"]; f != nil && tl.Name != tool.ListFiles {
			if f.Pattern != tool.FilenamePattern || f.MaxLength == nil || *f.MaxLength != 256 || f.MinLength == nil {
				t.Errorf("%s: filename schema lacks its rules: %s", tl.Name, raw)
			}
			if in.Validate(map[string]any{"filename": "../x.md"}) == nil {
				t.Errorf("%s: input schema accepts ../x.md", tl.Name)
			}
		}
	}
	day := time.Now().UTC().Format(time.DateOnly)
	calls := []struct {
		tool string
		args map[string]any
	}{
		{tool.WriteFile, map[string]any{"filename": "memory/" + day + ".md", "content": "# " + day + "\n\nThe user's dog is called Biscuit.\n"}},
		{tool.ReadFile, map[string]any{"filename": "memory/" + day + ".md"}},
		{tool.EditFile, map[string]any{"filename": "memory/" + day + ".md", "oldText": "Biscuit", "newText": "Biscuit Jr."}},
		{tool.AppendFile, map[string]any{"filename": "memory/" + day + ".md", "text": "- likes walks"}},
		{tool.ListFiles, map[string]any{}},
		{tool.HistoryFile, map[string]any{"filename": "memory/" + day + ".md", "includeContent": true}},
		{tool.BlameFile, map[string]any{"filename": "memory/" + day + ".md"}},
		{tool.RollbackFile, map[string]any{"filename": "memory/" + day + ".md", "version": 1}},
		{tool.ReadLines, map[string]any{"filename": "memory/" + day + ".md", "startLine": 1, "endLine": 3}},
		{tool.SearchMemory, map[string]any{"query": "dog Biscuit"}},
		{tool.DeleteFile, map[string]any{"filename": "memory/" + day + ".md"}},
	}
	called := map[string]bool{}
	for _, c := range calls {
		res := call(t, cs, c.tool, c.args)
		if res.IsError {
			t.Fatalf("%s: %s", c.tool, text(t, res))
		}
		var v map[string]any
		ok(t, res, &v)
		raw, _ := json.Marshal(res.StructuredContent)
		var sc any
		_ = json.Unmarshal(raw, &sc)
		if err := out[c.tool].Validate(sc); err != nil {
			t.Errorf("%s: structuredContent does not match the output schema: %v\n%s", c.tool, err, raw)
		}
		called[c.tool] = true
	}
	for _, tl := range tools {
		if !called[tl.Name] {
			t.Errorf("%s listed but not called", tl.Name)
		}
	}
	if _, err := a.Workspace.Get(context.Background(), 1, "memory/"+day+".md"); !errors.Is(err, workspace.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

// The memory files are resources: listed with their sizes, readable by URI (a name with a
// folder and Chinese characters too), and a template names them all.
func TestHTTPResources(t *testing.T) {
	a := apptest.Start(t, "k1=1;k2=2")
	cs, err := connectHTTP(t, a, "1", "k1", "")
	if err != nil {
		t.Fatal(err)
	}
	var w tool.WriteResult
	ok(t, call(t, cs, tool.WriteFile, map[string]any{"filename": "记忆/笔记.md", "content": "喜欢绿茶"}), &w)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	caps := cs.InitializeResult().Capabilities
	if caps.Resources == nil || !caps.Resources.Subscribe || !caps.Resources.ListChanged || caps.Tools == nil {
		t.Fatalf("capabilities %+v", caps)
	}
	rawCaps, _ := json.Marshal(caps)
	var capKeys map[string]json.RawMessage
	_ = json.Unmarshal(rawCaps, &capKeys)
	if len(capKeys) != 2 || capKeys["tools"] == nil || capKeys["resources"] == nil || caps.Tools.ListChanged {
		t.Fatalf("capabilities advertise what is not served: %s", rawCaps)
	}

	list, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range list.Resources {
		uris = append(uris, r.URI)
		if r.MIMEType != "text/markdown" || r.Name == "" {
			t.Errorf("resource %+v", r)
		}
		if r.URI == mcpserver.ResourceURI("记忆/笔记.md") && r.Size != int64(len("喜欢绿茶")) {
			t.Errorf("size of 记忆/笔记.md = %d", r.Size)
		}
	}
	for _, want := range []string{"memory:///MEMORY.md", "memory:///AGENTS.md", mcpserver.ResourceURI("记忆/笔记.md")} {
		if !slices.Contains(uris, want) {
			t.Fatalf("resources %v lack %s", uris, want)
		}
	}
	tmpl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tmpl.ResourceTemplates) != 1 || tmpl.ResourceTemplates[0].URITemplate != "memory:///{+filename}" {
		t.Fatalf("templates %+v %v", tmpl, err)
	}

	got, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.ResourceURI("记忆/笔记.md")})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Contents) != 1 || got.Contents[0].Text != "喜欢绿茶" || got.Contents[0].MIMEType != "text/markdown" {
		t.Fatalf("read %+v", got.Contents)
	}
	f, _ := a.Workspace.Get(ctx, 1, "MEMORY.md")
	got, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "memory:///MEMORY.md"})
	if err != nil || got.Contents[0].Text != f.Content {
		t.Fatalf("read MEMORY.md: %v", err)
	}
	// The URI form of the versions before the name moved to the path is still read.
	got, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "memory://MEMORY.md"})
	if err != nil || got.Contents[0].Text != f.Content {
		t.Fatalf("read the legacy memory://MEMORY.md: %v", err)
	}

	// Agent 2's session does not see agent 1's file; a missing file is resource-not-found.
	cs2, err := connectHTTP(t, a, "2", "k2", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs2.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.ResourceURI("记忆/笔记.md")})
	// Resource not found is -32602 with the URI in data (SEP-2164).
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(string(werr.Data), "记忆") && !strings.Contains(string(werr.Data), "%E8") {
		t.Fatalf("agent 2 reading agent 1's file: %v, want resource not found", err)
	}
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "memory://../x.md"})
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("reading memory://../x.md: %v, want invalid params", err)
	}
}

// A session that listens hears that the list changed when a file is created or deleted, and
// a subscriber hears that the file it subscribed to was updated, whoever wrote it in the
// process (another MCP session, REST, the summarizer).
func TestHTTPResourceNotifications(t *testing.T) {
	// The latest protocol (stateless, subscriptions/listen) and the initialize handshake of
	// 2025-11-25 (a session and its GET event stream), which the TypeScript SDK 1.x speaks.
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("protocol "+version, func(t *testing.T) { testHTTPResourceNotifications(t, version) })
	}
}

func testHTTPResourceNotifications(t *testing.T, version string) {
	a := apptest.Start(t, "k1=1;k2=2")
	listChanged := make(chan struct{}, 16)
	updated := make(chan string, 16)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { listChanged <- struct{}{} },
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			updated <- r.Params.URI
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint: "http://" + a.Addr + "/api/v1/agents/1/mcp", HTTPClient: httpClient("k1"), MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ProtocolVersion; version != "" && got != version {
		t.Fatalf("negotiated %s, want %s", got, version)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "memory:///MEMORY.md"}); err != nil {
		t.Fatal(err)
	}

	waitList := func(what string) {
		t.Helper()
		select {
		case <-listChanged:
		case <-time.After(5 * time.Second):
			t.Fatalf("no notifications/resources/list_changed after %s", what)
		}
	}
	waitUpdated := func(what, uri string) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case got := <-updated:
				if got == uri {
					return
				}
			case <-deadline:
				t.Fatalf("no notifications/resources/updated for %s after %s", uri, what)
			}
		}
	}

	// Another session (a model's tool call) creates a file.
	other, err := connectHTTP(t, a, "1", "k1", "")
	if err != nil {
		t.Fatal(err)
	}
	var w tool.WriteResult
	ok(t, call(t, other, tool.WriteFile, map[string]any{"filename": "notes/new.md", "content": "new"}), &w)
	waitList("a tool created notes/new.md")

	// The summarizer (any writer of the process) changes MEMORY.md.
	ch := workspace.Change{Actor: store.ActorSummarizer}
	if _, err := a.Workspace.Append(ctx, 1, "MEMORY.md", "- a fact", "", ch); err != nil {
		t.Fatal(err)
	}
	waitUpdated("an append to MEMORY.md", "memory:///MEMORY.md")

	// Deleting a file changes the list again.
	if err := a.Workspace.Delete(ctx, 1, "notes/new.md", workspace.AnyVersion, ch); err != nil {
		t.Fatal(err)
	}
	waitList("notes/new.md was deleted")

	// Agent 2's changes are not agent 1's business.
	drain(listChanged, updated)
	if _, _, err := a.Workspace.Write(ctx, 2, "MEMORY.md", "agent two", workspace.AnyVersion, ch); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Workspace.Write(ctx, 2, "x.md", "agent two", workspace.AnyVersion, ch); err != nil {
		t.Fatal(err)
	}
	select {
	case <-listChanged:
		t.Fatal("agent 1's session heard of agent 2's new file")
	case uri := <-updated:
		t.Fatalf("agent 1's session heard of agent 2's %s", uri)
	case <-time.After(500 * time.Millisecond):
	}
}

// drain empties both channels and returns once nothing more has arrived for 300 ms: the
// notifications of earlier changes (the agent's seeded files among them) are sent
// asynchronously and may still be on their way.
func drain(a chan struct{}, b chan string) {
	for {
		select {
		case <-a:
		case <-b:
		case <-time.After(300 * time.Millisecond):
			return
		}
	}
}

// A client starting with initialize (protocol 2025-11-25 and older) gets a session, with
// subscribe and listChanged advertised; the session serves only the agent, language and key
// that created it.
func TestHTTPInitializeGetsAnOwnedSession(t *testing.T) {
	a := apptest.Start(t, "k1=1;k2=2;all=*")
	send := func(agent, key, session, query, body string) (int, http.Header, []byte) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+a.Addr+"/api/v1/agents/"+agent+"/mcp"+query, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+key)
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, readAll(t, resp)
	}
	status, hdr, body := send("1", "k1", "", "", initialize)
	if status != 200 {
		t.Fatalf("initialize: %d %s", status, body)
	}
	var res struct {
		Result struct {
			Capabilities map[string]json.RawMessage `json:"capabilities"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	caps := res.Result.Capabilities
	if string(caps["resources"]) != `{"listChanged":true,"subscribe":true}` || string(caps["tools"]) != "{}" || len(caps) != 2 {
		t.Fatalf("capabilities %s", body)
	}
	session := hdr.Get("Mcp-Session-Id")
	if session == "" {
		t.Fatal("initialize answered no Mcp-Session-Id")
	}
	const list = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if status, _, body := send("1", "k1", session, "", list); status != 200 || !strings.Contains(string(body), `"tools"`) {
		t.Fatalf("own session: %d %s", status, body)
	}
	for _, c := range []struct{ agent, key, query string }{
		{"1", "all", ""}, // another key, even one that may act for agent 1
		{"2", "k2", ""},  // another agent's URL
		{"2", "all", ""}, //
		{"1", "k1", "?language=" + map[bool]string{true: "zh", false: "en"}[a.Tools.DefaultLanguage() == "en"]}, // another binding
	} {
		status, _, body := send(c.agent, c.key, session, c.query, list)
		checkRPCError(t, status, body, 404, jsonrpc.CodeInvalidRequest, 2.0)
	}
}

// Protocol errors are JSON-RPC error objects, never text/plain bodies.
func TestHTTPProtocolErrorsAreJSONRPC(t *testing.T) {
	a := apptest.Start(t, "")
	cases := []struct {
		name, body string
		status     int
		code       int64
		id         any
	}{
		{"parse error", `{"jsonrpc":"2.0","id":1,"method":`, 400, -32700, nil},
		{"not a message", `[1,2]`, 400, -32600, nil},
		{"unknown method", `{"jsonrpc":"2.0","id":7,"method":"no/such/method"}`, 200, -32601, 7.0},
		{"prompts are not served", `{"jsonrpc":"2.0","id":11,"method":"prompts/list"}`, 200, -32601, 11.0},
		{"logging is not served", `{"jsonrpc":"2.0","id":12,"method":"logging/setLevel","params":{"level":"info"}}`, 200, -32601, 12.0},
		{"unknown tool", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"delete_everything","arguments":{}}}`, 200, -32602, 8.0},
		{"invalid params", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":"x"}`, 200, -32602, 9.0},
		{"missing resource uri", `{"jsonrpc":"2.0","id":10,"method":"resources/read","params":{}}`, 200, -32602, 10.0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, a, "1", "", tc.body)
			checkRPCError(t, status, body, tc.status, tc.code, tc.id)
		})
	}
	// The transport's own refusals (a missing Accept, GET without a stream) too.
	req, _ := http.NewRequest(http.MethodPost, "http://"+a.Addr+"/api/v1/agents/1/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	checkRPCError(t, resp.StatusCode, body, 406, jsonrpc.CodeInvalidRequest, 3.0)
	req, _ = http.NewRequest(http.MethodGet, "http://"+a.Addr+"/api/v1/agents/1/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body = readAll(t, resp)
	checkRPCError(t, resp.StatusCode, body, 405, jsonrpc.CodeInvalidRequest, nil)
	if resp.Header.Get("Allow") != "POST" {
		t.Errorf("405 without Allow: POST: %v", resp.Header)
	}
}

// With API keys, a browser Origin that is not a configured CORS origin is refused with 403
// and a JSON-RPC error without id, as the streamable HTTP transport requires.
func TestHTTPOriginIsValidated(t *testing.T) {
	a := apptest.Start(t, "k1=1")
	for _, origin := range []string{"https://evil.example", "http://" + a.Addr} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+a.Addr+"/api/v1/agents/1/mcp", strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer k1")
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := readAll(t, resp)
		checkRPCError(t, resp.StatusCode, body, 403, jsonrpc.CodeInvalidRequest, nil)
	}
	// Without Origin (not a browser) it is served, also through a reverse proxy on the same
	// machine that forwards to the loopback address with the public Host.
	if status, body := post(t, a, "1", "k1", initialize); status != 200 {
		t.Fatalf("no Origin: %d %s", status, body)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+a.Addr+"/api/v1/agents/1/mcp", strings.NewReader(initialize))
	req.Host = "memory.example.com"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer k1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("proxied Host: %d %s", resp.StatusCode, body)
	}
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return []byte(b.String())
}

func checkRPCError(t *testing.T, status int, body []byte, wantStatus int, code int64, id any) {
	t.Helper()
	var msg struct {
		JSONRPC string `json:"jsonrpc"`
		ID      any    `json:"id"`
		Error   *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		t.Fatalf("status %d, body is not JSON: %q", status, body)
	}
	if status != wantStatus || msg.JSONRPC != "2.0" || msg.Error == nil || msg.Error.Code != code || msg.Error.Message == "" || msg.ID != id {
		t.Fatalf("status %d body %s; want status %d, a JSON-RPC error %d with id %v", status, body, wantStatus, code, id)
	}
}

// Over stdio, a change of the agent's files in the process reaches the client as
// notifications too.
func TestStdioResourceNotifications(t *testing.T) {
	a := apptest.Start(t, "")
	listChanged := make(chan struct{}, 16)
	updated := make(chan string, 16)
	clientToServerR, clientToServerW := io.Pipe()
	serverToClientR, serverToClientW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.ServeStdio(context.Background(), a.Tools, 5, "en", a.MCPHub, nil, clientToServerR, serverToClientW)
		serverToClientW.Close()
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { listChanged <- struct{}{} },
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			updated <- r.Params.URI
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Like a parent process, the client closes the server's stdin and keeps reading its
	// stdout until it ends (the server answers the subscription stream it cancels).
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(serverToClientR), Writer: clientToServerW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "memory:///PROFILE.md"}); err != nil {
		t.Fatal(err)
	}
	ch := workspace.Change{Actor: store.ActorAPI}
	if _, _, err := a.Workspace.Write(ctx, 5, "new.md", "x", workspace.AnyVersion, ch); err != nil {
		t.Fatal(err)
	}
	select {
	case <-listChanged:
	case <-time.After(5 * time.Second):
		t.Fatal("no list_changed over stdio after a new file")
	}
	if _, err := a.Workspace.Append(ctx, 5, "PROFILE.md", "- name: Ada", "", ch); err != nil {
		t.Fatal(err)
	}
	select {
	case uri := <-updated:
		if uri != "memory:///PROFILE.md" {
			t.Fatalf("updated %s", uri)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no resources/updated over stdio after an append to PROFILE.md")
	}
	_ = cs.Close()
	go func() { _, _ = io.Copy(io.Discard, serverToClientR) }()
	if err := <-done; err != nil {
		t.Fatalf("stdio server: %v (%T)", err, err)
	}
}

// A change made by another process (its recall index message on NATS) is notified too, and a
// change of this process, reported by its hook and by the echo of its message, is notified
// once.
func TestHTTPNotifiesOtherProcessesChangesOnce(t *testing.T) {
	a := apptest.Start(t, "")
	// Seed agent 1 first: its seeded files notify too (they are changes), and this test counts
	// the notifications of one append.
	if _, err := a.Workspace.EnsureAgent(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	updated := make(chan string, 16)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + a.Addr + "/api/v1/agents/1/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "memory:///MEMORY.md"}); err != nil {
		t.Fatal(err)
	}
	// What a summarizer process publishes after it changed MEMORY.md of agent 1.
	data, _ := json.Marshal(recall.Change{AgentID: 1, Filename: "MEMORY.md", Version: 41})
	if err := a.NC.Publish(recall.SubjectIndex+".1", data); err != nil {
		t.Fatal(err)
	}
	select {
	case uri := <-updated:
		if uri != "memory:///MEMORY.md" {
			t.Fatalf("updated %s", uri)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("another process's change was not notified")
	}
	if _, err := a.Workspace.Append(ctx, 1, "MEMORY.md", "- once", "", workspace.Change{Actor: store.ActorAPI}); err != nil {
		t.Fatal(err)
	}
	n := 0
	deadline := time.After(1500 * time.Millisecond)
	for done := false; !done; {
		select {
		case <-updated:
			n++
		case <-deadline:
			done = true
		}
	}
	if n != 1 {
		t.Fatalf("one change of this process notified %d times", n)
	}
}
