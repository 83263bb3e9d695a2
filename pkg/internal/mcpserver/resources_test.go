package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/yosida95/uritemplate/v3"

	"github.com/matememory/matememory/pkg/internal/panics"
	"github.com/matememory/matememory/pkg/internal/tool"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// FuzzResourceURI: every name the workspace accepts gives a URI that parses (the SDK panics
// on one that does not), keeps the name in its path with an empty host, matches the
// advertised template, and reads back to the same name.
func FuzzResourceURI(f *testing.F) {
	for _, s := range []string{
		"MEMORY.md", "memory/2026-04-01.md", "a b.md", `a"b.md`, "a<b>.md", "a|b.md", "a^b.md",
		"a{b}.md", "a`b.md", "ab:c.md", "[a].md", "a%20b.md", "%zz.md", "a#b?c.md", "记忆/笔记.md",
		"😀 x.md", "a\u00a0b.md", strings.Repeat("長", 80) + ".md",
	} {
		f.Add(s)
	}
	tmpl, err := uritemplate.New(ResourceTemplate)
	if err != nil {
		f.Fatal(err)
	}
	re := tmpl.Regexp()
	f.Fuzz(func(t *testing.T, name string) {
		if workspace.ValidateName(name) != nil {
			return
		}
		uri := ResourceURI(name)
		u, err := url.Parse(uri)
		if err != nil {
			t.Fatalf("ResourceURI(%q) = %q does not parse: %v", name, uri, err)
		}
		if u.Scheme != "memory" || u.Host != "" || u.Path != "/"+name {
			t.Fatalf("ResourceURI(%q) = %q: scheme %q host %q path %q", name, uri, u.Scheme, u.Host, u.Path)
		}
		if !re.MatchString(uri) {
			t.Fatalf("ResourceURI(%q) = %q does not match the template %s", name, uri, ResourceTemplate)
		}
		if got := resourceName(uri); got != name {
			t.Fatalf("resourceName(%q) = %q, want %q", uri, got, name)
		}
	})
}

// panicky is a tool caller whose listing (resources/list) or tool calls panic on demand.
type panicky struct {
	listPanics, callPanics atomic.Bool
}

func (p *panicky) CallFull(_ context.Context, _ int64, name string, _ json.RawMessage) (any, error) {
	if name == tool.ListFiles {
		if p.listPanics.Load() {
			panic("list exploded")
		}
		return tool.ListResult{Files: []tool.FileInfo{{Filename: "a b.md"}}}, nil
	}
	if p.callPanics.Load() {
		panic("tool exploded")
	}
	return tool.ReadResult{Content: "ok"}, nil
}

func (p *panicky) FullDefinitions(string) []tool.Definition {
	return tool.Definitions("en")
}

// A panic in a method handler answers that request with an internal error; the session
// goes on, the panic is logged with its context and counted.
func TestMethodPanicIsRecovered(t *testing.T) {
	var logs bytes.Buffer
	g := panics.New(slog.New(slog.NewTextHandler(&logs, nil)), prometheus.NewRegistry())
	p := &panicky{}
	s := New(p, 7, Options{Language: "en", Transport: Stdio, Notify: true, Guard: g})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := connectInMemory(t, ctx, s)

	p.listPanics.Store(true)
	_, err := cs.ListResources(ctx, nil)
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInternalError {
		t.Fatalf("resources/list with a panicking listing: %v, want an internal error", err)
	}
	p.callPanics.Store(true)
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool.ReadFile, Arguments: map[string]any{"filename": "a b.md"}}); err == nil {
		t.Fatal("a panicking tool call answered no error")
	}
	if got := g.Count("mcp.method"); got != 2 {
		t.Fatalf("recovered panics = %v, want 2", got)
	}
	for _, want := range []string{"agent=7", "method=resources/list", "list exploded"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q", want)
		}
	}

	// The session still works, and a name that needs escaping is listed with a valid URI.
	p.listPanics.Store(false)
	list, err := cs.ListResources(ctx, nil)
	if err != nil || len(list.Resources) != 1 || list.Resources[0].URI != "memory:///a%20b.md" {
		t.Fatalf("resources/list after the panics: %+v %v", list, err)
	}
}

// A panic while the hub tells a server of a change is recovered and counted; later changes
// are still told.
func TestHubRecoversPanics(t *testing.T) {
	g := panics.New(slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	p := &panicky{}
	s := New(p, 9, Options{Language: "en", Transport: Stdio, Notify: true, Guard: g})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connectInMemory(t, ctx, s)
	h := NewHub(HubGuard(g))
	h.Add(s)
	p.listPanics.Store(true)
	h.Changed(ctx, 9, "a b.md", 1)
	s.Drain()
	if got := g.Count("mcp.hub"); got != 1 {
		t.Fatalf("hub panics recovered = %v, want 1", got)
	}
	p.listPanics.Store(false)
	h.Changed(ctx, 9, "a b.md", 2)
	s.Drain()
	if got := g.Count("mcp.hub"); got != 1 {
		t.Fatalf("hub panics recovered = %v after a good change, want still 1", got)
	}
}

// connectInMemory connects a client session to s over in-memory transports, closed at the
// test's end.
func connectInMemory(t *testing.T, ctx context.Context, s *Server) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// Every cacheable result (the tool and resource lists, a resource's content) is one
// agent's memory: its cacheScope is "private", never the SDK's default "public".
func TestCacheableResultsArePrivate(t *testing.T) {
	ctx := context.Background()
	cs := connectInMemory(t, ctx, New(&panicky{}, 9, Options{Language: "en"}))
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: ResourceURI("a b.md")})
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]string{"tools/list": tools.CacheScope, "resources/list": res.CacheScope,
		"resources/templates/list": tmpl.CacheScope, "resources/read": read.CacheScope} {
		if got != "private" {
			t.Errorf("%s cacheScope = %q, want \"private\"", name, got)
		}
	}
}
