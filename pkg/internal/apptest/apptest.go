// Package apptest starts the real composition root for tests of packages that talk to a
// running MateMemory: SQLite in a temporary directory, an embedded NATS server, and HTTP on
// a free loopback port.
package apptest

import (
	"context"
	"log/slog"
	"testing"

	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/config"
)

// Start runs the all-in-one app and stops it at cleanup. keys is MATE_AUTH_KEYS syntax
// ("" = no keys); each of configure then changes the configuration before the start.
func Start(t testing.TB, keys string, configure ...func(*config.Config)) *app.App {
	t.Helper()
	cfg := config.Default()
	cfg.Mate.DataDir = t.TempDir()
	cfg.Mate.HTTP.Addr = "127.0.0.1:0"
	cfg.Mate.NATS.URL = ""
	cfg.Mate.NATS.SyncAlways = false
	cfg.Mate.Timezone = "UTC"
	if keys != "" {
		k, err := config.ParseKeys(keys)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Mate.Auth.Keys = k
	}
	for _, c := range configure {
		c(&cfg)
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
	return a
}
