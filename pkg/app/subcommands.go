package app

import (
	"context"
	"log/slog"

	"github.com/matememory/matememory/pkg/config"
)

// subcommand runs operator commands other than migrate (replay, ...). It reports whether
// args named one.
func subcommand(ctx context.Context, cfg config.Config, log *slog.Logger, args []string) (int, bool) {
	return 0, false
}
