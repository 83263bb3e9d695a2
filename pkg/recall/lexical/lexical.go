// Package lexical scores text with BM25 over terms from bleve's analysers: Unicode word
// segmentation (UAX #29), CJK width folding and bigrams for Chinese and Japanese, lower
// case, English possessives, stop words and Porter stemming for words in Latin script.
//
// The scoring is BM25 over one agent's chunks held in memory (not a bleve index): an agent's
// memory is small, its statistics must be its own (never another agent's), and a per-agent
// in-memory posting list is rebuilt from stored terms in milliseconds.
package lexical

import (
	"math"
	"strings"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"
	"github.com/blevesearch/bleve/v2/analysis/token/stop"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
)

// Analyzer turns text into terms. It is safe for concurrent use.
type Analyzer struct {
	a analysis.Analyzer
}

// latinOnly applies a filter to alphanumeric tokens only, so the English stemmer and stop
// words never touch CJK bigrams.
type latinOnly struct{ f analysis.TokenFilter }

func (l latinOnly) Filter(in analysis.TokenStream) analysis.TokenStream {
	var latin analysis.TokenStream
	for _, t := range in {
		if t.Type == analysis.AlphaNumeric {
			latin = append(latin, t)
		}
	}
	if len(latin) == 0 {
		return in
	}
	kept := map[*analysis.Token]bool{}
	for _, t := range l.f.Filter(latin) {
		kept[t] = true
	}
	out := in[:0:0]
	for _, t := range in {
		if t.Type != analysis.AlphaNumeric || kept[t] {
			out = append(out, t)
		}
	}
	return out
}

// NewAnalyzer builds the mixed Chinese/English analyser.
func NewAnalyzer() *Analyzer {
	stops := analysis.NewTokenMap()
	_ = stops.LoadBytes(en.EnglishStopWords) // static list: cannot fail
	return &Analyzer{a: &analysis.DefaultAnalyzer{
		Tokenizer: unicode.NewUnicodeTokenizer(),
		TokenFilters: []analysis.TokenFilter{
			cjk.NewCJKWidthFilter(),
			lowercase.NewLowerCaseFilter(),
			// Unigrams too, so a one-character query (猫) still matches.
			cjk.NewCJKBigramFilter(true),
			latinOnly{en.NewPossessiveFilter()},
			latinOnly{stop.NewStopTokensFilter(stops)},
			latinOnly{porter.NewPorterStemmer()},
		},
	}}
}

// Terms analyses text.
func (a *Analyzer) Terms(text string) []string {
	ts := a.a.Analyze([]byte(text))
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		if len(t.Term) > 0 {
			out = append(out, string(t.Term))
		}
	}
	return out
}

// BM25 parameters (the usual ones).
const (
	k1 = 1.2
	b  = 0.75
)

// Index is an immutable BM25 index over documents given as term lists. Build it once per
// snapshot of an agent's chunks; Score is safe for concurrent use.
type Index struct {
	vocab    map[string]uint32
	postings [][]posting
	docLen   []uint32
	avgLen   float64
}

type posting struct {
	doc uint32
	tf  uint32
}

// NewIndex indexes docs (each a list of terms; the position is the document number).
func NewIndex(docs [][]string) *Index {
	ix := &Index{vocab: map[string]uint32{}, docLen: make([]uint32, len(docs))}
	total := 0
	tf := map[uint32]uint32{}
	for d, terms := range docs {
		clear(tf)
		for _, t := range terms {
			id, ok := ix.vocab[t]
			if !ok {
				id = uint32(len(ix.postings))
				ix.vocab[t] = id
				ix.postings = append(ix.postings, nil)
			}
			tf[id]++
		}
		for id, n := range tf {
			ix.postings[id] = append(ix.postings[id], posting{doc: uint32(d), tf: n})
		}
		ix.docLen[d] = uint32(len(terms))
		total += len(terms)
	}
	if len(docs) > 0 {
		ix.avgLen = float64(total) / float64(len(docs))
	}
	return ix
}

// Len is the number of documents.
func (ix *Index) Len() int { return len(ix.docLen) }

// Bytes estimates the index's memory.
func (ix *Index) Bytes() int {
	n := len(ix.docLen) * 4
	for t, id := range ix.vocab {
		n += len(t) + 24 + len(ix.postings[id])*8
	}
	return n
}

// Score returns the BM25 score of every document (indexed by document number; 0 = no
// query term). Repeated query terms count once.
func (ix *Index) Score(query []string) []float64 {
	out := make([]float64, len(ix.docLen))
	n := float64(len(ix.docLen))
	seen := map[string]bool{}
	for _, q := range query {
		if seen[q] {
			continue
		}
		seen[q] = true
		id, ok := ix.vocab[q]
		if !ok {
			continue
		}
		ps := ix.postings[id]
		idf := math.Log(1 + (n-float64(len(ps))+0.5)/(float64(len(ps))+0.5))
		for _, p := range ps {
			tf := float64(p.tf)
			dl := float64(ix.docLen[p.doc])
			out[p.doc] += idf * tf * (k1 + 1) / (tf + k1*(1-b+b*dl/ix.avgLen))
		}
	}
	return out
}

// JoinTerms and SplitTerms store a term list as one string (terms never contain spaces).
func JoinTerms(t []string) string { return strings.Join(t, " ") }

// SplitTerms is the inverse of JoinTerms.
func SplitTerms(s string) []string { return strings.Fields(s) }
