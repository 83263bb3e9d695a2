package rest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/blame"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/httpapi/apitest"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/rest"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/tool"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// server is the REST surface on a real loopback listener, composed as pkg/internal/app composes it.
type server struct {
	base   string
	ws     *workspace.Service
	led    *ledger.Ledger
	client *http.Client
}

func start(t *testing.T, db storetest.DB, keys string) *server {
	t.Helper()
	parsed, err := config.ParseKeys(keys)
	if err != nil {
		t.Fatal(err)
	}
	ws := workspace.New(db.DB, workspace.WithDefaults("zh", "UTC"))
	s := httpapi.New(httpapi.NewAuthenticator(parsed), prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	rest.RegisterWorkspace(s, ws)
	led := ledger.New(db.DB, nil)
	rest.RegisterBlame(s, blame.New(ws, led))
	rest.RegisterMessages(s, conversation.New(db.DB), ws)
	rest.RegisterTools(s, tool.New(ws))
	ln, err := s.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	// Every response is held against the OpenAPI document.
	return &server{base: "http://" + ln.Addr().String(), ws: ws, led: led, client: apitest.New(t, s, nil).Client()}
}

// reply is a decoded envelope.
type reply struct {
	status int
	header http.Header
	Code   int             `json:"code"`
	Msg    string          `json:"msg"`
	Data   json.RawMessage `json:"data"`
	raw    string
}

func (r reply) String() string { return fmt.Sprintf("%d %s", r.status, r.raw) }

func (r reply) into(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Data, v); err != nil {
		t.Fatalf("decode data of %s: %v", r, err)
	}
}

// req sends one request; hdr alternates names and values.
func (s *server) req(t *testing.T, method, path, body string, hdr ...string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := s.client.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := reply{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: not an envelope: %d %q", method, path, resp.StatusCode, raw)
	}
	if out.Code != resp.StatusCode {
		t.Fatalf("%s %s: envelope code %d but HTTP status %d", method, path, out.Code, resp.StatusCode)
	}
	return out
}

func expect(t *testing.T, r reply, status int, msgPart string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("got %s, want %d", r, status)
	}
	if status >= 400 && (r.Msg == "" || !strings.Contains(r.Msg, msgPart)) {
		t.Fatalf("got %s, want a message containing %q", r, msgPart)
	}
}

