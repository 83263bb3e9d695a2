package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/matememory/matememory/pkg/internal/blame"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/mcpserver"
	"github.com/matememory/matememory/pkg/internal/panics"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/recall/lexical"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/tokens"
	"github.com/matememory/matememory/pkg/internal/tool"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// mcpStdio is `api mcp-stdio --agent N`: the memory tools and files of one agent over MCP on
// stdin/stdout, for a local agent that starts MateMemory as a subprocess. It opens the
// configured database directly (migrating it, like every process) and needs no NATS. Stdout
// (out) carries protocol messages only; logs and errors go to stderr (log, errOut).
func mcpStdio(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, in io.Reader, out, errOut io.Writer) int {
	fs := flag.NewFlagSet("mcp-stdio", flag.ContinueOnError)
	fs.SetOutput(errOut)
	agentID := fs.Int64("agent", 0, "agent whose memory files the tools read and write (required)")
	language := fs.String("language", "", "language of the tool descriptions, zh or en (default: mate.language)")
	if err := fs.Parse(args); err != nil {
		return helpCode(err)
	}
	if *agentID <= 0 || fs.NArg() > 0 {
		fmt.Fprintln(errOut, "usage: api mcp-stdio --agent N [--language zh|en] (N: a positive agent id)")
		return 2
	}
	switch *language {
	case "", "zh", "en":
	default:
		fmt.Fprintf(errOut, "mcp-stdio: --language %q is not supported; accepted: zh, en\n", *language)
		return 2
	}

	if *language != "" {
		// New agents get their core files in the language asked for, not mate.language's.
		cfg.Mate.Language = *language
	}
	m := cfg.Mate
	db, err := store.Open(m.Database.Driver, m.Database.DSN, m.DataDir, store.WithSQLiteSynchronous(m.Database.SQLiteSynchronous))
	if err != nil {
		fmt.Fprintln(errOut, "mcp-stdio:", err)
		return 1
	}
	defer store.Close(db)
	if err := store.Migrate(ctx, db); err != nil {
		fmt.Fprintln(errOut, "mcp-stdio: migrate database:", err)
		return 1
	}
	// The same workspace wiring as the API (limits, defaults, first-seen agent hooks), without
	// the bus.
	a := &App{Opts: Options{Config: cfg, Log: log}, Cfg: cfg, Log: log, DB: db, Tokens: tokens.NewCounter()}
	hub := mcpserver.NewHub(mcpserver.HubGuard(panics.New(log, nil)))
	extra := []workspace.Option{workspace.WithChangeHook(hub.Changed)}
	var searcher *recall.Searcher
	if m.Memory.Search.Enabled {
		// No bus here: this process indexes its own writes inline (the hook runs after each
		// commit), brings the agent's index up to date at start, and searches the database.
		set, emb, an := recallSettings(cfg), embedder(cfg), lexical.NewAnalyzer()
		ix := a.newIndexer(an, set, emb)
		extra = append(extra, workspace.WithChangeHook(func(ctx context.Context, agentID int64, filename string, _ int64) {
			if _, err := ix.Sync(ctx, agentID, filename); err != nil {
				log.Warn("mcp-stdio: index after write failed; a running indexer's reconciler or api reindex catches up", "file", filename, "err", err)
			}
		}))
		if _, err := ix.Backfill(ctx, *agentID, nil); err != nil {
			log.Warn("mcp-stdio: indexing the agent's files failed; search may miss some", "err", err)
		}
		opts := []recall.SearcherOption{recall.SearchWithLogger(log)}
		if emb != nil {
			opts = append(opts, recall.SearchWithEmbedder(emb))
		}
		searcher = recall.NewSearcher(db, an, set, opts...)
	}
	ws := a.newWorkspace(db, extra...)
	tools := tool.New(ws)
	tools.EnableBlame(blame.New(ws, ledger.New(db, a.Now)))
	if searcher != nil {
		tools.EnableRecall(searcher)
	}
	lang := *language
	if lang == "" {
		lang = tools.DefaultLanguage()
	}
	log.Info("serving MCP over stdio", "agent", *agentID, "database", m.Database.Driver)
	if err := mcpserver.ServeStdio(ctx, tools, *agentID, lang, hub, log, in, out); err != nil {
		fmt.Fprintln(errOut, "mcp-stdio:", err)
		return 1
	}
	return 0
}
