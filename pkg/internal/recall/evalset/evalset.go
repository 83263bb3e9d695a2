// Package evalset is the retrieval evaluation of memory search: a synthetic five-month
// memory of one agent (daily notes, notes in sub-folders, conversation summaries, MEMORY.md
// and PROFILE.md; Chinese, English and mixed; identifiers; facts superseded later;
// paraphrases) with queries and their gold chunks, and recall@k and MRR over it.
// testdata/gen.py generates the set.
package evalset

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/recall/embed"
	"github.com/matememory/matememory/pkg/internal/recall/lexical"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

//go:embed testdata/eval.json
var defaultSet []byte

// Gold is a relevant chunk: a file and text the chunk contains.
type Gold struct {
	File     string `json:"file"`
	Contains string `json:"contains"`
}

// Query is one evaluation query.
type Query struct {
	Query string `json:"query"`
	Kind  string `json:"kind"`
	// Gold are the chunks that answer it; none means memory has no answer (no hits wanted).
	Gold []Gold `json:"gold"`
	// Stale are chunks the gold supersedes (an older note, a core file's to-do line): the
	// gold should rank above them.
	Stale []Gold `json:"stale,omitempty"`
	// Origin names the extension that added the query ("" = the original set).
	Origin string `json:"origin,omitempty"`
}

// Set is an evaluation set.
type Set struct {
	Now     time.Time         `json:"now"`
	Files   map[string]string `json:"files"`
	Queries []Query           `json:"queries"`
}

// Split cuts the set into a tune part and a test part, about half of each kind of query
// each (by a hash of the query's text: the same split every run). Floors are calibrated on
// the tune part only; the test part says whether they hold on queries they were not set on.
func (s Set) Split() (tune, test Set) {
	tune, test = s, s
	tune.Queries, test.Queries = nil, nil
	for _, q := range s.Queries {
		h := fnv.New32a()
		h.Write([]byte(q.Query))
		if h.Sum32()%2 == 0 {
			tune.Queries = append(tune.Queries, q)
		} else {
			test.Queries = append(test.Queries, q)
		}
	}
	return tune, test
}

// Default is the set shipped in testdata.
func Default() (Set, error) { return parse(defaultSet) }

// Load reads a set from a file ("" = Default).
func Load(path string) (Set, error) {
	if path == "" {
		return Default()
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return Set{}, err
	}
	return parse(raw)
}

func parse(raw []byte) (Set, error) {
	var s Set
	if err := json.Unmarshal(raw, &s); err != nil {
		return s, fmt.Errorf("evaluation set: %w", err)
	}
	if len(s.Files) == 0 || len(s.Queries) == 0 {
		return s, fmt.Errorf("evaluation set has %d files and %d queries", len(s.Files), len(s.Queries))
	}
	return s, nil
}

// Seed writes the set's files for agentID and indexes them.
func Seed(ctx context.Context, ws *workspace.Service, ix *recall.Indexer, agentID int64, s Set) error {
	names := make([]string, 0, len(s.Files))
	for n := range s.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, _, err := ws.Write(ctx, agentID, n, s.Files[n], workspace.AnyVersion, workspace.Change{Actor: store.ActorAPI}); err != nil {
			return fmt.Errorf("seed %s: %w", n, err)
		}
	}
	_, err := ix.Backfill(ctx, agentID, nil)
	return err
}

// Metrics are the scores of one configuration.
type Metrics struct {
	Name      string
	Queries   int
	RecallAtK float64
	MRR       float64
	K         int
	// ByKind is recall@k per query kind, MRRByKind the MRR, At1ByKind recall@1.
	ByKind, MRRByKind, At1ByKind map[string]float64
	// Existing is recall@k over the original set's queries (Origin ""), OrigQueries their count.
	Existing    float64
	OrigQueries int
	// NewerFirst is, per kind, the share of queries with stale chunks whose gold is found and
	// ranks above every stale chunk; Stale counts those queries.
	NewerFirst map[string]float64
	Stale      map[string]int
	// NoHits is, per kind, the share of queries without gold answered with no hits.
	NoHits map[string]float64
	// PerKind counts the queries of each kind; NoGold marks the kinds without gold.
	PerKind map[string]int
	NoGold  map[string]bool
	// Degraded counts searches answered lexically because the embedding endpoint failed.
	Degraded int
	// Misses are the queries with gold not found in the first k, each with the files of its
	// first hits.
	Misses []Miss
}

// Miss is a query whose gold was not among the first k hits.
type Miss struct {
	Query, Kind string
	// Rank is the gold's rank (from 0) within the first 10, -1 when not there.
	Rank int
	Hits []string
}