func TestToolRoundTrip(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		s := start(t, db, "")
		const p = "/api/v1/agents/1/tools/"
		r := s.req(t, "POST", p+"write_workspace_memory_file", `{"filename":"memory/2026-04-01.md","content":"# 2026-04-01\n\n- 用户喜欢 Go"}`, "X-Tool-Call-Id", "call_1")
		expect(t, r, 200, "")
		var w tool.WriteResult
		r.into(t, &w)
		if w != (tool.WriteResult{AgentID: 1, Filename: "memory/2026-04-01.md", Created: true, Enabled: false,
			BytesWritten: len("# 2026-04-01\n\n- 用户喜欢 Go"), Version: 1, Message: "工作区记忆文件已创建"}) {
			t.Fatalf("write: %+v", w)
		}
		// A write with a stale expectedVersion is refused: 409 (issue 9 point 20).
		r = s.req(t, "POST", p+"write_workspace_memory_file", `{"filename":"memory/2026-04-01.md","content":"x","expectedVersion":7}`)
		expect(t, r, 409, "expected version 7")
		var rd tool.ReadResult
		r = s.req(t, "POST", p+"read_workspace_memory_file", `{"filename":"memory/2026-04-01.md"}`)
		expect(t, r, 200, "")
		r.into(t, &rd)
		if rd.AgentID != 1 || rd.Content != "# 2026-04-01\n\n- 用户喜欢 Go" || rd.FileSize != int64(len(rd.Content)) || rd.Enabled || rd.UpdateTime.IsZero() {
			t.Fatalf("read: %+v", rd)
		}
		var e tool.EditResult
		r = s.req(t, "POST", p+"edit_workspace_memory_file", `{"filename":"memory/2026-04-01.md","oldText":"Go","newText":"Go 和 Rust","replaceAll":false}`)
		expect(t, r, 200, "")
		r.into(t, &e)
		if e.Replacements != 1 || e.ReplaceAll || e.Message != "工作区记忆文件编辑成功" || e.FileSizeAfter != int64(len("# 2026-04-01\n\n- 用户喜欢 Go 和 Rust")) {
			t.Fatalf("edit: %+v", e)
		}
		var l tool.ListResult
		r = s.req(t, "POST", p+"list_workspace_memory_files", `{"filenamePrefix":"memory/"}`)
		expect(t, r, 200, "")
		r.into(t, &l)
		if l.AgentID != 1 || l.Count != 1 || len(l.Files) != 1 || l.Files[0].Filename != "memory/2026-04-01.md" || l.Files[0].FileSize != e.FileSizeAfter {
			t.Fatalf("list: %+v", l)
		}
		// An empty body is an empty argument object.
		expect(t, s.req(t, "POST", p+"list_workspace_memory_files", ""), 200, "")

		h := s.req(t, "GET", "/api/v1/agents/1/files/memory/2026-04-01.md/history", "")
		expect(t, h, 200, "")
		var hist struct {
			History []workspace.HistoryEntry `json:"history"`
		}
		h.into(t, &hist)
		if len(hist.History) != 1 || hist.History[0].Actor != "tool" || hist.History[0].Action != "edit" {
			t.Fatalf("history after a tool edit: %+v", hist.History)
		}

		expect(t, s.req(t, "POST", p+"delete_workspace_memory_file", `{}`), 404, "unknown tool")
		expect(t, s.req(t, "POST", p+"read_workspace_memory_file", `{"agentId":2,"filename":"MEMORY.md"}`), 400, "agentId is not an argument")
		expect(t, s.req(t, "POST", p+"read_workspace_memory_file", `{"filename":"nope.md"}`), 404, "not found")
		expect(t, s.req(t, "POST", p+"edit_workspace_memory_file", `{"filename":"MEMORY.md","oldText":"no such text","newText":"x"}`), 400, "oldText not found")
		expect(t, s.req(t, "POST", "/api/v1/agents/0/tools/read_workspace_memory_file", `{"filename":"MEMORY.md"}`), 400, "agentId")
	})
}

func TestRefusedNames(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		s := start(t, db, "")
		for _, name := range []string{"../x.md", "/etc/a.md", "a.txt", "memory/../../x.md"} {
			body, _ := json.Marshal(map[string]string{"filename": name, "content": "x"})
			r := s.req(t, "POST", "/api/v1/agents/1/tools/write_workspace_memory_file", string(body))
			expect(t, r, 400, "")
			if !strings.Contains(r.Msg, "filename") {
				t.Errorf("tool write %q: message %q does not say what was wrong", name, r.Msg)
			}
			body, _ = json.Marshal(map[string]string{"filename": name})
			expect(t, s.req(t, "POST", "/api/v1/agents/1/tools/read_workspace_memory_file", string(body)), 400, "")
			// The same names in the files API: refused, never redirected elsewhere.
			for _, m := range []string{"PUT", "GET", "DELETE"} {
				r := s.req(t, m, "/api/v1/agents/1/files/"+name, `{"content":"x"}`)
				expect(t, r, 400, "")
			}
		}
		// Nothing was written anywhere.
		var l tool.ListResult
		r := s.req(t, "POST", "/api/v1/agents/1/tools/list_workspace_memory_files", `{}`)
		r.into(t, &l)
		if l.Count != 4 {
			t.Fatalf("refused writes left files behind: %+v", l)
		}
	})
}

