package app

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/matememory/matememory/pkg/config"
	"github.com/matememory/matememory/pkg/store"
)

// Main is the body of every binary: flags, configuration, subcommands, signals.
// defaultTarget is the binary's own part ("api", "summarizer", ...); cmd/api defaults to the
// all-in-one target when no external NATS is configured.
func Main(defaultTarget string) int {
	fs := flag.NewFlagSet(os.Args[0], flag.ContinueOnError)
	cfgPath := fs.String("config", os.Getenv("MATE_CONFIG"), "YAML configuration file (env MATE_CONFIG)")
	target := fs.String("target", "", "parts to run: all, api, summarizer, emergence, scheduler (comma-separated)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg, err := config.Load(*cfgPath, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if args := fs.Args(); len(args) > 0 {
		switch args[0] {
		case "migrate":
			return migrate(ctx, cfg, args[1:])
		default:
			if code, handled := subcommand(ctx, cfg, log, args); handled {
				return code
			}
			fmt.Fprintf(os.Stderr, "unknown command %q; accepted: migrate [status], replay, reindex, eval, mcp-stdio\n", args[0])
			return 2
		}
	}

	targets := []string{defaultTarget}
	if *target != "" {
		targets = strings.Split(*target, ",")
	} else if defaultTarget == TargetAPI && cfg.Mate.NATS.URL == "" {
		targets = []string{TargetAll}
	}
	for _, t := range targets {
		switch t {
		case TargetAll, TargetAPI, TargetSummarizer, TargetEmergence, TargetScheduler:
		default:
			fmt.Fprintf(os.Stderr, "-target %q is not a part; accepted: all, api, summarizer, emergence, scheduler\n", t)
			return 2
		}
	}
	a, err := New(ctx, Options{Targets: targets, Config: cfg, Log: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start-up failed:", err)
		return 1
	}
	if err := a.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "start-up failed:", err)
		a.Close()
		return 1
	}
	fmt.Fprint(os.Stderr, a.Banner())
	<-ctx.Done()
	log.Info("shutting down: finishing in-flight work")
	a.Close()
	log.Info("stopped")
	return 0
}

func migrate(ctx context.Context, cfg config.Config, args []string) int {
	db, err := store.Open(cfg.Mate.Database.Driver, cfg.Mate.Database.DSN, cfg.Mate.DataDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer store.Close(db)
	if len(args) == 0 || args[0] != "status" {
		if err := store.Migrate(ctx, db); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	st, err := store.Status(ctx, db)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, s := range st {
		applied := "pending"
		if s.AppliedAt != nil {
			applied = "applied " + s.AppliedAt.Format("2006-01-02 15:04:05Z07:00")
		}
		fmt.Printf("%4d  %-30s %s\n", s.Version, s.Name, applied)
	}
	return 0
}
