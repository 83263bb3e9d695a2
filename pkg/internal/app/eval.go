package app

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"gorm.io/gorm"

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
	if len(args) > 0 && args[0] == "locomo" {
		return evalLocomo(ctx, cfg, log, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setPath := fs.String("set", "", "evaluation set JSON (default: the built-in synthetic memory, pkg/internal/recall/evalset/testdata/eval.json)")
	k := fs.Int("k", 5, "recall@k")
	misses := fs.Bool("misses", false, "list the queries each configuration missed (gold not in the first k)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: api eval [-set file.json] [-k 5] [-misses]     (or: api eval memory -help, api eval locomo -help)")
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
	db, done, err := scratchDB(ctx, "matememory-eval-")
	if err != nil {
		fmt.Fprintln(stderr, "eval:", err)
		return 1
	}
	defer done()
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

// evalLocomo is `api eval locomo -data locomo10.json`: LoCoMo's questions over its
// conversations stored as conversations, then as daily notes, in a scratch SQLite
// database, beside SQLite FTS5 BM25 over the same chunks (lexical: no embedder).
func evalLocomo(ctx context.Context, cfg config.Config, log *slog.Logger, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("eval locomo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "LoCoMo's JSON (data/locomo10.json of github.com/snap-research/locomo: a list of samples)")
	samples := fs.String("samples", strings.Join(evalset.LocomoDevSamples, ","), "comma-separated sample_ids (default: the dev split tuned on)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: api eval locomo -data locomo10.json [-samples conv-26,conv-30]")
		fmt.Fprintln(stderr, "Stores each sample's sessions as conversations, then as daily notes, and prints session- and")
		fmt.Fprintln(stderr, "turn-level recall@1/3/5/10, MRR, per category, the share with no hit and latency, beside SQLite")
		fmt.Fprintln(stderr, "FTS5 BM25 (unicode61, porter, trigram) over the same chunks.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *data == "" {
		fs.Usage()
		return 2
	}
	var only []string
	for _, s := range strings.Split(*samples, ",") {
		if s = strings.TrimSpace(s); s != "" {
			only = append(only, s)
		}
	}
	set, err := evalset.LoadLocomo(*data, only)
	if err != nil {
		fmt.Fprintln(stderr, "eval:", err)
		return 1
	}
	db, done, err := scratchDB(ctx, "matememory-locomo-")
	if err != nil {
		fmt.Fprintln(stderr, "eval:", err)
		return 1
	}
	defer done()
	// Searches run a day after the last session of the data.
	var last time.Time
	for _, s := range set {
		for _, ses := range s.Sessions {
			if ses.Date.After(last) {
				last = ses.Date
			}
		}
	}
	clock := func() time.Time { return last.Add(24 * time.Hour) }
	an := lexical.NewAnalyzer()
	base := recallSettings(cfg)
	ix := recall.NewIndexer(db, an, base, recall.WithClock(clock), recall.WithLogger(log))
	ws := workspace.New(db, workspace.WithDefaults("en", "UTC"), workspace.WithClock(clock))
	se := recall.NewSearcher(db, an, base, recall.SearchWithClock(clock), recall.SearchWithLogger(log))
	start := time.Now()
	rows, err := evalset.RunLocomo(ctx, db, ws, ix, se, set, 1)
	if err != nil {
		fmt.Fprintln(stderr, "eval:", err)
		return 1
	}
	ids := make([]string, len(set))
	for k, s := range set {
		ids[k] = s.ID
	}
	fmt.Fprintf(stdout, "LoCoMo samples %s, run in %s\n\n", strings.Join(ids, ", "), time.Since(start).Round(time.Second))
	evalset.PrintLocomo(stdout, rows)
	return 0
}

// scratchDB opens a migrated SQLite database in a new temporary folder, for an evaluation's
// own index; done closes it and removes the folder.
func scratchDB(ctx context.Context, prefix string) (db *gorm.DB, done func(), err error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, nil, err
	}
	if db, err = store.Open("sqlite", "", dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	done = func() {
		_ = store.Close(db)
		_ = os.RemoveAll(dir)
	}
	if err := store.Migrate(ctx, db); err != nil {
		done()
		return nil, nil, err
	}
	return db, done, nil
}