func TestIfMatch(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		s := start(t, db, "")
		const f = "/api/v1/agents/1/files/memory/2026-04-02.md"
		r := s.req(t, "PUT", f, `{"content":"v1"}`, "If-Match", "0")
		expect(t, r, 201, "")
		var file struct {
			workspace.File
			Created bool `json:"created"`
		}
		r.into(t, &file)
		if !file.Created || file.Version != 1 || file.Enabled || r.header.Get("ETag") != `"1"` {
			t.Fatalf("create: %+v etag %q", file, r.header.Get("ETag"))
		}
		expect(t, s.req(t, "PUT", f, `{"content":"again"}`, "If-Match", "0"), 409, "already exists")

		// Two writers that both read version 1: one wins, the other is told to re-read.
		for round := 1; round <= 3; round++ {
			version := fmt.Sprint(round)
			var wg sync.WaitGroup
			results := make([]reply, 2)
			for i := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i] = s.req(t, "PUT", f, fmt.Sprintf(`{"content":"writer %d of round %d"}`, i, round), "If-Match", `"`+version+`"`)
				}()
			}
			wg.Wait()
			codes := []int{results[0].status, results[1].status}
			if !(codes[0] == 200 && codes[1] == 409 || codes[0] == 409 && codes[1] == 200) {
				t.Fatalf("round %d: %v / %v; want one 200 and one 409", round, results[0], results[1])
			}
			for _, res := range results {
				if res.status == 409 && !strings.Contains(res.Msg, "expected version "+version) {
					t.Fatalf("conflict message %q", res.Msg)
				}
				if res.status == 200 && res.header.Get("ETag") != fmt.Sprintf(`"%d"`, round+1) {
					t.Fatalf("ETag after round %d: %q", round, res.header.Get("ETag"))
				}
			}
		}
		r = s.req(t, "GET", f, "")
		expect(t, r, 200, "")
		r.into(t, &file)
		if file.Version != 4 || !strings.HasPrefix(file.Content, "writer ") || !strings.HasSuffix(file.Content, "round 3") {
			t.Fatalf("after three rounds: %+v", file.File)
		}
		expect(t, s.req(t, "PUT", f, `{"content":"x"}`, "If-Match", "abc"), 400, "If-Match")
		expect(t, s.req(t, "PUT", "/api/v1/agents/1/files/missing.md", `{"content":"x"}`, "If-Match", "3"), 404, "not found")
		expect(t, s.req(t, "DELETE", f, "", "If-Match", "1"), 409, "expected version 1")
		expect(t, s.req(t, "PATCH", f, `{"enabled":true}`, "If-Match", "2"), 409, "")
		// Without If-Match the write goes on top of whatever is current.
		r = s.req(t, "PUT", f, `{"content":"last"}`)
		expect(t, r, 200, "")
		if r.header.Get("ETag") != `"5"` {
			t.Fatalf("unconditional write ETag %q", r.header.Get("ETag"))
		}
	})
}

// TestIfNoneMatch: PUT with If-None-Match: * creates only, on the native and the MateClaw
// route; over an existing file it answers 412 (RFC 9110 §13.1.2) and leaves the file as it was.
func TestIfNoneMatch(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		s := start(t, db, "")
		for _, route := range []struct{ base, created string }{
			{"/api/v1/agents/3/files/", "201"},
			{"/api/v1/agents/4/workspace/files/", "200"},
		} {
			f := route.base + "notes/once.md"
			for _, c := range []struct {
				name, ifMatch, ifNoneMatch string
				status                     int
				msg                        string
			}{
				{"creates", "", "*", 0, ""},
				{"existing file", "", "*", 412, "already exists (version 1)"},
				{"with If-Match 0", "0", "*", 412, "already exists"},
				{"with a version", "1", "*", 400, "contradicts If-Match: 1"},
				{"an entity tag", "", `"1"`, 400, "If-None-Match"},
			} {
				hdr := []string{"If-None-Match", c.ifNoneMatch}
				if c.ifMatch != "" {
					hdr = append(hdr, "If-Match", c.ifMatch)
				}
				r := s.req(t, "PUT", f, `{"content":"`+c.name+`"}`, hdr...)
				want := c.status
				if want == 0 {
					want = map[string]int{"201": 201, "200": 200}[route.created]
				}
				if r.status != want || !strings.Contains(r.Msg, c.msg) {
					t.Errorf("%s %s: %s; want %d %q", f, c.name, r, want, c.msg)
				}
			}
			r := s.req(t, "GET", f, "")
			var file workspace.File
			r.into(t, &file)
			if file.Version != 1 || file.Content != "creates" {
				t.Errorf("%s after refused creates: version %d %q", f, file.Version, file.Content)
			}
		}
	})
}

