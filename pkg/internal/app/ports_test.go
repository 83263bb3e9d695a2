package app_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/config"
)

// TestTakenPortsNameTheirSetting: a taken embedded-NATS or HTTP port fails at once with the
// setting, its variable and the address in the message.
func TestTakenPortsNameTheirSetting(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()

	cfg := config.Default()
	cfg.Mate.DataDir = t.TempDir()
	cfg.Mate.HTTP.Addr = "127.0.0.1:0"
	cfg.Mate.NATS.EmbeddedListen = addr
	start := time.Now()
	_, err = app.New(context.Background(), app.Options{Config: cfg, Log: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "mate.nats.embedded-listen (env MATE_NATS_EMBEDDED_LISTEN) "+addr) ||
		!strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("taken NATS port: %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("took %s to notice", time.Since(start))
	}

	cfg = config.Default()
	cfg.Mate.DataDir = t.TempDir()
	cfg.Mate.HTTP.Addr = addr
	a, err := app.New(context.Background(), app.Options{Config: cfg, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "mate.http.addr (env MATE_HTTP_ADDR) "+addr) ||
		!strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("taken HTTP port: %v", err)
	}
}

// TestWorkerProcessesServeOnlyProbes: the summarizer, emergence and scheduler processes
// serve health, readiness and metrics on their port, and no /api/v1 or MCP route.
func TestWorkerProcessesServeOnlyProbes(t *testing.T) {
	for _, target := range []string{app.TargetSummarizer, app.TargetEmergence, app.TargetScheduler} {
		t.Run(target, func(t *testing.T) {
			cfg := config.Default()
			cfg.Mate.DataDir = t.TempDir()
			cfg.Mate.HTTP.Addr = "127.0.0.1:0"
			a, err := app.New(context.Background(), app.Options{Config: cfg, Log: slog.New(slog.DiscardHandler), Targets: []string{target}})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if err := a.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			base := "http://" + a.Addr
			for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
				if r := get(t, base+p); r == "" {
					t.Errorf("%s: empty", p)
				}
			}
			for _, c := range []struct{ method, path, body string }{
				{"GET", "/api/v1/agents/1/files", ""}, {"GET", "/api/v1/agents/1/system-prompt", ""},
				{"POST", "/api/v1/agents/1/tools/read_workspace_memory_file", `{"filename":"MEMORY.md"}`},
				{"POST", "/api/v1/agents/1/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
				{"POST", "/api/v1/events/conversation-completed", `{}`}, {"GET", "/api/v1/cron-jobs", ""},
				{"POST", "/api/v1/agents/1/conversations/c/context", `{"userMessage":"x"}`},
			} {
				if r := do(t, c.method, base+c.path, "", c.body); r.status != 404 {
					t.Errorf("%s %s on the %s process: %d, want 404", c.method, c.path, target, r.status)
				}
			}
		})
	}
}

// TestMetricsShowThePool: /metrics carries the database pool's figures (database/sql's
// DBStats), labelled with the driver.
func TestMetricsShowThePool(t *testing.T) {
	cfg := config.Default()
	cfg.Mate.DataDir = t.TempDir()
	cfg.Mate.HTTP.Addr = "127.0.0.1:0"
	a, err := app.New(context.Background(), app.Options{Config: cfg, Log: slog.New(slog.DiscardHandler), Targets: []string{app.TargetScheduler}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	body := get(t, "http://"+a.Addr+"/metrics")
	for _, want := range []string{
		`go_sql_max_open_connections{db_name="sqlite"} 8`,
		`go_sql_open_connections{db_name="sqlite"}`,
		`go_sql_max_idle_closed_total{db_name="sqlite"}`,
		`go_sql_max_lifetime_closed_total{db_name="sqlite"}`,
		`go_sql_wait_count_total{db_name="sqlite"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
