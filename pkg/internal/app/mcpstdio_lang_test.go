package app

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/tool"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// `mcp-stdio --language en` seeds a new agent's core files in English although mate.language
// is zh, serves them as resources, and its errors speak of stdio and --agent, not of URLs and
// API keys.
func TestMCPStdioLanguageSeedsEnglish(t *testing.T) {
	cfg := config.Default()
	cfg.Mate.DataDir = t.TempDir()
	cfg.Mate.Timezone = "UTC"
	cfg.Mate.Language = "zh"
	cfg.Mate.NATS.URL = "nats://127.0.0.1:1"

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	code := make(chan int, 1)
	go func() {
		c := mcpStdio(context.Background(), cfg, slog.New(slog.DiscardHandler), []string{"--agent", "9", "--language", "en"}, inR, outW, io.Discard)
		outW.Close()
		code <- c
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "memory://MEMORY.md"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.Contents[0].Text, workspace.DefaultContent("en", "MEMORY.md"); got != want || got == workspace.DefaultContent("zh", "MEMORY.md") {
		t.Fatalf("MEMORY.md seeded as %q, want the English default %q", got, want)
	}
	call, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool.ReadFile, Arguments: map[string]any{"filename": "MEMORY.md", "agentId": 2}})
	if err != nil {
		t.Fatal(err)
	}
	msg := call.Content[0].(*mcp.TextContent).Text
	if !call.IsError || !strings.Contains(msg, "stdio") || !strings.Contains(msg, "--agent") ||
		strings.Contains(msg, "URL") || strings.Contains(msg, "API key") {
		t.Fatalf("agentId over stdio: %q", msg)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	if c := <-code; c != 0 {
		t.Fatalf("exit %d", c)
	}
}
