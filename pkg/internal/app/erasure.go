package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/erasure"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/rest"
)

// buildErasure mounts the agent erasure (API processes): it holds the agent's lease while it
// deletes, so it binds to the lease bucket the workers share.
func (a *App) buildErasure(ctx context.Context) error {
	if !a.Has(TargetAPI) {
		return nil
	}
	leases, err := a.apiLeases(ctx)
	if err != nil {
		return err
	}
	forget := func(agentID int64) error {
		if a.Recall != nil {
			return a.Recall.Forget(agentID)
		}
		return recall.RemoveSnapshot(snapshotDir(a.Cfg), agentID)
	}
	a.Erasure = erasure.New(erasure.Deps{DB: a.DB, JS: a.JS, Replicas: a.Cfg.Mate.NATS.Replicas, Leases: leases, CloseSessions: a.MCPHub.CloseAgent, ForgetSearch: forget,
		Forget: a.forgetAgent, Log: a.Log, Now: a.Now})
	rest.RegisterErasure(a.HTTP, a.Erasure)
	return nil
}

// listenErasures makes every process with the bus drop what it caches of an agent erased
// by any process (an API replica, `api erase`): the notices on MATE_ERASURES. Called once
// the process's parts are built.
func (a *App) listenErasures(ctx context.Context) error {
	if a.JS == nil {
		return nil
	}
	stop, err := erasure.Listen(ctx, a.JS, a.Cfg.Mate.NATS.Replicas, a.Log, a.forgetErased)
	if err != nil {
		return err
	}
	a.onClose(stop)
	return nil
}

// forgetErased drops what this process caches of the notice's agent: that it was seeded
// (the next use seeds it anew), its context-window memos, its search snapshot (cached and
// on file) and, for an agent's erasure, its MCP sessions.
func (a *App) forgetErased(n erasure.Notice) {
	defer a.Guard.Recover("erasure.notice", "agent", n.AgentID)
	if n.Scope == erasure.ScopeAgent {
		a.forgetAgent(n.AgentID)
		if closed := a.MCPHub.CloseAgent(n.AgentID); closed > 0 {
			a.Log.Info("erased agent's MCP sessions closed", "agent", n.AgentID, "sessions", closed)
		}
	} else if a.parts.window != nil {
		a.parts.window.Forget(n.AgentID)
	}
	if a.Recall != nil {
		if err := a.Recall.Forget(n.AgentID); err != nil {
			a.Log.Warn("erasure: the erased agent's search snapshot file stays; erase again to remove it", "agent", n.AgentID, "err", err)
		}
	}
}

// forgetAgent drops the workspace's and the context window's memory of the agent.
func (a *App) forgetAgent(agentID int64) {
	a.Workspace.Forget(agentID)
	if a.parts.window != nil {
		a.parts.window.Forget(agentID)
	}
}

// eraseAgent is `api erase --agent N --confirm N`: the erasure of DELETE
// /api/v1/agents/{agentId}?erase=true, run against the configured database and NATS. It
// prints the receipt as JSON.
func eraseAgent(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("erase", flag.ContinueOnError)
	fs.SetOutput(stderr)
	agent := fs.Int64("agent", 0, "the agent id to erase")
	conv := fs.String("conversation", "", "erase only this conversation of the agent")
	confirm := fs.String("confirm", "", "the agent id again (or, with --conversation, the conversation id), to confirm")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: api erase --agent N --confirm N")
		fmt.Fprintln(stderr, "       api erase --agent N --conversation ID --confirm ID")
		fmt.Fprintln(stderr, "Erases every trace of the agent (or of one of its conversations) from the database, the KV buckets and the streams; prints the receipt. Irreversible.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return helpCode(err)
	}
	if *agent <= 0 {
		fmt.Fprintln(stderr, "erase: --agent must be a positive agent id")
		return 2
	}
	want := strconv.FormatInt(*agent, 10)
	if *conv != "" {
		want = *conv
	}
	if *confirm != want {
		fmt.Fprintf(stderr, "erase: --confirm must repeat %q to erase it\n", want)
		return 2
	}
	if cfg.Mate.NATS.URL == "" {
		fmt.Fprintf(stderr, "note: no mate.nats.url: erasing from the embedded store under %s/nats; stop a running all-in-one process first, or point MATE_NATS_URL at its embedded-listen address\n", cfg.Mate.DataDir)
	}
	ctx = bus.WithProvisionRetry(ctx, bus.ProvisionRetry{Log: log})
	a, err := New(ctx, Options{Targets: []string{replayTarget}, Config: cfg, Log: log})
	if err != nil {
		fmt.Fprintln(stderr, "erase:", err)
		return 1
	}
	defer a.Close()
	m := cfg.Mate
	leases, err := lease.Bucket(ctx, a.JS, bus.BucketLease, config.Seconds(m.Memory.LeaseTTLSeconds), m.NATS.Replicas, owner("erasure"))
	if err != nil {
		fmt.Fprintln(stderr, "erase:", err)
		return 1
	}
	// An API process of this data dir keeps the agent's search snapshot file there.
	forget := func(agentID int64) error { return recall.RemoveSnapshot(snapshotDir(cfg), agentID) }
	svc := erasure.New(erasure.Deps{DB: a.DB, JS: a.JS, Replicas: m.NATS.Replicas, Leases: leases, ForgetSearch: forget, Log: log, Now: a.Now})
	var r any
	if *conv != "" {
		r, err = svc.EraseConversation(ctx, *agent, *conv, "cli")
	} else {
		r, err = svc.EraseAgent(ctx, *agent, "cli")
	}
	if err != nil {
		fmt.Fprintln(stderr, "erase:", err)
		return 1
	}
	printJSON(stdout, r)
	return 0
}
