package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/mcpserver"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// nameClasses are file names of every kind that once took the process down (a space, a
// quote, angle brackets, a pipe, a caret, braces, a backtick, a colon, brackets: each made
// an MCP resource URI the SDK could not parse, and it panicked) and others that a URI, a
// path or a query treats specially.
var nameClasses = []string{
	"a b.md", "my notes.md", `a"b.md`, "a<b>.md", "a|b.md", "a^b.md", "a{b}.md", "a`b.md",
	"ab:c.md", "[a].md", "a%20b.md", "%zz.md", "a#b.md", "a?b.md", "a&b=c.md", "a+b.md",
	"a;b,c.md", "trail .md", "a'b'.md", "a@b!$.md", "a~b*().md", "dir/sub dir/x y.md", "dir:x/[y].md",
	"记忆 笔记.md", "notes/2026年 计划.md", "émoji 😀.md", "Ünïcödé ß.md", "עברית.md",
	strings.Repeat("長", 80) + ".md", // 243 bytes
	strings.Repeat("n", workspace.MaxNameBytes-3) + ".md",
}

// refusedNames must be refused with a 4xx that says why.
var refusedNames = []string{
	"../x.md", "a/../b.md", "/abs.md", `a\b.md`, "x.txt", "a\x00b.md", " lead.md", "dir /x.md",
	"a\u202eb.md", "a\u200bb.md", "c:x.md", strings.Repeat("n", workspace.MaxNameBytes) + ".md",
}

