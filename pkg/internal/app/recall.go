package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/recall/embed"
	"github.com/matememory/matememory/pkg/internal/recall/lexical"
	"github.com/matememory/matememory/pkg/internal/rest"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/tokens"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// recallSettings maps mate.memory.search.* to recall.Settings.
func recallSettings(c config.Config) recall.Settings {
	s := c.Mate.Memory.Search
	return recall.Settings{ChunkTokens: s.ChunkTokens, OverlapTokens: s.OverlapTokens,
		VectorWeight: s.VectorWeight, TextWeight: s.TextWeight, HalfLifeDays: s.HalfLifeDays, DecayFloor: s.DecayFloor,
		MMRLambda: s.MMRLambda, MinScore: s.MinScore, MaxResults: s.MaxResults, MaxQueryBytes: s.MaxQueryBytes,
		MinCoverage: offIfZero(s.MinCoverage), MinCosine: offIfZero(s.MinCosine),
		CacheBytes: int64(s.CacheMB * (1 << 20)), ReconcileInterval: config.Seconds(s.ReconcileSeconds)}
}

// snapshotDir is where API processes keep large agents' search snapshots: <data-dir>/recall,
// none without a data dir or with snapshot-min-chunks 0.
func snapshotDir(c config.Config) string {
	if c.Mate.DataDir == "" || c.Mate.Memory.Search.SnapshotMinChunks <= 0 {
		return ""
	}
	return filepath.Join(c.Mate.DataDir, "recall")
}

// offIfZero maps a configured 0 ("off") to recall's negative (its zero is "the default").
func offIfZero(v float64) float64 {
	if v == 0 {
		return -1
	}
	return v
}

// embedder is the configured embeddings endpoint, or nil (lexical only).
func embedder(c config.Config) embed.Embedder {
	e := c.Mate.Embedding
	if e.BaseURL == "" {
		return nil
	}
	return embed.NewOpenAI(embed.Config{BaseURL: e.BaseURL, APIKey: e.APIKey, Model: e.Model,
		Dimensions: e.Dimensions, Timeout: config.Seconds(e.TimeoutSeconds)})
}

// recallHook publishes an index message after every committed workspace change.
func (a *App) recallHook() []workspace.Option {
	if !a.Cfg.Mate.Memory.Search.Enabled || a.NC == nil {
		return nil
	}
	n := recall.NewNotifier(a.NC, a.Log)
	return []workspace.Option{workspace.WithChangeHook(n.Changed)}
}

// buildRecall provisions MATE_RECALL, serves memory search (tool, REST, MCP, context
// window) on API processes and runs the indexer on summarizer processes (the memory
// workers; the all-in-one target included).
func (a *App) buildRecall(ctx context.Context) error {
	m := a.Cfg.Mate
	if !m.Memory.Search.Enabled || (!a.Has(TargetAPI) && !a.Has(TargetSummarizer)) {
		return nil
	}
	if err := recall.Provision(ctx, a.JS, m.NATS.Replicas, config.Seconds(m.NATS.AckWaitSeconds), m.NATS.MaxDeliver); err != nil {
		return err
	}
	set := recallSettings(a.Cfg)
	emb := embedder(a.Cfg)
	an := lexical.NewAnalyzer()
	if a.Has(TargetAPI) {
		opts := []recall.SearcherOption{recall.SearchWithLogger(a.Log), recall.SearchWithGuard(a.Guard)}
		if emb != nil {
			opts = append(opts, recall.SearchWithEmbedder(emb))
		}
		if dir := snapshotDir(a.Cfg); dir != "" {
			opts = append(opts, recall.SearchWithSnapshotFiles(dir, m.Memory.Search.SnapshotMinChunks))
		}
		a.Recall = recall.NewSearcher(a.DB, an, set, opts...)
		// Files of agents erased by another process go before any is read.
		if err := a.Recall.SweepSnapshots(ctx); err != nil {
			a.Log.Warn("recall: snapshot files not swept", "err", err)
		}
		sub, err := recall.Subscribe(a.NC, a.Recall)
		if err != nil {
			return fmt.Errorf("subscribe to %s: %w", recall.SubjectIndexed, err)
		}
		a.onClose(func() { _ = sub.Unsubscribe() })
		a.Tools.EnableRecall(a.Recall)
		rest.RegisterRecall(a.HTTP, a.Tools)
		if m.Memory.Search.SearchesConversations() {
			// Messages stored through this API are indexed at once; those stored by the
			// summarizer from events' inline messages are found by the reconciler.
			n := recall.NewNotifier(a.NC, a.Log)
			a.Messages.OnAdded(func(ctx context.Context, agentID int64, conv string, lastID int64) {
				n.Changed(ctx, agentID, recall.ConversationPrefix+conv, lastID)
			})
		}
	}
	if a.Has(TargetSummarizer) {
		ix := a.newIndexer(an, set, emb)
		wopts := []recall.WorkerOption{recall.WorkerWithGuard(a.Guard)}
		if m.Memory.Search.SearchesConversations() {
			wopts = append(wopts, recall.WorkerWithConversations())
		}
		w := recall.NewWorker(a.JS, a.NC, a.DB, ix, a.Log, set.ReconcileInterval, wopts...)
		if err := w.Start(ctx); err != nil {
			return err
		}
		a.onClose(w.Stop)
		mode := "lexical only (no mate.embedding.base-url)"
		if emb != nil {
			mode = "hybrid, embeddings " + emb.Model()
		}
		a.Log.Info("recall indexer started", "mode", mode, "reconcile", set.ReconcileInterval)
	}
	return nil
}

