package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/matememory/matememory/pkg/internal/bundle"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/recall/lexical"
)

// newBundle builds the export/import service (docs/bundle.md). Files an import writes go
// through the workspace's change hooks (the recall indexer, MCP sessions), as any write
// does; conversations it adds are announced to the indexer when they are a search source.
func (a *App) newBundle() *bundle.Service {
	m := a.Cfg.Mate
	opts := []bundle.Option{bundle.WithMaxFileBytes(m.Memory.MaxFileBytes), bundle.WithGenerator("matememory " + version())}
	if a.Opts.Clock != nil {
		opts = append(opts, bundle.WithClock(a.Opts.Clock))
	}
	if a.Workspace != nil {
		opts = append(opts, bundle.WithFileHook(a.Workspace.NotifyChanged))
	}
	if m.Memory.Search.Enabled && m.Memory.Search.SearchesConversations() && a.NC != nil {
		n := recall.NewNotifier(a.NC, a.Log)
		opts = append(opts, bundle.WithConversationHook(func(ctx context.Context, agentID int64, conv string, lastID int64) {
			n.Changed(ctx, agentID, recall.ConversationPrefix+conv, lastID)
		}))
	}
	return bundle.New(a.DB, opts...)
}

// exportCmd is `api export`: an agent's bundle from the database, to a file or stdout.
func exportCmd(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	agent := fs.Int64("agent", 0, "the agent id (required)")
	var inc bundle.Includes
	fs.BoolVar(&inc.History, "history", false, "include every file's previous versions")
	fs.BoolVar(&inc.Messages, "messages", false, "include the stored conversation messages")
	fs.BoolVar(&inc.Ledger, "ledger", false, "include the run ledger")
	out := fs.String("o", "", "write the bundle to this file (default: stdout)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: api export -agent N [-history] [-messages] [-ledger] [-o file]")
		fmt.Fprintln(stderr, "Writes the agent's bundle (JSON Lines: manifest, records, checksums; docs/bundle.md) from the")
		fmt.Fprintln(stderr, "database, as GET /api/v1/agents/N/export does. Safe while the service runs.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return helpCode(err)
	}
	if *agent <= 0 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "export: -agent N is required (a positive id), and no other arguments")
		return 2
	}
	a, err := openStore(ctx, cfg, log)
	if err != nil {
		fmt.Fprintln(stderr, "export:", err)
		return 1
	}
	defer a.Close()
	w, done := stdout, func() error { return nil }
	if *out != "" {
		// Written next to the target and renamed at the end: a failed export leaves no
		// half a bundle under the name asked for.
		f, err := os.CreateTemp(filepath.Dir(*out), ".export-*.ndjson")
		if err != nil {
			fmt.Fprintln(stderr, "export:", err)
			return 1
		}
		defer os.Remove(f.Name())
		w, done = f, func() error {
			if err := f.Close(); err != nil {
				return err
			}
			return os.Rename(f.Name(), *out)
		}
	}
	sum, err := a.newBundle().Export(ctx, w, *agent, inc)
	if err == nil {
		err = done()
	}
	if err != nil {
		fmt.Fprintln(stderr, "export:", err)
		return 1
	}
	c := sum.Counts
	fmt.Fprintf(stderr, "export: agent %d: %d files, %d history versions, %d cron jobs, %d messages, %d runs; %d bytes\n",
		*agent, c.File, c.History, c.Cron, c.Message, c.Run, sum.Bytes)
	return 0
}

// importCmd is `api import`: a bundle into an agent, then the agent's search index brought
// up to date (an offline command has no bus to tell the indexer).
func importCmd(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	agent := fs.Int64("agent", 0, "the agent id to import into (required)")
	mode := fs.String("mode", bundle.ModeEmpty, "empty (an agent never used) or merge (keep what the agent has; report conflicts)")
	dry := fs.Bool("dry-run", false, "validate and report what would change; write nothing")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: api import -agent N [-mode empty|merge] [-dry-run] FILE   (FILE - reads stdin)")
		fmt.Fprintln(stderr, "Validates the whole bundle, then imports it in one transaction (all or nothing), as")
		fmt.Fprintln(stderr, "POST /api/v1/agents/N/import does; prints the report as JSON. The same bundle twice: 0 changes.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return helpCode(err)
	}
	if *agent <= 0 || fs.NArg() != 1 {
		fmt.Fprintln(stderr, "import: -agent N and one bundle file (or - for stdin) are required")
		return 2
	}
	var in io.Reader = os.Stdin
	if name := fs.Arg(0); name != "-" {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(stderr, "import:", err)
			return 1
		}
		defer f.Close()
		in = f
	}
	a, err := openStore(ctx, cfg, log)
	if err != nil {
		fmt.Fprintln(stderr, "import:", err)
		return 1
	}
	defer a.Close()
	rep, err := a.newBundle().Import(ctx, *agent, in, bundle.ImportOptions{Mode: *mode, DryRun: *dry})
	if err != nil {
		fmt.Fprintln(stderr, "import:", err)
		return 1
	}
	printJSON(stdout, rep)
	if rep.Changes > 0 && !*dry && cfg.Mate.Memory.Search.Enabled {
		ix := a.newIndexer(lexical.NewAnalyzer(), recallSettings(cfg), embedder(cfg))
		r, err := ix.Backfill(ctx, *agent, nil)
		if err != nil {
			fmt.Fprintln(stderr, "import: imported, but indexing for search failed (run api reindex -agent N):", err)
			return 1
		}
		fmt.Fprintf(stderr, "import: search index: %s\n", r)
	}
	if rep.ConflictCount > 0 {
		fmt.Fprintf(stderr, "import: %d conflicts: the agent's own records were kept (listed in the report)\n", rep.ConflictCount)
	}
	return 0
}
