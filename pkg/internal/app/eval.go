package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/recall/evalset"
	"github.com/matememory/matememory/pkg/internal/recall/lexical"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// evalRecall is `api eval`: the retrieval evaluation against the configured embedding
// endpoint (mate.embedding.*), in a scratch SQLite database, never the service's.
func evalRecall(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "memory" {
		return evalMemory(ctx, cfg, log, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setPath := fs.String("set", "", "evaluation set JSON (default: the built-in synthetic memory, pkg/internal/recall/evalset/testdata/eval.json)")
	k := fs.Int("k", 5, "recall@k")
	misses := fs.Bool("misses", false, "list the queries each configuration missed (gold not in the first k)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: api eval [-set file.json] [-k 5] [-misses]     (or: api eval memory -help)")
		fmt.Fprintln(stderr, "Indexes the evaluation memory in a scratch database with the configured embedding endpoint")
		fmt.Fprintln(stderr, "(MATE_EMBEDDING_BASE_URL, _API_KEY, _MODEL, _DIMENSIONS) and prints recall@k and MRR for")
		fmt.Fprintln(stderr, "BM25 alone, cosine alone, BM25 with the identifier boost, and the full hybrid.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	set, err := evalset.Load(*setPath)
	if err != nil {
		fmt.Fprintln(stderr, "eval:", err)
		return 1
	}
	emb := embedder(cfg)
	if emb == nil {
		fmt.Fprintln(stderr, "eval: no embedding endpoint configured; set MATE_EMBEDDING_BASE_URL (and _API_KEY, _MODEL); only the lexical rows are computed")
	}
	dir, err := os.MkdirTemp("", "matememory-eval-")
	if err != nil {
		fmt.Fprintln(stderr, "eval:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	db, err := store.Open("sqlite", "", dir)
	if err != nil {
		fmt.Fprintln(stderr, "eval:", err)
		return 1
	}
	defer store.Close(db)
	if err := store.Migrate(ctx, db); err != nil {
		fmt.Fprintln(stderr, "eval:", err)
		return 1
	}
	clock := func() time.Time { return set.Now }
	an := lexical.NewAnalyzer()
	base := recallSettings(cfg)
	var iopts []recall.IndexerOption
	if emb != nil {
		iopts = append(iopts, recall.WithEmbedder(emb))
	}
	ix := recall.NewIndexer(db, an, base, append(iopts, recall.WithClock(clock), recall.WithLogger(log))...)
	ws := workspace.New(db, workspace.WithDefaults(cfg.Mate.Language, "UTC"), workspace.WithClock(clock))
	start := time.Now()
	if err := evalset.Seed(ctx, ws, ix, 1, set); err != nil {
		fmt.Fprintln(stderr, "eval:", err)
		return 1
	}
	fmt.Fprintf(stdout, "indexed %d files in %s\n", len(set.Files), time.Since(start).Round(time.Millisecond))
	var rows []evalset.Metrics
	ss := evalset.Searchers{DB: db, An: an, Base: base, Emb: emb, Opts: []recall.SearcherOption{recall.SearchWithClock(clock), recall.SearchWithLogger(log)}}
	for _, name := range evalset.Order {
		if evalset.UsesVectors(name) && emb == nil {
			continue
		}
		m, err := evalset.Evaluate(ctx, ss.For(name), 1, set, name, *k)
		if err != nil {
			fmt.Fprintln(stderr, "eval:", err)
			return 1
		}
		if m.Degraded > 0 {
			fmt.Fprintf(stderr, "eval: %s: %d searches fell back to lexical (embedding endpoint failed)\n", name, m.Degraded)
		}
		rows = append(rows, m)
	}
	if emb != nil {
		fmt.Fprintf(stdout, "embedding model %s\n", emb.Model())
	}
	evalset.Print(stdout, rows)
	if *misses {
		for _, m := range rows {
			fmt.Fprintf(stdout, "\n%s: %d missed\n", m.Name, len(m.Misses))
			for _, x := range m.Misses {
				fmt.Fprintf(stdout, "  [%s] %q: gold at rank %d; first hits %v\n", x.Kind, x.Query, x.Rank, x.Hits)
			}
		}
	}
	// The relevance floor at the configured min-coverage and min-cosine, against the queries
	// with and without an answer: what to set min-cosine to for this endpoint's model.
	var cals []evalset.Calibration
	for _, name := range []string{evalset.Service, evalset.Hybrid} {
		if evalset.UsesVectors(name) && emb == nil {
			continue
		}
		c, err := ss.Calibrate(ctx, 1, set, name)
		if err != nil {
			fmt.Fprintln(stderr, "eval:", err)
			return 1
		}
		cals = append(cals, c)
	}
	fmt.Fprintln(stdout)
	evalset.PrintCalibration(stdout, cals)
	return 0
}