// randomNames draws names from the characters above, Unicode and ASCII punctuation, so each
// run tries the same (seeded) extra names.
func randomNames(n int) []string {
	r := rand.New(rand.NewPCG(23, 1))
	alphabet := []rune(" \"<>|^{}`:[]%#?&=+;,'@!$~*()/-_.aZ9记忆😀éß\u00a0\u3000")
	var out []string
	for len(out) < n {
		var b strings.Builder
		for range 1 + r.IntN(24) {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		name := b.String() + ".md"
		if workspace.ValidateName(name) == nil && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// TestFileNamesThroughEverySurface writes files of every awkward name over REST while an MCP
// session listens on the agent, then reads each one back through every surface (REST native
// and MateClaw routes, the tool route, MCP tools and resources, the console, search after
// the recall indexer took it); refused names get a 4xx with a message. The process must stay
// up and recover no panic.
func TestFileNamesThroughEverySurface(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		cfg := config.Default()
		cfg.Mate.DataDir = t.TempDir()
		cfg.Mate.HTTP.Addr = "127.0.0.1:0"
		cfg.Mate.NATS.SyncAlways = false
		if db.Driver == "mysql" {
			cfg.Mate.Database = config.Database{Driver: "mysql", DSN: db.DSN}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		a, err := app.New(ctx, app.Options{Config: cfg, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Close)
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		base := "http://" + a.Addr
		const agent = 5

		// A listening MCP session: every change below reaches its server through the hub,
		// which lists the files again and registers each as a resource.
		changed := make(chan struct{}, 1024)
		mc := mcp.NewClient(&mcp.Implementation{Name: "names", Version: "1"}, &mcp.ClientOptions{
			ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
				select {
				case changed <- struct{}{}:
				default:
				}
			},
		})
		cs, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: fmt.Sprintf("%s/api/v1/agents/%d/mcp", base, agent), MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()

		names := append(slices.Clone(nameClasses), randomNames(25)...)
		token := map[string]string{}
		for i, name := range names {
			token[name] = fmt.Sprintf("zqxname%03d", i)
			body, _ := json.Marshal(map[string]string{"content": "# note\n\n- " + token[name] + " lives here\n"})
			st, raw := send(t, "PUT", base+filesPath(agent, name), string(body))
			if st != http.StatusCreated && st != http.StatusOK {
				t.Fatalf("PUT %q: %d %s", name, st, raw)
			}
		}
		for _, name := range refusedNames {
			for _, path := range []string{filesPath(agent, name), fmt.Sprintf("/api/v1/agents/%d/workspace/files/%s", agent, url.PathEscape(name))} {
				st, raw := send(t, "PUT", base+path, `{"content":"x"}`)
				var env struct{ Msg string }
				_ = json.Unmarshal(raw, &env)
				if st < 400 || st >= 500 || (env.Msg == "" && st != http.StatusNotFound) {
					t.Errorf("PUT %s: %d %s, want a 4xx that says why", path, st, raw)
				}
			}
			b, _ := json.Marshal(map[string]string{"filename": name, "content": "x"})
			st, raw := send(t, "POST", fmt.Sprintf("%s/api/v1/agents/%d/tools/write_workspace_memory_file", base, agent), string(b))
			if st != http.StatusBadRequest || !strings.Contains(string(raw), "filename") {
				t.Errorf("tool write %q: %d %s, want 400 naming the filename", name, st, raw)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_workspace_memory_file", Arguments: map[string]any{"filename": name, "content": "x"}})
			if err != nil || !res.IsError {
				t.Errorf("MCP write %q: %v %+v, want a tool error", name, err, res)
			}
			if utf8.ValidString(name) {
				if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "memory:///" + url.PathEscape(name)}); err == nil {
					t.Errorf("MCP read of refused name %q succeeded", name)
				}
			}
		}

		list, err := cs.ListResources(ctx, nil)
		if err != nil {
			t.Fatalf("resources/list after the writes: %v", err)
		}
		listed := map[string]bool{}
		for _, r := range list.Resources {
			listed[r.URI] = true
			u, err := url.Parse(r.URI)
			if err != nil || u.Scheme != "memory" || u.Host != "" {
				t.Errorf("listed URI %q: %v (host %q), want memory:///<name>", r.URI, err, u.Host)
			}
		}
		for _, name := range names {
			want := "# note\n\n- " + token[name] + " lives here\n"
			uri := mcpserver.ResourceURI(name)
			if !listed[uri] {
				t.Errorf("resources/list lacks %s (%q)", uri, name)
			}
			rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != want {
				t.Errorf("resources/read %s: %v", uri, err)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_workspace_memory_file", Arguments: map[string]any{"filename": name}})
			if err != nil || res.IsError || !strings.Contains(fmt.Sprint(res.StructuredContent), token[name]) {
				t.Errorf("MCP read_workspace_memory_file %q: %v %+v", name, err, res)
			}
			for _, path := range []string{filesPath(agent, name), fmt.Sprintf("/api/v1/agents/%d/workspace/files/%s", agent, url.PathEscape(name))} {
				st, raw := send(t, "GET", base+path, "")
				if st != http.StatusOK || !strings.Contains(string(raw), token[name]) {
					t.Errorf("GET %s: %d %.200s", path, st, raw)
				}
			}
			b, _ := json.Marshal(map[string]string{"filename": name})
			st, raw := send(t, "POST", fmt.Sprintf("%s/api/v1/agents/%d/tools/read_workspace_memory_file", base, agent), string(b))
			if st != http.StatusOK || !strings.Contains(string(raw), token[name]) {
				t.Errorf("tool read %q: %d %.200s", name, st, raw)
			}
			st, raw = send(t, "GET", fmt.Sprintf("%s/console/agents/%d/file?name=%s", base, agent, url.QueryEscape(name)), "")
			if st != http.StatusOK || !strings.Contains(string(raw), token[name]) {
				t.Errorf("console file page %q: %d %.200s", name, st, raw)
			}
		}
		st, raw := send(t, "GET", fmt.Sprintf("%s/console/agents/%d", base, agent), "")
		if st != http.StatusOK {
			t.Errorf("console agent page: %d %.200s", st, raw)
		}

		// Search finds each file by its token once the indexer took it.
		for _, name := range names {
			body, _ := json.Marshal(map[string]any{"query": token[name], "maxResults": 5})
			deadline := time.Now().Add(30 * time.Second)
			for {
				st, raw := send(t, "POST", fmt.Sprintf("%s/api/v1/agents/%d/memory/search", base, agent), string(body))
				var env struct {
					Data struct {
						Hits []struct{ Filename string }
					}
				}
				_ = json.Unmarshal(raw, &env)
				if st == http.StatusOK && slices.ContainsFunc(env.Data.Hits, func(h struct{ Filename string }) bool { return h.Filename == name }) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("search for %s never found %q: %d %.300s", token[name], name, st, raw)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}

		// Deleting them changes the list again; the session and the process are still up.
		for _, name := range names {
			if st, raw := send(t, "DELETE", base+filesPath(agent, name), ""); st != http.StatusOK {
				t.Errorf("DELETE %q: %d %s", name, st, raw)
			}
		}
		if _, err := cs.ListResources(ctx, nil); err != nil {
			t.Fatalf("resources/list after the deletes: %v", err)
		}
		if st, raw := send(t, "GET", base+"/healthz", ""); st != http.StatusOK {
			t.Fatalf("healthz: %d %s", st, raw)
		}
		for _, where := range []string{"http", "mcp.method", "mcp.hub", "mcp.resources.add", "recall.index"} {
			if n := a.Guard.Count(where); n != 0 {
				t.Errorf("%v panics recovered in %s", n, where)
			}
		}
	})
}

// filesPath is the native route of a file, its name percent-encoded segment by segment (the
// route takes the rest of the path).
func filesPath(agent int64, name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return fmt.Sprintf("/api/v1/agents/%d/files/%s", agent, strings.Join(segs, "/"))
}

func send(t *testing.T, method, u, body string) (int, []byte) {
	t.Helper()
	r, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatalf("%s %q: %v", method, u, err)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v (is the process still up?)", method, u, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}
