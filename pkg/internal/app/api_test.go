package app_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// startApp runs the all-in-one process as `make run` does (embedded NATS, data under a
// temporary folder) on a loopback port, against db.
func startApp(t *testing.T, db storetest.DB, keys string) string {
	t.Helper()
	cfg := config.Default()
	cfg.Mate.DataDir = t.TempDir()
	cfg.Mate.HTTP.Addr = "127.0.0.1:0"
	if db.Driver == "mysql" {
		cfg.Mate.Database = config.Database{Driver: "mysql", DSN: db.DSN}
	}
	var err error
	if cfg.Mate.Auth.Keys, err = config.ParseKeys(keys); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := app.New(ctx, app.Options{Config: cfg, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return "http://" + a.Addr
}

type result struct {
	status int
	Code   int             `json:"code"`
	Msg    string          `json:"msg"`
	Data   json.RawMessage `json:"data"`
}

func do(t testing.TB, method, url, key, body string, hdr ...string) result {
	t.Helper()
	r, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		r.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := result{status: resp.StatusCode}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: %d %q", method, url, resp.StatusCode, raw)
	}
	return out
}

// TestDoneWhen walks the acceptance list against the real process.
func TestDoneWhen(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		base := startApp(t, db, "k1=1;k2=2;adm=admin")
		tools := base + "/api/v1/agents/1/tools/"

		// Round trip through the tool endpoint, with the spec's fields.
		r := do(t, "POST", tools+"write_workspace_memory_file", "k1", `{"filename":"memory/2026-04-01.md","content":"# 2026-04-01\n\n..."}`)
		var w map[string]any
		_ = json.Unmarshal(r.Data, &w)
		if r.status != 200 || w["created"] != true || w["overwritten"] != false || w["enabled"] != false || w["bytesWritten"] != 17.0 || w["message"] != "工作区记忆文件已创建" || w["agentId"] != 1.0 {
			t.Fatalf("write: %d %s", r.status, r.Data)
		}
		r = do(t, "POST", tools+"edit_workspace_memory_file", "k1", `{"filename":"memory/2026-04-01.md","oldText":"...","newText":"- 新内容","replaceAll":false}`)
		var e map[string]any
		_ = json.Unmarshal(r.Data, &e)
		if r.status != 200 || e["replacements"] != 1.0 || e["replaceAll"] != false || e["message"] != "工作区记忆文件编辑成功" || e["fileSizeAfter"] != float64(len("# 2026-04-01\n\n- 新内容")) {
			t.Fatalf("edit: %d %s", r.status, r.Data)
		}
		r = do(t, "POST", tools+"read_workspace_memory_file", "k1", `{"filename":"memory/2026-04-01.md"}`)
		var rd map[string]any
		_ = json.Unmarshal(r.Data, &rd)
		if r.status != 200 || rd["content"] != "# 2026-04-01\n\n- 新内容" || rd["enabled"] != false || rd["updateTime"] == nil {
			t.Fatalf("read: %d %s", r.status, r.Data)
		}
		r = do(t, "POST", tools+"list_workspace_memory_files", "k1", `{"filenamePrefix":"memory/"}`)
		var l struct {
			AgentID int64            `json:"agentId"`
			Count   int              `json:"count"`
			Files   []map[string]any `json:"files"`
		}
		_ = json.Unmarshal(r.Data, &l)
		if r.status != 200 || l.Count != 1 || l.Files[0]["filename"] != "memory/2026-04-01.md" {
			t.Fatalf("list: %d %s", r.status, r.Data)
		}

		// Unsafe names are refused with 400 and a message.
		for _, name := range []string{"../x.md", "/etc/a.md", "a.txt", "memory/../../x.md"} {
			b, _ := json.Marshal(map[string]string{"filename": name, "content": "x"})
			r := do(t, "POST", tools+"write_workspace_memory_file", "k1", string(b))
			if r.status != 400 || r.Code != 400 || r.Msg == "" {
				t.Errorf("%s: %d %+v", name, r.status, r)
			}
		}

		// Two PUTs with the same If-Match: one 200, one 409.
		f := base + "/api/v1/agents/1/files/MEMORY.md"
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i] = do(t, "PUT", f, "k1", `{"content":"# MEMORY.md\n\nwriter"}`, "If-Match", "1").status
			}()
		}
		wg.Wait()
		if codes[0]+codes[1] != 200+409 || codes[0] == codes[1] {
			t.Fatalf("concurrent PUTs with If-Match 1: %v", codes)
		}

		// A fresh agent's system prompt shows the four core files in order.
		r = do(t, "GET", base+"/api/v1/agents/2/system-prompt", "k2", "")
		var sp struct {
			Content string `json:"content"`
		}
		_ = json.Unmarshal(r.Data, &sp)
		last := -1
		for _, n := range []string{"--- AGENTS.md ---", "--- SOUL.md ---", "--- PROFILE.md ---", "--- MEMORY.md ---"} {
			i := strings.Index(sp.Content, n)
			if i <= last {
				t.Fatalf("system prompt order: %s at %d after %d\n%s", n, i, last, sp.Content)
			}
			last = i
		}

		// Agent 2's key cannot touch agent 1; no key is 401.
		if r := do(t, "GET", f, "k2", ""); r.status != 403 {
			t.Errorf("k2 on agent 1's file: %d", r.status)
		}
		if r := do(t, "POST", tools+"read_workspace_memory_file", "k2", `{"filename":"MEMORY.md"}`); r.status != 403 {
			t.Errorf("k2 on agent 1's tools: %d", r.status)
		}
		if r := do(t, "GET", f, "", ""); r.status != 401 {
			t.Errorf("no key: %d", r.status)
		}
		if r := do(t, "GET", f, "adm", ""); r.status != 403 {
			t.Errorf("admin-only key on an agent's file: %d, want 403 (admin is for operator endpoints)", r.status)
		}

		// The definitions carry no agent id; readiness sees the database and NATS.
		r = do(t, "GET", base+"/api/v1/tools", "k2", "")
		if r.status != 200 || strings.Contains(strings.ToLower(string(r.Data)), "agentid") {
			t.Errorf("tools: %d %s", r.status, r.Data)
		}
		r = do(t, "GET", base+"/readyz", "", "")
		if r.status != 200 || !strings.Contains(string(r.Data), `"database":"ok"`) || !strings.Contains(string(r.Data), `"nats":"ok"`) {
			t.Errorf("readyz: %d %s", r.status, r.Data)
		}
	})
}

func TestOpenServerStaysOnLoopback(t *testing.T) {
	cfg := config.Default()
	cfg.Mate.DataDir = t.TempDir()
	cfg.Mate.HTTP.Addr = "0.0.0.0:0"
	ctx := context.Background()
	a, err := app.New(ctx, app.Options{Config: cfg, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	err = a.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "without API keys") {
		t.Fatalf("start on 0.0.0.0 without keys: %v", err)
	}
}