func TestFilesAPI(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		s := start(t, db, "")
		const a = "/api/v1/agents/7"
		r := s.req(t, "GET", a+"/files", "")
		expect(t, r, 200, "")
		var list struct {
			AgentID int64            `json:"agentId"`
			Count   int              `json:"count"`
			Files   []workspace.Info `json:"files"`
		}
		r.into(t, &list)
		if list.AgentID != 7 || list.Count != 4 || list.Files[0].Filename != "AGENTS.md" || list.Files[3].Filename != "MEMORY.md" {
			t.Fatalf("fresh agent's files: %+v", list)
		}
		expect(t, s.req(t, "PUT", a+"/files/memory/2026-04-01.md", `{"content":"day one"}`), 201, "")
		expect(t, s.req(t, "PUT", a+"/files/notes/ideas.md", `{"content":"idea"}`), 201, "")
		r = s.req(t, "GET", a+"/files?prefix=memory/", "")
		r.into(t, &list)
		if list.Count != 1 || list.Files[0].Filename != "memory/2026-04-01.md" || list.Files[0].Enabled {
			t.Fatalf("prefix list: %+v", list)
		}

		r = s.req(t, "PATCH", a+"/files/memory/2026-04-01.md", `{"enabled":true,"sortOrder":2}`)
		expect(t, r, 200, "")
		var f workspace.File
		r.into(t, &f)
		if !f.Enabled || f.SortOrder != 2 || f.Version != 2 || f.Content != "day one" {
			t.Fatalf("patch: %+v", f)
		}
		expect(t, s.req(t, "PATCH", a+"/files/memory/2026-04-01.md", `{}`), 400, "nothing to change")
		expect(t, s.req(t, "PATCH", a+"/files/memory/2026-04-01.md", `{"enabled":"yes"}`), 400, `enabled must be a boolean, got "yes"`)
		expect(t, s.req(t, "PUT", a+"/files/memory/2026-04-01.md", `{"contents":"typo"}`), 400, "unknown field")
		expect(t, s.req(t, "PUT", a+"/files/memory/2026-04-01.md", ``), 400, "empty")
		expect(t, s.req(t, "PUT", a+"/files/memory/2026-04-01.md", `{}`), 400, "content is required")
		expect(t, s.req(t, "PUT", a+"/files/memory/2026-04-01.md", `{"content":null}`), 400, "content must be a string, got null")

		r = s.req(t, "GET", a+"/system-prompt", "")
		var sp struct {
			Content string `json:"content"`
		}
		r.into(t, &sp)
		// Sort order 2 ties with PROFILE.md: byte order of the names puts "PROFILE.md" first.
		if !strings.Contains(sp.Content, "\n\n--- memory/2026-04-01.md ---\nday one\n\n--- MEMORY.md ---\n") {
			t.Fatalf("enabled note at sort order 2 (after PROFILE.md, before MEMORY.md) missing:\n%s", sp.Content)
		}

		expect(t, s.req(t, "PUT", a+"/files/memory/2026-04-01.md", `{"content":"day one, edited"}`), 200, "")
		r = s.req(t, "GET", a+"/files/memory/2026-04-01.md/history", "")
		expect(t, r, 200, "")
		var hist struct {
			Filename string                   `json:"filename"`
			Count    int                      `json:"count"`
			History  []workspace.HistoryEntry `json:"history"`
		}
		r.into(t, &hist)
		if hist.Filename != "memory/2026-04-01.md" || hist.Count != 2 || hist.History[0].Version != 2 || hist.History[0].Actor != "api" || hist.History[1].Content != "day one" {
			t.Fatalf("history: %+v", hist)
		}
		r = s.req(t, "POST", a+"/files/memory/2026-04-01.md/rollback", `{"version":1}`)
		expect(t, r, 200, "")
		r.into(t, &f)
		if f.Content != "day one" || f.Version != 4 || !f.Enabled {
			t.Fatalf("rollback: %+v", f)
		}
		expect(t, s.req(t, "POST", a+"/files/memory/2026-04-01.md/rollback", `{"version":9}`), 400, "not a previous version")
		expect(t, s.req(t, "POST", a+"/files/memory/2026-04-01.md/rollback", `{}`), 400, "version is required")
		expect(t, s.req(t, "POST", a+"/files/memory/2026-04-01.md/rollback", `{"version":1}`, "If-Match", "2"), 409, "")
		expect(t, s.req(t, "POST", a+"/files/memory/2026-04-01.md", `{"content":"x"}`), 405, "PUT")
		expect(t, s.req(t, "PUT", a+"/files/memory/2026-04-01.md/history", `{"content":"x"}`), 405, "history")
		expect(t, s.req(t, "GET", a+"/files/memory/2026-04-01.md/rollback", ""), 405, "rollback")

		r = s.req(t, "DELETE", a+"/files/notes/ideas.md", "", "If-Match", "1")
		expect(t, r, 200, "")
		expect(t, s.req(t, "GET", a+"/files/notes/ideas.md", ""), 404, "not found")
		expect(t, s.req(t, "DELETE", a+"/files/notes/ideas.md", ""), 404, "not found")
		expect(t, s.req(t, "PUT", a+"/files/notes/ideas.md", `{"content":"again"}`, "If-Match", "0"), 201, "")
		expect(t, s.req(t, "GET", a+"/files/notes/ideas.md/history", ""), 200, "")

		expect(t, s.req(t, "GET", "/api/v1/agents/abc/files", ""), 400, "agentId")
		expect(t, s.req(t, "GET", "/api/v1/nothing-here", ""), 404, "no route")
	})
}

