package app

import (
	"context"
	"fmt"
	"github.com/matememory/matememory/pkg/internal/rest"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/cronjob"
	"github.com/matememory/matememory/pkg/internal/emergence"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/prompt"
	"github.com/matememory/matememory/pkg/internal/scheduler"
	"github.com/matememory/matememory/pkg/internal/tracing"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// consolidationHook gives every newly seen agent its Memory Consolidation cron job, in the
// transaction that records the agent.
func (a *App) consolidationHook() workspace.Option {
	return workspace.WithAgentHook(cronjob.ConsolidationHook(a.Cfg.Mate.Memory.EmergenceCron, a.Opts.Clock))
}

// owner names this process in leases and logs.
func owner(part string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s@%s/%d", part, host, os.Getpid())
}

// emergenceStream is MATE_EMERGENCE as every process derives it (the duplicate window
// follows the scheduler's grace period), so that none rewrites another's settings.
func (a *App) emergenceStream() jetstream.StreamConfig {
	m := a.Cfg.Mate
	sc := scheduler.FromConfig(m, "")
	return emergence.StreamConfig(m.NATS.Replicas, sc.MaxAge, sc.DupWindow())
}

// buildEmergence wires cron jobs, the scheduler, the emergence worker and the manual
// trigger into the targets this process runs.
func (a *App) buildEmergence(ctx context.Context) error {
	m := a.Cfg.Mate
	jobs, err := cronjob.New(a.DB, a.Workspace, cronjob.WithConsolidationCron(m.Memory.EmergenceCron), cronjob.WithClock(a.Now))
	if err != nil {
		return err
	}
	runs := ledger.New(a.DB, a.Now)

	if a.Has(TargetAPI) {
		rest.RegisterCronJobs(a.HTTP, jobs)
		a.parts.cron = jobs
		if _, err := bus.EnsureStream(ctx, a.JS, a.emergenceStream()); err != nil {
			return err
		}
		limit, err := a.JS.CreateOrUpdateKeyValue(ctx, emergence.ManualLimitBucket(m.NATS.Replicas,
			config.Seconds(m.Memory.ManualEmergenceCooldownSeconds)))
		if err != nil {
			return fmt.Errorf("provision kv bucket %s: %w", bus.BucketManualEmergence, err)
		}
		trigger := emergence.NewTrigger(a.JS, 0, tracing.With(a.messaging())).WithRateLimit(limit).WithLedger(runs)
		a.parts.emergence = trigger
		rest.RegisterEmergence(a.HTTP, trigger)
	}

	if a.Has(TargetScheduler) {
		if n, err := jobs.BackfillConsolidation(ctx); err != nil {
			return err
		} else if n > 0 {
			a.Log.Info("gave consolidation jobs to agents seen before", "agents", n)
		}
		sc := scheduler.FromConfig(m, owner("scheduler"))
		s := scheduler.New(jobs, a.JS, sc, scheduler.WithClock(a.Now), scheduler.WithLogger(a.Log),
			scheduler.WithLedger(runs), scheduler.WithRegistry(a.Registry), scheduler.WithTracing(a.messaging()),
			scheduler.WithGuard(a.Guard))
		if err := s.Start(ctx); err != nil {
			return fmt.Errorf("start scheduler: %w", err)
		}
		a.onClose(s.Stop)
	}

	if a.Has(TargetEmergence) {
		// The worker consumes on a connection of its own (DESIGN.md §8).
		nc, err := a.Dialer.Connect("matememory-emergence")
		if err != nil {
			return err
		}
		a.onClose(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			return fmt.Errorf("jetstream: %w", err)
		}
		who := owner("emergence")
		// The per-agent lease bucket the summarizer uses, with the same TTL (the bucket is
		// create-or-update, so a different TTL would rewrite it).
		leases, err := lease.Bucket(ctx, js, bus.BucketLease, config.Seconds(m.Memory.LeaseTTLSeconds), m.NATS.Replicas, who)
		if err != nil {
			return err
		}
		client := a.llmClient(llm.Config{BaseURL: m.LLM.BaseURL, APIKey: m.LLM.APIKey, Model: m.LLM.Model,
			Timeout: config.Seconds(m.LLM.TimeoutSeconds), JSONMode: m.LLM.JSONMode})
		maxAge := time.Duration(m.NATS.StreamMaxAgeHours * float64(time.Hour))
		w := emergence.NewWorker(js, a.Workspace, runs, leases, client, prompt.NewLoader(m.Prompts.Dir), emergence.Config{
			Enabled: m.Memory.EmergenceEnabled, DayRange: m.Memory.EmergenceDayRange,
			MaxDeliver: m.NATS.MaxDeliver, AckWait: config.Seconds(m.NATS.AckWaitSeconds),
			Stream: a.emergenceStream(), DLQ: bus.DLQStreamConfig(m.NATS.Replicas, maxAge),
		}, emergence.WithClock(a.Now), emergence.WithLogger(a.Log), emergence.WithRegistry(a.Registry),
			emergence.WithTracing(a.messaging()), emergence.WithGuard(a.Guard))
		if err := w.Start(ctx); err != nil {
			return fmt.Errorf("start emergence worker: %w", err)
		}
		a.onClose(w.Stop)
	}
	return nil
}
