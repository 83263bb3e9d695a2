package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/matememory/matememory/pkg/internal/mcpserver"
	"github.com/matememory/matememory/pkg/internal/tool"
)

// listGate is a Caller whose file listing blocks, once armed, until released.
type listGate struct {
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *listGate) CallFull(ctx context.Context, agentID int64, name string, _ json.RawMessage) (any, error) {
	if name == tool.ListFiles && g.armed.CompareAndSwap(true, false) {
		close(g.entered)
		<-g.release
	}
	return tool.ListResult{AgentID: agentID}, nil
}

func (g *listGate) FullDefinitions(string) []tool.Definition { return nil }

// TestServeStdioWaitsForNotifications: a change notification reads the agent's file list
// (the database) on its own goroutine; ServeStdio does not return, and so `api mcp-stdio`
// does not close the database, while one is still on its way.
func TestServeStdioWaitsForNotifications(t *testing.T) {
	g := &listGate{entered: make(chan struct{}), release: make(chan struct{})}
	hub := mcpserver.NewHub()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := mcpserver.ServeStdio(context.Background(), g, 5, "en", hub, nil, inR, outW)
		outW.Close()
		done <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.armed.Store(true)
	hub.Changed(ctx, 5, "MEMORY.md", 2)
	select {
	case <-g.entered:
	case <-ctx.Done():
		t.Fatal("the change was not notified")
	}
	_ = cs.Close()
	select {
	case err := <-done:
		close(g.release)
		t.Fatalf("ServeStdio returned (%v) while a notification was still reading", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(g.release)
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("ServeStdio did not return once the notification was done")
	}
}