// Evaluate runs every query (top 10) and scores recall@k (a gold chunk among the first k
// hits), MRR (1 / rank of the first gold hit, 0 beyond 10), for queries with stale chunks
// whether the gold ranks first of them, and for queries without gold whether nothing is hit.
func Evaluate(ctx context.Context, se *recall.Searcher, agentID int64, s Set, name string, k int) (Metrics, error) {
	m := Metrics{Name: name, K: k, ByKind: map[string]float64{}, MRRByKind: map[string]float64{}, At1ByKind: map[string]float64{},
		NewerFirst: map[string]float64{}, Stale: map[string]int{}, NoHits: map[string]float64{}, PerKind: map[string]int{}, NoGold: map[string]bool{}}
	for _, q := range s.Queries {
		m.PerKind[q.Kind]++
		if len(q.Gold) == 0 {
			// "Nothing relevant" is auto-recall's decision (the context window's block): an
			// explicit search answers the ranked matches.
			res, err := se.Search(ctx, agentID, recall.Query{Text: q.Query, MaxResults: 10, Auto: true})
			if err != nil {
				return m, fmt.Errorf("query %q: %w", q.Query, err)
			}
			m.NoGold[q.Kind] = true
			if len(res.Hits) == 0 {
				m.NoHits[q.Kind]++
			}
			continue
		}
		res, err := se.Search(ctx, agentID, recall.Query{Text: q.Query, MaxResults: 10})
		if err != nil {
			return m, fmt.Errorf("query %q: %w", q.Query, err)
		}
		if res.Degraded {
			m.Degraded++
		}
		m.Queries++
		if q.Origin == "" {
			m.OrigQueries++
		}
		goldRank, staleRank := -1, -1
		for rank, h := range res.Hits {
			if goldRank < 0 && isGold(h, q.Gold) {
				goldRank = rank
			}
			if staleRank < 0 && isGold(h, q.Stale) {
				staleRank = rank
			}
		}
		if len(q.Stale) > 0 {
			m.Stale[q.Kind]++
			if goldRank >= 0 && (staleRank < 0 || goldRank < staleRank) {
				m.NewerFirst[q.Kind]++
			}
		}
		if goldRank < 0 || goldRank >= k {
			miss := Miss{Query: q.Query, Kind: q.Kind, Rank: goldRank}
			for _, h := range res.Hits[:min(k, len(res.Hits))] {
				miss.Hits = append(miss.Hits, h.Filename)
			}
			m.Misses = append(m.Misses, miss)
		}
		if goldRank < 0 {
			continue
		}
		m.MRR += 1 / float64(goldRank+1)
		m.MRRByKind[q.Kind] += 1 / float64(goldRank+1)
		if goldRank == 0 {
			m.At1ByKind[q.Kind]++
		}
		if goldRank < k {
			m.RecallAtK++
			m.ByKind[q.Kind]++
			if q.Origin == "" {
				m.Existing++
			}
		}
	}
	for kind, n := range m.PerKind {
		m.ByKind[kind] /= float64(n)
		m.MRRByKind[kind] /= float64(n)
		m.At1ByKind[kind] /= float64(n)
		m.NoHits[kind] /= float64(n)
		if st := m.Stale[kind]; st > 0 {
			m.NewerFirst[kind] /= float64(st)
		}
	}
	if m.Queries > 0 {
		m.RecallAtK /= float64(m.Queries)
		m.MRR /= float64(m.Queries)
	}
	if m.OrigQueries > 0 {
		m.Existing /= float64(m.OrigQueries)
	}
	return m, nil
}

// isGold reports whether hit h is one of gold, or folds a restatement of it (the same fact
// written in another file: the hit names that file and its snippet holds the marker).
func isGold(h recall.Hit, gold []Gold) bool {
	for _, g := range gold {
		if !strings.Contains(h.Snippet, g.Contains) {
			continue
		}
		if h.Filename == g.File {
			return true
		}
		if h.Stated != nil && slices.Contains(h.Stated.Files, g.File) {
			return true
		}
	}
	return false
}

// Configurations compared by the evaluation: BM25 alone, cosine alone, BM25 with the
// exact-identifier boost, the service's lexical mode (its defaults without an embedding
// endpoint) and the full hybrid.
func Configurations(base recall.Settings) map[string]recall.Settings {
	lex := base
	lex.VectorWeight, lex.TextWeight, lex.HalfLifeDays, lex.MMRLambda, lex.ExactBoost = 0, 1, -1, 1, -1
	vec := base
	vec.VectorWeight, vec.TextWeight, vec.HalfLifeDays, vec.MMRLambda, vec.ExactBoost = 1, 0, -1, 1, -1
	lexBoost := lex
	lexBoost.ExactBoost = 0
	return map[string]recall.Settings{Lexical: lex, Vector: vec, LexicalBoost: lexBoost, Service: base, Hybrid: base}
}