func TestAgentAndSystemPrompt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		s := start(t, db, "")
		r := s.req(t, "GET", "/api/v1/agents/42/system-prompt", "")
		expect(t, r, 200, "")
		var sp struct {
			AgentID int64  `json:"agentId"`
			Content string `json:"content"`
		}
		r.into(t, &sp)
		last := -1
		for _, n := range []string{"AGENTS.md", "SOUL.md", "PROFILE.md", "MEMORY.md"} {
			i := strings.Index(sp.Content, "--- "+n+" ---\n")
			if i <= last {
				t.Fatalf("%s at %d (previous at %d): not in order:\n%s", n, i, last, sp.Content)
			}
			last = i
		}
		if sp.AgentID != 42 || !strings.HasPrefix(sp.Content, "--- AGENTS.md ---\n# AGENTS.md") {
			t.Fatalf("system prompt of agent 42: %+v", sp)
		}

		var ag struct {
			AgentID  int64  `json:"agentId"`
			Language string `json:"language"`
			Timezone string `json:"timezone"`
		}
		r = s.req(t, "GET", "/api/v1/agents/42", "")
		r.into(t, &ag)
		if ag.AgentID != 42 || ag.Language != "zh" || ag.Timezone != "UTC" {
			t.Fatalf("agent: %+v", ag)
		}
		r = s.req(t, "PATCH", "/api/v1/agents/42", `{"timezone":"Asia/Shanghai"}`)
		expect(t, r, 200, "")
		r.into(t, &ag)
		if ag.Language != "zh" || ag.Timezone != "Asia/Shanghai" {
			t.Fatalf("patched agent: %+v", ag)
		}
		expect(t, s.req(t, "PATCH", "/api/v1/agents/42", `{"language":"fr"}`), 400, "accepted: zh, en")
		expect(t, s.req(t, "PATCH", "/api/v1/agents/42", `{"timezone":"Mars/Base"}`), 400, "IANA")
		expect(t, s.req(t, "PATCH", "/api/v1/agents/42", `{}`), 400, "nothing to change")
		expect(t, s.req(t, "PATCH", "/api/v1/agents/42", `{"language":""}`), 400, `language "" is not supported; accepted: zh, en`)

		// A newly seen agent with language en gets English texts.
		r = s.req(t, "PATCH", "/api/v1/agents/43", `{"language":"en"}`)
		expect(t, r, 200, "")
		r = s.req(t, "POST", "/api/v1/agents/43/tools/write_workspace_memory_file", `{"filename":"x.md","content":"x"}`)
		var w tool.WriteResult
		r.into(t, &w)
		if w.Message != "Workspace memory file created" {
			t.Fatalf("message for an English agent: %q", w.Message)
		}
	})
}

