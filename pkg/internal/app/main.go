package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/store"
)

// serve runs the parts target names (the binary's own part when empty) until ctx ends.
func serve(ctx context.Context, cfg config.Config, log *slog.Logger, defaultTarget, target string, stderr io.Writer) int {
	targets := []string{defaultTarget}
	if target != "" {
		targets = strings.Split(target, ",")
	} else if defaultTarget == TargetAPI && cfg.Mate.NATS.URL == "" {
		targets = []string{TargetAll}
	}
	for _, t := range targets {
		switch t {
		case TargetAll, TargetAPI, TargetSummarizer, TargetEmergence, TargetScheduler:
		default:
			fmt.Fprintf(stderr, "--target %q is not a part; accepted: all, api, summarizer, emergence, scheduler\n", t)
			return 2
		}
	}
	a, err := New(ctx, Options{Targets: targets, Config: cfg, Log: log})
	if err != nil {
		fmt.Fprintln(stderr, "start-up failed:", err)
		return 1
	}
	if err := a.Start(ctx); err != nil {
		fmt.Fprintln(stderr, "start-up failed:", err)
		a.Close()
		return 1
	}
	fmt.Fprint(stderr, a.Banner())
	<-ctx.Done()
	log.Info("shutting down: finishing in-flight work")
	a.Close()
	log.Info("stopped")
	return 0
}

// migrateDB applies pending migrations (apply) and lists them all.
func migrateDB(ctx context.Context, cfg config.Config, apply bool, stdout, stderr io.Writer) int {
	db, err := store.Open(cfg.Mate.Database.Driver, cfg.Mate.Database.DSN, cfg.Mate.DataDir, store.WithSQLiteSynchronous(cfg.Mate.Database.SQLiteSynchronous))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer store.Close(db)
	if apply {
		if err := store.Migrate(ctx, db); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	st, err := store.Status(ctx, db)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	for _, s := range st {
		applied := "pending"
		if s.AppliedAt != nil {
			applied = "applied " + s.AppliedAt.Format("2006-01-02 15:04:05Z07:00")
		}
		fmt.Fprintf(stdout, "%4d  %-30s %s\n", s.Version, s.Name, applied)
	}
	return 0
}
