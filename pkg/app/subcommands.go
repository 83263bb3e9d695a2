package app

import (
	"context"
	"log/slog"
	"os"

	"github.com/matememory/matememory/pkg/config"
)

// subcommand runs operator commands other than migrate (replay, ...). It reports whether
// args named one.
func subcommand(ctx context.Context, cfg config.Config, log *slog.Logger, args []string) (int, bool) {
	switch args[0] {
	case "mcp-stdio":
		return mcpStdio(ctx, cfg, log, args[1:], os.Stdin, os.Stdout, os.Stderr), true
	case "replay":
		return replay(ctx, cfg, log, args[1:], os.Stdout, os.Stderr), true
	case "reindex":
		return reindex(ctx, cfg, log, args[1:], os.Stdout, os.Stderr), true
	case "eval":
		return evalRecall(ctx, cfg, log, args[1:], os.Stdout, os.Stderr), true
	}
	return 0, false
}