func TestAuth(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		s := start(t, db, "k1=1;k2=2;adm=admin")
		k1, k2, adm := []string{"Authorization", "Bearer k1"}, []string{"Authorization", "Bearer k2"}, []string{"Authorization", "Bearer adm"}

		for _, c := range []struct{ method, path, body string }{
			{"GET", "/api/v1/agents/1/files", ""},
			{"GET", "/api/v1/agents/1/files/MEMORY.md", ""},
			{"PUT", "/api/v1/agents/1/files/MEMORY.md", `{"content":"pwned"}`},
			{"DELETE", "/api/v1/agents/1/files/MEMORY.md", ""},
			{"GET", "/api/v1/agents/1/files/MEMORY.md/history", ""},
			{"GET", "/api/v1/agents/1/files/MEMORY.md/blame", ""},
			{"GET", "/api/v1/agents/1/system-prompt", ""},
			{"PATCH", "/api/v1/agents/1", `{"language":"en"}`},
			{"POST", "/api/v1/agents/1/tools/read_workspace_memory_file", `{"filename":"MEMORY.md"}`},
			{"POST", "/api/v1/agents/1/tools/write_workspace_memory_file", `{"filename":"MEMORY.md","content":"pwned"}`},
			{"POST", "/api/v1/conversations/c1/messages", `{"agentId":1,"role":"user","content":"hi"}`},
			{"GET", "/api/v1/conversations/c1/messages?agentId=1", ""},
		} {
			expect(t, s.req(t, c.method, c.path, c.body, k2...), 403, "agent 1")
			r := s.req(t, c.method, c.path, c.body)
			expect(t, r, 401, "missing API key")
			if r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s: 401 without WWW-Authenticate", c.method, c.path)
			}
			expect(t, s.req(t, c.method, c.path, c.body, "Authorization", "Bearer wrong"), 401, "invalid API key")
		}
		// The refused writes did nothing.
		r := s.req(t, "GET", "/api/v1/agents/1/files/MEMORY.md", "", k1...)
		expect(t, r, 200, "")
		var f workspace.File
		r.into(t, &f)
		if f.Content == "pwned" || f.Version != 1 {
			t.Fatalf("agent 1's MEMORY.md changed through another agent's key: %+v", f)
		}
		expect(t, s.req(t, "POST", "/api/v1/agents/2/tools/write_workspace_memory_file", `{"filename":"a.md","content":"mine"}`, k2...), 200, "")
		// Issue 9.8: the admin scope is for operator endpoints, not for agents' memory.
		expect(t, s.req(t, "GET", "/api/v1/agents/2/files/a.md", "", adm...), 403, "may not act for agent 2")
		expect(t, s.req(t, "POST", "/api/v1/agents/2/tools/write_workspace_memory_file", `{"filename":"a.md","content":"admin"}`, adm...), 403, "")
		expect(t, s.req(t, "POST", "/api/v1/conversations/c1/messages", `{"agentId":2,"role":"user","content":"hi"}`, k2...), 201, "")
		r = s.req(t, "GET", "/api/v1/tools", "", k2...)
		expect(t, r, 200, "")
		expect(t, s.req(t, "GET", "/api/v1/tools", ""), 401, "")
	})
}