func (a *App) newIndexer(an *lexical.Analyzer, set recall.Settings, emb embed.Embedder) *recall.Indexer {
	opts := []recall.IndexerOption{recall.WithLogger(a.Log)}
	if emb != nil {
		opts = append(opts, recall.WithEmbedder(emb))
	}
	if a.Opts.Clock != nil {
		opts = append(opts, recall.WithClock(a.Opts.Clock))
	}
	return recall.NewIndexer(a.DB, an, set, opts...)
}

// reindex is `api reindex`: backfill the recall index from the workspace files.
func reindex(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("reindex", flag.ContinueOnError)
	fs.SetOutput(stderr)
	agent := fs.Int64("agent", 0, "only this agent id (default: every agent)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: api reindex [-agent N]")
		fmt.Fprintln(stderr, "Brings the memory-search index up to date with every workspace file: chunks changed files,")
		fmt.Fprintln(stderr, "embeds chunks not embedded with the configured model, removes chunks of deleted files.")
		fmt.Fprintln(stderr, "Idempotent: a second run reports everything unchanged. Safe while the service runs.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	a, err := openStore(ctx, cfg, log)
	if err != nil {
		fmt.Fprintln(stderr, "reindex:", err)
		return 1
	}
	defer a.Close()
	ix := a.newIndexer(lexical.NewAnalyzer(), recallSettings(cfg), embedder(cfg))
	last := -1
	rep, err := ix.Backfill(ctx, *agent, func(done, total int, r recall.BackfillReport) {
		if pct := done * 100 / total; pct/10 != last/10 || done == total {
			last = pct
			fmt.Fprintf(stdout, "reindex: %d/%d files (%d%%), %d indexed, %d chunks\n", done, total, pct, r.Indexed, r.Chunks)
		}
	})
	fmt.Fprintf(stdout, "reindex: %s\n", rep)
	if err != nil {
		fmt.Fprintln(stderr, "reindex:", err)
		return 1
	}
	if rep.Pending > 0 {
		fmt.Fprintln(stderr, "reindex: the embedding endpoint failed for some files; they are searchable lexically and the indexer embeds them later (or run reindex again)")
	}
	return 0
}

// openStore is the part of New an offline command needs: the migrated database, no NATS
// (so it runs beside a live all-in-one process, whose embedded NATS store is locked).
func openStore(ctx context.Context, cfg config.Config, log *slog.Logger) (*App, error) {
	a := &App{Opts: Options{Config: cfg, Log: log}, Cfg: cfg, Log: log, Tokens: tokens.NewCounter()}
	db, err := store.Open(cfg.Mate.Database.Driver, cfg.Mate.Database.DSN, cfg.Mate.DataDir, store.WithSQLiteSynchronous(cfg.Mate.Database.SQLiteSynchronous))
	if err != nil {
		return nil, err
	}
	a.DB = db
	a.onClose(func() { _ = store.Close(db) })
	if err := store.Migrate(ctx, db); err != nil {
		a.Close()
		return nil, fmt.Errorf("migrate database: %w", err)
	}
	return a, nil
}
