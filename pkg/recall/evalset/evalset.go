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
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/matememory/matememory/pkg/recall"
	"github.com/matememory/matememory/pkg/store"
	"github.com/matememory/matememory/pkg/workspace"
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
	Gold  []Gold `json:"gold"`
}

// Set is an evaluation set.
type Set struct {
	Now     time.Time         `json:"now"`
	Files   map[string]string `json:"files"`
	Queries []Query           `json:"queries"`
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
	// ByKind is recall@k per query kind, MRRByKind the MRR.
	ByKind, MRRByKind map[string]float64
	// Degraded counts searches answered lexically because the embedding endpoint failed.
	Degraded int
}

// Evaluate runs every query (top 10) and scores recall@k (a gold chunk among the first k
// hits) and MRR (1 / rank of the first gold hit, 0 beyond 10).
func Evaluate(ctx context.Context, se *recall.Searcher, agentID int64, s Set, name string, k int) (Metrics, error) {
	m := Metrics{Name: name, K: k, ByKind: map[string]float64{}, MRRByKind: map[string]float64{}}
	perKind := map[string]int{}
	for _, q := range s.Queries {
		res, err := se.Search(ctx, agentID, recall.Query{Text: q.Query, MaxResults: 10})
		if err != nil {
			return m, fmt.Errorf("query %q: %w", q.Query, err)
		}
		if res.Degraded {
			m.Degraded++
		}
		m.Queries++
		perKind[q.Kind]++
		for rank, h := range res.Hits {
			if !isGold(h, q.Gold) {
				continue
			}
			m.MRR += 1 / float64(rank+1)
			m.MRRByKind[q.Kind] += 1 / float64(rank+1)
			if rank < k {
				m.RecallAtK++
				m.ByKind[q.Kind]++
			}
			break
		}
	}
	for kind, n := range perKind {
		m.ByKind[kind] /= float64(n)
		m.MRRByKind[kind] /= float64(n)
	}
	m.RecallAtK /= float64(m.Queries)
	m.MRR /= float64(m.Queries)
	return m, nil
}

func isGold(h recall.Hit, gold []Gold) bool {
	for _, g := range gold {
		if h.Filename == g.File && strings.Contains(h.Snippet, g.Contains) {
			return true
		}
	}
	return false
}

// Configurations compared by the evaluation: BM25 alone, cosine alone, BM25 with the
// exact-identifier boost (the lexical mode of the service), and the full hybrid.
func Configurations(base recall.Settings) map[string]recall.Settings {
	lex := base
	lex.VectorWeight, lex.TextWeight, lex.HalfLifeDays, lex.MMRLambda, lex.ExactBoost = 0, 1, -1, 1, -1
	vec := base
	vec.VectorWeight, vec.TextWeight, vec.HalfLifeDays, vec.MMRLambda, vec.ExactBoost = 1, 0, -1, 1, -1
	lexBoost := lex
	lexBoost.ExactBoost = 0
	return map[string]recall.Settings{Lexical: lex, Vector: vec, LexicalBoost: lexBoost, Hybrid: base}
}

// Names of the configurations.
const (
	Lexical      = "lexical (BM25 only)"
	Vector       = "vector (cosine only)"
	LexicalBoost = "lexical + exact-identifier boost"
	Hybrid       = "hybrid 0.7/0.3 + boost + decay + MMR"
)

// Order is the order rows are printed in.
var Order = []string{Lexical, Vector, LexicalBoost, Hybrid}

// UsesVectors reports whether a configuration needs the embedder.
func UsesVectors(name string) bool { return name == Vector || name == Hybrid }

// Print writes a Markdown table of results.
func Print(w io.Writer, ms []Metrics) {
	kinds := map[string]bool{}
	for _, m := range ms {
		for k := range m.ByKind {
			kinds[k] = true
		}
	}
	var ks []string
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	fmt.Fprintln(w, "(per-kind columns: recall@k of that kind of query)")
	fmt.Fprintf(w, "| configuration | queries | recall@%d | MRR@10 | MRR superseded |", ms[0].K)
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
		fmt.Fprintf(w, "| %s | %d | %.3f | %.3f | %.3f |", m.Name, m.Queries, m.RecallAtK, m.MRR, m.MRRByKind["superseded"])
		for _, k := range ks {
			fmt.Fprintf(w, " %.2f |", m.ByKind[k])
		}
		fmt.Fprintln(w)
	}
}
