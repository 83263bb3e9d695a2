package app

import (
	"context"
	"flag"
	"fmt"
	"github.com/matememory/matememory/pkg/internal/rest"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/prompt"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/summarizer"
)

// buildPipeline provisions the event pipeline (MATE_EVENTS, MATE_DLQ, the summarizer
// durable), serves its routes on API processes, and starts
// the summarizer workers on summarizer processes (the all-in-one target included).
func (a *App) buildPipeline(ctx context.Context) error {
	if !a.Has(TargetAPI) && !a.Has(TargetSummarizer) {
		return nil
	}
	set := summarizer.SettingsFrom(a.Cfg)
	if err := summarizer.Provision(ctx, a.JS, set); err != nil {
		return err
	}
	metrics := summarizer.NewMetrics(a.Registry)
	runs := ledger.New(a.DB, a.Now)

	if a.Has(TargetAPI) {
		// The publisher owns its connection (DESIGN.md §8).
		nc, err := a.Dialer.Connect("matememory-event-publisher")
		if err != nil {
			return err
		}
		pub, err := bus.NewPublisher(nc, a.messaging())
		if err != nil {
			nc.Close()
			return err
		}
		a.onClose(nc.Close)
		// The API reads agents' records (their pending work).
		leases, err := a.apiLeases(ctx)
		if err != nil {
			return err
		}
		api := summarizer.API{Publisher: pub.Events(), Ledger: runs, JS: a.JS, NC: a.NC,
			ManualTimeout: set.ManualTimeout, Metrics: metrics,
			Pending: summarizer.NewPendingReader(leases, a.Messages, set.SweepEvery), DB: a.DB}
		a.parts.summarize = api
		rest.RegisterPipeline(a.HTTP, api)
		rest.RegisterDeadLetters(a.HTTP, a.JS, a.messaging())
	}

	if a.Has(TargetSummarizer) {
		svc, err := a.newSummarizer(ctx, set, runs, metrics)
		if err != nil {
			return err
		}
		nc, err := a.Dialer.Connect("matememory-summarizer")
		if err != nil {
			return err
		}
		w, err := summarizer.NewWorker(ctx, svc, nc, summarizer.WithTracing(a.messaging()), summarizer.WithGuard(a.Guard))
		if err != nil {
			nc.Close()
			return err
		}
		if err := w.Start(); err != nil {
			nc.Close()
			return fmt.Errorf("start summarizer worker: %w", err)
		}
		a.onClose(w.Stop)
		provider := "offline provider (no LLM configured)"
		if a.Cfg.LLMConfigured() {
			provider = "llm " + a.Cfg.Mate.LLM.Model
		}
		a.Log.Info("summarizer worker started", "concurrency", set.Concurrency, "provider", provider,
			"cooldown", a.Cfg.Mate.Memory.CooldownMinutes.Duration())
	}
	return nil
}

// newSummarizer builds the summarizer service as workers and the replay command use it.
func (a *App) newSummarizer(ctx context.Context, set summarizer.Settings, runs *ledger.Ledger, metrics *summarizer.Metrics) (*summarizer.Service, error) {
	m := a.Cfg.Mate
	// The per-agent lease bucket the emergence worker uses, with the same TTL.
	leases, err := lease.Bucket(ctx, a.JS, bus.BucketLease, set.LeaseTTL, m.NATS.Replicas, owner("summarizer"))
	if err != nil {
		return nil, err
	}
	client := a.llmClient(llm.Config{BaseURL: m.LLM.BaseURL, APIKey: m.LLM.APIKey, Model: m.LLM.Model,
		Timeout: config.Seconds(m.LLM.TimeoutSeconds), JSONMode: m.LLM.JSONMode})
	return summarizer.New(summarizer.Deps{
		Units: store.NewUnits(a.DB), Messages: a.Messages, Workspace: a.Workspace, Ledger: runs, Leases: leases,
		LLM: client, Prompts: prompt.NewLoader(m.Prompts.Dir), Metrics: metrics,
		Log: a.Log, Now: a.Now,
	}, set), nil
}

// replayTarget is a pseudo-target: the process builds the shared parts and runs no worker.
const replayTarget = "replay"

// replay is `summarizer replay`: feed stored events through the summarizer's handler again.
func replay(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	agent := fs.Int64("agent", 0, "only events of this agent id")
	since := fs.String("since", "", "only events stored at or after this time (RFC 3339, or a duration ago such as 2h)")
	until := fs.String("until", "", "only events stored at or before this time (RFC 3339, or a duration ago)")
	fromSeq := fs.Uint64("from-seq", 0, "first stream sequence of MATE_EVENTS")
	toSeq := fs.Uint64("to-seq", 0, "last stream sequence of MATE_EVENTS")
	dryRun := fs.Bool("dry-run", false, "report what each event would do; write nothing")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: api replay [-agent N] [-since T] [-until T] [-from-seq N] [-to-seq N] [-dry-run]")
		fmt.Fprintln(stderr, "Feeds events stored on MATE_EVENTS through the summarizer again. Effects are idempotent:")
		fmt.Fprintln(stderr, "events already extracted change nothing; events never extracted (dead-lettered) are extracted now.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return helpCode(err)
	}
	now := time.Now()
	var o summarizer.ReplayOptions
	var err error
	if o.Since, err = parseWhen(*since, now); err != nil {
		fmt.Fprintln(stderr, "-since:", err)
		return 2
	}
	if o.Until, err = parseWhen(*until, now); err != nil {
		fmt.Fprintln(stderr, "-until:", err)
		return 2
	}
	o.AgentID, o.FromSeq, o.ToSeq, o.DryRun, o.Out = *agent, *fromSeq, *toSeq, *dryRun, stdout
	if cfg.Mate.NATS.URL == "" {
		fmt.Fprintf(stderr, "note: no mate.nats.url: replaying from the embedded store under %s/nats; stop a running all-in-one process first, or point MATE_NATS_URL at its embedded-listen address (with API keys set, with MATE_NATS_USER and MATE_NATS_PASSWORD from %s)\n", cfg.Mate.DataDir, filepath.Join(cfg.Mate.DataDir, NATSCredentialsFile))
	}
	// Like the services, wait and retry while the cluster is recovering.
	ctx = bus.WithProvisionRetry(ctx, bus.ProvisionRetry{Log: log})
	a, err := New(ctx, Options{Targets: []string{replayTarget}, Config: cfg, Log: log})
	if err != nil {
		fmt.Fprintln(stderr, "replay:", err)
		return 1
	}
	defer a.Close()
	set := summarizer.SettingsFrom(cfg)
	if err := summarizer.Provision(ctx, a.JS, set); err != nil {
		fmt.Fprintln(stderr, "replay:", err)
		return 1
	}
	svc, err := a.newSummarizer(ctx, set, ledger.New(a.DB, a.Now), summarizer.NewMetrics(nil))
	if err != nil {
		fmt.Fprintln(stderr, "replay:", err)
		return 1
	}
	rep, err := svc.Replay(ctx, a.JS, o)
	mode := "replayed"
	if o.DryRun {
		mode = "dry run"
	}
	fmt.Fprintf(stdout, "%s: %s\n", mode, rep)
	if err != nil {
		fmt.Fprintln(stderr, "replay:", err)
		return 1
	}
	return 0
}

// parseWhen reads an RFC 3339 time or a duration before now ("90m", "2h").
func parseWhen(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-04-03T10:00:00+08:00) nor a duration ago (2h)", s)
}