func TestToolDefinitions(t *testing.T) {
	s := start(t, storetest.SQLite(t), "")
	for _, q := range []string{"", "?language=zh", "?language=en"} {
		r := s.req(t, "GET", "/api/v1/tools"+q, "")
		expect(t, r, 200, "")
		if l := strings.ToLower(r.raw); strings.Contains(l, "agentid") || strings.Contains(l, "agent_id") {
			t.Fatalf("definitions%s mention an agent id: %s", q, r.raw)
		}
		var defs []tool.Definition
		r.into(t, &defs)
		if len(defs) != 4 {
			t.Fatalf("%d definitions", len(defs))
		}
		for i, d := range defs {
			if d.Type != "function" || d.Function.Name != tool.Names[i] || !json.Valid(d.Function.Parameters) {
				t.Fatalf("definition %d: %+v", i, d)
			}
		}
		en := strings.Contains(defs[0].Function.Description, "List your workspace")
		if en != (q == "?language=en") {
			t.Errorf("%s: description language wrong: %q", q, defs[0].Function.Description)
		}
	}
	expect(t, s.req(t, "GET", "/api/v1/tools?language=fr", ""), 400, "accepted: zh, en")
}

func TestMessages(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		s := start(t, db, "")
		const p = "/api/v1/conversations/conv-1/messages"
		r := s.req(t, "POST", p, `{"agentId":5,"role":"user","content":"我叫小王，在杭州做后端"}`)
		expect(t, r, 201, "")
		var out struct {
			AgentID        int64                  `json:"agentId"`
			ConversationID string                 `json:"conversationId"`
			Count          int                    `json:"count"`
			HasMore        bool                   `json:"hasMore"`
			Messages       []conversation.Message `json:"messages"`
		}
		r.into(t, &out)
		if out.Count != 1 || out.Messages[0].ID == 0 || out.Messages[0].ConversationID != "conv-1" || out.Messages[0].Role != "user" {
			t.Fatalf("single: %+v", out)
		}
		first := out.Messages[0].ID
		r = s.req(t, "POST", p, `{"agentId":5,"messages":[
			{"role":"assistant","content":"","toolCalls":[{"id":"call_1","type":"function","function":{"name":"read_workspace_memory_file","arguments":"{\"filename\":\"PROFILE.md\"}"}}]},
			{"role":"tool","toolCallId":"call_1","name":"read_workspace_memory_file","content":"{}"},
			{"agentId":5,"role":"assistant","content":"你好，小王！"}]}`)
		expect(t, r, 201, "")
		r.into(t, &out)
		if out.Count != 3 || out.Messages[0].ID <= first || out.Messages[2].ID <= out.Messages[1].ID || out.Messages[1].ToolCallID != "call_1" {
			t.Fatalf("batch: %+v", out)
		}
		// Another agent's conversation of the same id is another conversation.
		expect(t, s.req(t, "POST", p, `{"agentId":6,"role":"user","content":"other agent"}`), 201, "")

		r = s.req(t, "GET", p+"?agentId=5", "")
		expect(t, r, 200, "")
		r.into(t, &out)
		if out.Count != 4 || out.HasMore || out.Messages[0].Content != "我叫小王，在杭州做后端" || out.Messages[3].Content != "你好，小王！" {
			t.Fatalf("list: %+v", out)
		}
		var calls []map[string]any
		if err := json.Unmarshal(out.Messages[1].ToolCalls, &calls); err != nil || calls[0]["id"] != "call_1" {
			t.Fatalf("toolCalls did not round-trip: %s (%v)", out.Messages[1].ToolCalls, err)
		}
		r = s.req(t, "GET", fmt.Sprintf("%s?agentId=5&afterId=%d&limit=2", p, first), "")
		r.into(t, &out)
		if out.Count != 2 || !out.HasMore || out.Messages[0].Role != "assistant" {
			t.Fatalf("page: %+v", out)
		}
		r = s.req(t, "GET", fmt.Sprintf("%s?agentId=5&afterId=%d&limit=2", p, out.Messages[1].ID), "")
		r.into(t, &out)
		if out.Count != 1 || out.HasMore {
			t.Fatalf("last page: %+v", out)
		}
		r = s.req(t, "GET", p+"?agentId=6", "")
		r.into(t, &out)
		if out.Count != 1 || out.Messages[0].Content != "other agent" {
			t.Fatalf("agent 6: %+v", out)
		}
		// Storing messages seeds a newly seen agent.
		expect(t, s.req(t, "GET", "/api/v1/agents/6/files/MEMORY.md", ""), 200, "")

		for _, c := range []struct{ body, msg string }{
			{`{"role":"user","content":"hi"}`, "agentId is required"},
			{`{"agentId":0,"role":"user","content":"hi"}`, "positive"},
			{`{"agentId":5,"content":"hi"}`, "role is required"},
			{`{"agentId":5,"role":"robot","content":"hi"}`, "accepted: user, assistant, system, tool"},
			{`{"agentId":5,"role":"tool","content":"{}"}`, "toolCallId"},
			{`{"agentId":5,"role":"assistant","toolCalls":"{broken"}`, "JSON array"},
			{`{"agentId":5,"role":"assistant","toolCalls":{"id":"x"}}`, "JSON array"},
			{`{"agentId":5,"role":"assistant","toolCalls":[1,}`, "invalid JSON"},
			{`{"agentId":5,"role":"user","content":"hi","messages":[{"role":"user"}]}`, "not both"},
			{`{"agentId":5,"messages":[]}`, "empty"},
			{`{"agentId":5,"messages":[{"role":"user","content":"a"},{"role":"bad"}]}`, `messages[1].role "bad" is not supported`},
			{`{"agentId":5,"messages":[{"agentId":6,"role":"user","content":"a"}]}`, "differs"},
			{`{"agentId":5,"role":"user","text":"hi"}`, "unknown field"},
			{`not json`, "invalid JSON"},
		} {
			expect(t, s.req(t, "POST", p, c.body), 400, c.msg)
		}
		for _, q := range []struct{ query, msg string }{
			{"", "agentId is required"},
			{"?agentId=x", "agentId"},
			{"?agentId=5&limit=0", "limit"},
			{"?agentId=5&limit=20000", "limit"},
			{"?agentId=5&afterId=-1", "afterId"},
		} {
			expect(t, s.req(t, "GET", p+q.query, ""), 400, q.msg)
		}
		long := strings.Repeat("c", 129)
		expect(t, s.req(t, "POST", "/api/v1/conversations/"+long+"/messages", `{"agentId":5,"role":"user","content":"hi"}`), 400, "conversationId")
		// Nothing from the refused posts was stored.
		r = s.req(t, "GET", p+"?agentId=5", "")
		r.into(t, &out)
		if out.Count != 4 {
			t.Fatalf("refused posts stored messages: %d", out.Count)
		}
	})
}

func TestBodyLimit(t *testing.T) {
	s := start(t, storetest.SQLite(t), "")
	big := bytes.Repeat([]byte("x"), httpapi.MaxBodyBytes+1)
	body := `{"filename":"a.md","content":"` + string(big) + `"}`
	r := s.req(t, "POST", "/api/v1/agents/1/tools/write_workspace_memory_file", body)
	expect(t, r, 413, "exceeds")
}
