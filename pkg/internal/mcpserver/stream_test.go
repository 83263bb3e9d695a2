package mcpserver_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/mcpserver"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/tool"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// An event stream outlives the server's write timeout (which bounds answers, not streams):
// a notification sent after it still arrives, for both protocols.
func TestEventStreamsOutliveTheWriteTimeout(t *testing.T) {
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("protocol "+version, func(t *testing.T) {
			hub := mcpserver.NewHub()
			ws := workspace.New(storetest.SQLite(t).DB, workspace.WithChangeHook(hub.Changed))
			api := httpapi.New(httpapi.NewAuthenticator(nil), prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
			mcpserver.Register(api, tool.New(ws), mcpserver.HTTPOptions{Hub: hub})
			srv := httptest.NewUnstartedServer(api)
			srv.Config.WriteTimeout = 500 * time.Millisecond
			srv.Start()
			defer srv.Close()

			updated := make(chan string, 4)
			c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
				ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/api/v1/agents/1/mcp", MaxRetries: -1},
				&mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "memory:///MEMORY.md"}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1200 * time.Millisecond) // past the write timeout
			if _, err := ws.Append(ctx, 1, "MEMORY.md", "- late fact", "", workspace.Change{Actor: store.ActorAPI}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-updated:
			case <-time.After(5 * time.Second):
				t.Fatal("no notification after the write timeout: the stream was cut")
			}
		})
	}
}