// Names of the configurations.
const (
	Lexical      = "lexical (BM25 only)"
	Vector       = "vector (cosine only)"
	LexicalBoost = "lexical + exact-identifier boost"
	Service      = "service lexical mode (defaults, no embedder)"
	Hybrid       = "hybrid (defaults)"
)

// Order is the order rows are printed in.
var Order = []string{Lexical, Vector, LexicalBoost, Service, Hybrid}

// UsesVectors reports whether a configuration needs the embedder.
func UsesVectors(name string) bool { return name == Vector || name == Hybrid }

// Print writes Markdown tables of results: recall@k per kind, then the goals of the kinds
// that have one (newer first, no hits, recall@1).
func Print(w io.Writer, ms []Metrics) {
	kinds := map[string]bool{}
	for _, m := range ms {
		for k := range m.PerKind {
			kinds[k] = true
		}
	}
	var ks []string
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	fmt.Fprintln(w, "(per-kind columns: recall@k of that kind of query; no-answer and small-talk: share answered with no hits)")
	fmt.Fprintf(w, "| configuration | queries | recall@%d | original set recall@%d | MRR@10 |", ms[0].K, ms[0].K)
	for _, k := range ks {
		fmt.Fprintf(w, " %s |", k)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "| --- | --- | --- | --- | --- |")
	for range ks {
		fmt.Fprint(w, " --- |")
	}
	fmt.Fprintln(w)
	for _, m := range ms {
		fmt.Fprintf(w, "| %s | %d | %.3f | %.3f | %.3f |", m.Name, m.Queries, m.RecallAtK, m.Existing, m.MRR)
		for _, k := range ks {
			v := m.ByKind[k]
			if m.NoGold[k] {
				v = m.NoHits[k]
			}
			fmt.Fprintf(w, " %.2f |", v)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| configuration | superseded: newer first | superseded MRR | restated: changed note in top 5 | core-vs-dated: note above core file | core-vs-dated recall@1 | no-answer: no hits | small-talk: no hits |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, m := range ms {
		fmt.Fprintf(w, "| %s | %.2f | %.3f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", m.Name, m.NewerFirst["superseded"], m.MRRByKind["superseded"],
			m.ByKind["restated"], m.NewerFirst["core-vs-dated"], m.At1ByKind["core-vs-dated"], m.NoHits["no-answer"], m.NoHits["small-talk"])
	}
}

// Calibration is how well the relevance floor separates answers from non-answers: for each
// query with gold, the gold hit's coverage and cosine (positives, when it is found with no
// floor at all); for each query without gold, its best hit's (negatives).
type Calibration struct {
	Name string
	// Answerable counts the queries with gold, Found those whose gold is among the first 10
	// hits with no floor; Unanswerable the queries without gold.
	Answerable, Found, Unanswerable int
	// Coverage is the floor on coverage (min-coverage), Cosine on the cosine (min-cosine;
	// zero when the configuration has no vectors).
	Coverage, Cosine Threshold
	// Relevance is the hits' relevance at ConfidentRelevance (0.5), from searches with the
	// configuration's floors: how well "confident" separates answers from non-answers.
	Relevance Threshold
}

// Threshold is one floor's figures at a value: Recall is the share of the found gold hits
// that clear it, Precision the share of gold among what clears it (gold hits and the best
// hits of queries without gold), Through the queries without gold that clear it, AUC the
// probability that a gold hit outscores the best hit of a query without gold.
type Threshold struct {
	At, AUC, Precision, Recall float64
	Through                    int
	// Suggested is the lowest floor that lets at most 5 % of the queries without gold through
	// (just above the best hit of the next one), and SuggestedRecall the share of gold hits
	// it keeps: where to set this floor for the model measured.
	Suggested, SuggestedRecall float64
}

// Searchers builds each configuration's searcher over one seeded database.
type Searchers struct {
	DB *gorm.DB
	An *lexical.Analyzer
	// Base is what Configurations derives the configurations from.
	Base recall.Settings
	// Emb is the embedder of the configurations with vectors (UsesVectors).
	Emb embed.Embedder
	// Opts are added to every searcher (a clock, a logger).
	Opts []recall.SearcherOption
}

// For is the searcher of configuration name.
func (ss Searchers) For(name string) *recall.Searcher {
	return ss.with(name, Configurations(ss.Base)[name])
}

func (ss Searchers) with(name string, set recall.Settings) *recall.Searcher {
	opts := slices.Clone(ss.Opts)
	if UsesVectors(name) {
		opts = append(opts, recall.SearchWithEmbedder(ss.Emb))
	}
	return recall.NewSearcher(ss.DB, ss.An, set, opts...)
}

// Calibrate scores configuration name's relevance floors, min-coverage and (when it uses
// vectors) min-cosine as they take effect, over searches of the same configuration with no
// floor at all.
func (ss Searchers) Calibrate(ctx context.Context, agentID int64, s Set, name string) (Calibration, error) {
	set := Configurations(ss.Base)[name]
	floors := recall.NewSearcher(nil, nil, set).Settings() // defaults filled in
	minCosine := 0.0
	if UsesVectors(name) {
		minCosine = floors.MinCosine
	}
	set.MinCoverage, set.MinCosine = -1, 0
	c, err := calibrate(ctx, ss.with(name, set), agentID, s, name, floors.MinCoverage, minCosine)
	if err != nil {
		return c, err
	}
	rel, err := calibrate(ctx, ss.For(name), agentID, s, name, 0, 0)
	c.Relevance = rel.Relevance
	return c, err
}

// calibrate runs every query through se, which has no floor, and scores the floors at
// minCoverage and minCosine (0: none).
func calibrate(ctx context.Context, se *recall.Searcher, agentID int64, s Set, name string, minCoverage, minCosine float64) (Calibration, error) {
	c := Calibration{Name: name}
	var posCov, negCov, posCos, negCos, posRel, negRel []float64
	for _, q := range s.Queries {
		res, err := se.Search(ctx, agentID, recall.Query{Text: q.Query, MaxResults: 10})
		if err != nil {
			return c, fmt.Errorf("query %q: %w", q.Query, err)
		}
		if len(q.Gold) == 0 {
			c.Unanswerable++
			bestCov, bestCos, bestRel := 0.0, 0.0, 0.0
			for _, h := range res.Hits {
				bestCov, bestCos, bestRel = max(bestCov, h.Coverage), max(bestCos, h.Vector), max(bestRel, h.Relevance)
			}
			negCov, negCos, negRel = append(negCov, bestCov), append(negCos, bestCos), append(negRel, bestRel)
			continue
		}
		c.Answerable++
		for _, h := range res.Hits {
			if isGold(h, q.Gold) {
				c.Found++
				posCov, posCos, posRel = append(posCov, h.Coverage), append(posCos, h.Vector), append(posRel, h.Relevance)
				break
			}
		}
	}
	c.Coverage = threshold(posCov, negCov, minCoverage)
	c.Relevance = threshold(posRel, negRel, recall.ConfidentRelevance)
	if minCosine > 0 {
		c.Cosine = threshold(posCos, negCos, minCosine)
	}
	return c, nil
}

func threshold(pos, neg []float64, at float64) Threshold {
	t := Threshold{At: at}
	kept := 0
	for _, p := range pos {
		if p >= at {
			kept++
		}
	}
	for _, n := range neg {
		if n >= at {
			t.Through++
		}
	}
	if len(pos) > 0 {
		t.Recall = float64(kept) / float64(len(pos))
	}
	if kept+t.Through > 0 {
		t.Precision = float64(kept) / float64(kept+t.Through)
	}
	if len(neg) > 0 {
		sorted := slices.Sorted(slices.Values(neg))
		slices.Reverse(sorted)
		allowed := len(neg) / 20
		t.Suggested = math.Min(1, sorted[allowed]+0.005)
		kept := 0
		for _, p := range pos {
			if p >= t.Suggested {
				kept++
			}
		}
		if len(pos) > 0 {
			t.SuggestedRecall = float64(kept) / float64(len(pos))
		}
	}
	if len(pos) > 0 && len(neg) > 0 {
		wins := 0.0
		for _, p := range pos {
			for _, n := range neg {
				switch {
				case p > n:
					wins++
				case p == n:
					wins += 0.5
				}
			}
		}
		t.AUC = wins / float64(len(pos)*len(neg))
	}
	return t
}

// PrintCalibration writes a Markdown table of calibrations.
func PrintCalibration(w io.Writer, cs []Calibration) {
	fmt.Fprintln(w, "| configuration | gold found with no floor | floor | AUC | recall (gold kept) | precision | queries without an answer let through | suggested floor (≤ 5 % let through): recall |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, c := range cs {
		rows := []struct {
			what string
			t    Threshold
		}{{"coverage", c.Coverage}, {"relevance", c.Relevance}}
		if c.Cosine.At > 0 {
			rows = append(rows, struct {
				what string
				t    Threshold
			}{"cosine", c.Cosine})
		}
		for _, r := range rows {
			fmt.Fprintf(w, "| %s | %d of %d | %s ≥ %.2f | %.3f | %.3f | %.3f | %d of %d | %.3f: %.3f |\n", c.Name, c.Found, c.Answerable, r.what, r.t.At,
				r.t.AUC, r.t.Recall, r.t.Precision, r.t.Through, c.Unanswerable, r.t.Suggested, r.t.SuggestedRecall)
		}
	}
}
