package app_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/app"
	"github.com/matememory/matememory/pkg/config"
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
