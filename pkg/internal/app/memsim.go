package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/matememory/matememory/pkg/client"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/memsim"
)

// SimulateMemory runs a memory simulation (pkg/internal/memsim) through a scratch
// all-in-one process built from cfg: its own data directory, embedded NATS and (unless cfg
// names a database) SQLite, the model cfg configures, and a clock the simulation moves from
// conversation to conversation. The year benchmark runs it with the scripted model; `api
// eval memory` with the configured endpoint.
func SimulateMemory(ctx context.Context, cfg config.Config, log *slog.Logger, s memsim.Script, o memsim.RunOptions) (memsim.Report, error) {
	dir, err := os.MkdirTemp("", "matememory-memsim-")
	if err != nil {
		return memsim.Report{}, err
	}
	defer os.RemoveAll(dir)
	cfg.Mate.DataDir = dir
	cfg.Mate.HTTP.Addr = "127.0.0.1:0"
	cfg.Mate.NATS.URL, cfg.Mate.NATS.EmbeddedListen, cfg.Mate.NATS.SyncAlways = "", "", false
	cfg.Mate.Memory.CooldownMinutes = 0
	cfg.Mate.Memory.MinMessagesForSummarize = 1
	cfg.Mate.Memory.MaxFileBytes = max(cfg.Mate.Memory.MaxFileBytes, 8<<20)
	if cfg.Mate.Timezone == "" || cfg.Mate.Timezone == "Local" {
		cfg.Mate.Timezone = "UTC"
	}
	cfg.Mate.Auth.Keys, err = config.ParseKeys("sim=1;simadmin=admin")
	if err != nil {
		return memsim.Report{}, err
	}
	var now atomic.Int64
	now.Store(s.Start.UnixNano())
	a, err := New(ctx, Options{Targets: []string{TargetAll}, Config: cfg, Log: log, Clock: func() time.Time { return time.Unix(0, now.Load()).UTC() }})
	if err != nil {
		return memsim.Report{}, err
	}
	defer a.Close()
	if err := a.Start(ctx); err != nil {
		return memsim.Report{}, err
	}
	base := "http://" + a.Addr
	c, err := client.New(base, "sim")
	if err != nil {
		return memsim.Report{}, err
	}
	admin, err := client.New(base, "simadmin")
	if err != nil {
		return memsim.Report{}, err
	}
	tok, err := a.Tokens.For(cfg.Mate.LLM.Model)
	if err != nil {
		tok = a.Tokens.Estimator()
	}
	env := memsim.Env{Client: c, Admin: admin, Agent: 1, SetNow: func(t time.Time) { now.Store(t.UnixNano()) }, Count: tok}
	return memsim.Run(ctx, env, s, o)
}

// evalMemory is `api eval memory`: a shorter simulation of months of use through the real
// pipeline against the configured OpenAI-compatible endpoint (mate.llm.*), in a scratch
// process and database, never the service's. It reports what the year benchmark reports for
// the scripted model: the core files against their budget, edits refused, tokens per
// extraction, the archive, and every fact searched by its identifier.
func evalMemory(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("eval memory", flag.ContinueOnError)
	fs.SetOutput(stderr)
	days := fs.Int("days", 30, "simulated days")
	perDay := fs.Int("per-day", 6, "conversations a day")
	facts := fs.Int("facts", 2, "new facts a conversation")
	seed := fs.Uint64("seed", 1, "the script's seed")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: api eval memory [-days 30] [-per-day 6] [-facts 2] [-seed 1]")
		fmt.Fprintln(stderr, "Simulates days of conversations, each telling the agent facts with unique identifiers (some later")
		fmt.Fprintln(stderr, "corrected), through the real pipeline and the configured model (MATE_LLM_BASE_URL, _API_KEY, _MODEL),")
		fmt.Fprintln(stderr, "and prints per month: MEMORY.md and PROFILE.md against their budget, tokens per extraction, the archive;")
		fmt.Fprintln(stderr, "then how many facts a search by identifier finds, and how many are kept nowhere.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.Mate.LLM.BaseURL == "" {
		fmt.Fprintln(stderr, "eval memory: no model endpoint configured; set MATE_LLM_BASE_URL (and _API_KEY, _MODEL)")
		return 2
	}
	if *days <= 0 || *perDay <= 0 || *facts <= 0 {
		fmt.Fprintln(stderr, "eval memory: -days, -per-day and -facts must be positive")
		return 2
	}
	s := memsim.NewScript(memsim.Options{Days: *days, PerDay: *perDay, FactsPer: *facts, CorrectionShare: 0.1, Seed: *seed})
	rep, err := SimulateMemory(ctx, cfg, log, s, memsim.RunOptions{Label: cfg.Mate.LLM.Model, Progress: stderr})
	if err != nil {
		fmt.Fprintln(stderr, "eval memory:", err)
		return 1
	}
	memsim.Table(stdout, rep)
	return 0
}
