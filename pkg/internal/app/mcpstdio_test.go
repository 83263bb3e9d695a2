package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/cronjob"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/tool"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// TestMCPStdio runs the `api mcp-stdio` subcommand over pipes, with an SDK client on the other
// ends, against the configured SQLite database and a NATS URL nothing listens on: stdio must
// not need the bus.
func TestMCPStdio(t *testing.T) {
	cfg := config.Default()
	cfg.Mate.DataDir = t.TempDir()
	cfg.Mate.Timezone = "UTC"
	cfg.Mate.NATS.URL = "nats://127.0.0.1:1"
	log := slog.New(slog.DiscardHandler)

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	code := make(chan int, 1)
	go func() {
		c := mcpStdio(context.Background(), cfg, log, []string{"--agent", "4", "--language", "en"}, inR, outW, io.Discard)
		outW.Close()
		code <- c
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	want := slices.Concat(tool.Names, tool.MoreNames, []string{tool.SearchMemory, tool.ReadLines})
	if len(names) != len(want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}
	for _, n := range want {
		if !slices.Contains(names, n) {
			t.Fatalf("tools = %v, missing %s", names, n)
		}
	}

	steps := []struct {
		tool string
		args map[string]any
	}{
		{tool.WriteFile, map[string]any{"filename": "local.md", "content": "from stdio"}},
		{tool.ReadFile, map[string]any{"filename": "local.md"}},
		{tool.EditFile, map[string]any{"filename": "local.md", "oldText": "stdio", "newText": "a local agent"}},
		{tool.SearchMemory, map[string]any{"query": "local agent"}},
		{tool.ListFiles, map[string]any{}},
	}
	var last string
	for _, s := range steps {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: s.tool, Arguments: s.args})
		if err != nil {
			t.Fatalf("%s: %v", s.tool, err)
		}
		last = res.Content[0].(*mcp.TextContent).Text
		if res.IsError {
			t.Fatalf("%s: tool error %s", s.tool, last)
		}
		// Without a bus, stdio indexes its own writes before answering: the edit is found.
		if s.tool == tool.SearchMemory && !strings.Contains(last, `"filename":"local.md"`) {
			t.Fatalf("search over stdio did not find the edited file: %s", last)
		}
	}
	var list tool.ListResult
	if err := json.Unmarshal([]byte(last), &list); err != nil {
		t.Fatal(err)
	}
	if list.AgentID != 4 || !slices.ContainsFunc(list.Files, func(f tool.FileInfo) bool { return f.Filename == "local.md" }) {
		t.Fatalf("list = %+v", list)
	}

	// A name with a space (a model's "my notes.md") is listed and read as a resource; it
	// once made the SDK panic and the process exit.
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool.WriteFile, Arguments: map[string]any{"filename": "my notes.md", "content": "spaced"}}); err != nil || res.IsError {
		t.Fatalf("write my notes.md: %v %+v", err, res)
	}
	resources, err := cs.ListResources(ctx, nil)
	if err != nil || !slices.ContainsFunc(resources.Resources, func(r *mcp.Resource) bool { return r.URI == "memory:///my%20notes.md" }) {
		t.Fatalf("resources/list over stdio: %+v %v", resources, err)
	}
	if rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "memory:///my%20notes.md"}); err != nil || rr.Contents[0].Text != "spaced" {
		t.Fatalf("resources/read my notes.md over stdio: %v", err)
	}

	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("mcp-stdio exited %d after the client closed, want 0", c)
		}
	case <-ctx.Done():
		t.Fatal("mcp-stdio did not end after the client closed stdin")
	}

	// The change is in the configured database, made as a tool change.
	db, err := store.Open(cfg.Mate.Database.Driver, cfg.Mate.Database.DSN, cfg.Mate.DataDir, store.WithSQLiteSynchronous(cfg.Mate.Database.SQLiteSynchronous))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(db)
	ws := workspace.New(db)
	f, err := ws.Get(context.Background(), 4, "local.md")
	if err != nil {
		t.Fatal(err)
	}
	if f.Content != "from a local agent" {
		t.Fatalf("content = %q", f.Content)
	}
	hist, err := ws.History(context.Background(), 4, "local.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) == 0 || hist[0].Actor != store.ActorTool {
		t.Fatalf("history = %+v", hist)
	}
	// First seen over stdio, the agent got what every new agent gets: its consolidation job.
	var jobs []store.CronJob
	if err := db.Where("agent_id = ?", 4).Find(&jobs).Error; err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].Name != cronjob.ConsolidationName || jobs[0].TaskType != cronjob.TaskEmergence {
		t.Fatalf("cron jobs of agent 4 = %+v, want its consolidation job", jobs)
	}
}

func TestMCPStdioUsage(t *testing.T) {
	cfg := config.Default()
	cfg.Mate.DataDir = t.TempDir()
	log := slog.New(slog.DiscardHandler)
	cases := []struct {
		args []string
		want string
	}{
		{nil, "usage: api mcp-stdio --agent N"},
		{[]string{"--agent", "0"}, "usage: api mcp-stdio --agent N"},
		{[]string{"--agent", "x"}, `invalid value "x" for flag -agent`},
		{[]string{"--agent", "1", "--language", "fr"}, `--language "fr" is not supported`},
		{[]string{"--agent", "1", "extra"}, "usage: api mcp-stdio --agent N"},
	}
	for _, tc := range cases {
		var stderr, stdout bytes.Buffer
		if c := mcpStdio(context.Background(), cfg, log, tc.args, eofReader{}, &stdout, &stderr); c != 2 {
			t.Errorf("args %q: exit %d, want 2", tc.args, c)
		}
		if !strings.Contains(stderr.String(), tc.want) || stdout.Len() > 0 {
			t.Errorf("args %q: stderr %q (want %q), stdout %q (want nothing)", tc.args, stderr.String(), tc.want, stdout.String())
		}
	}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
