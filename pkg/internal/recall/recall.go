// Package recall is hybrid search over an agent's memory files: chunks indexed from the
// database record (index.go), scored by BM25 over bleve-analysed terms and by the cosine of
// embeddings, weighted, decayed by the age of dated notes, de-duplicated by MMR (search.go),
// kept fresh by an event-driven indexer with a reconciler behind it (worker.go).
package recall

import (
	"github.com/matememory/matememory/pkg/internal/fault"
	"time"
)

// Settings tune indexing and ranking. Zero values take the defaults (Defaults).
type Settings struct {
	ChunkTokens   int
	OverlapTokens int
	// VectorWeight and TextWeight weigh the two scores (normalised to sum 1).
	VectorWeight, TextWeight float64
	// HalfLifeDays halves the score of a dated note every so many days (negative = no decay).
	HalfLifeDays float64
	// DecayFloor is the least a dated note's score is multiplied by, however old (0–1):
	// decay orders notes of similar relevance by age; it must not bury an exact match in an
	// old note under vague recent ones.
	DecayFloor float64
	// MMRLambda trades relevance (1) against diversity (0).
	MMRLambda float64
	// ExactBoost is added to the score of a chunk containing the query's identifiers
	// verbatim (scaled by the share found); negative = off.
	ExactBoost float64
	// MinScore drops hits whose relevance (before decay) is below it.
	MinScore float64
	// MinCoverage is the relevance floor: a chunk is a hit only when it holds at least this
	// IDF-weighted share of the query's words (0–1), or its cosine reaches MinCosine.
	// Negative = no floor.
	MinCoverage float64
	// MinCosine lets a chunk below MinCoverage be a hit on its cosine alone (0 = never):
	// cosines depend on the model, so calibrate it with `api eval` against the endpoint.
	MinCosine float64
	// NoSupersede turns supersession off: by default a dated note ranks below a newer dated
	// note that matches the same words of the query.
	NoSupersede bool
	// SupersedeShare is how much of an older note's specific query words (lexical.SpecificShare)
	// a newer note must hold to supersede it (0–1).
	SupersedeShare float64
	// DefaultResults and MaxResults bound maxResults.
	DefaultResults, MaxResults int
	// MaxQueryBytes bounds a query.
	MaxQueryBytes int
	// CacheBytes bounds the per-process cache of agents' chunks and vectors (LRU).
	CacheBytes int64
	// ReconcileInterval is how often the indexer sweeps for changes it was not told about.
	ReconcileInterval time.Duration
	// SnippetBytes bounds a hit's snippet.
	SnippetBytes int
}

// DefaultMinCoverage is the relevance floor calibrated on the evaluation set (docs/recall.md).
const DefaultMinCoverage = 0.6

// Defaults are the documented defaults.
func Defaults() Settings {
	return Settings{ChunkTokens: 400, OverlapTokens: 60, VectorWeight: 0.7, TextWeight: 0.3,
		HalfLifeDays: 30, DecayFloor: 0.8, MMRLambda: 0.9, ExactBoost: 0.5, MinScore: 0, MinCoverage: DefaultMinCoverage, MinCosine: 0.8, SupersedeShare: 0.4, DefaultResults: 6, MaxResults: 50,
		MaxQueryBytes: 2000, CacheBytes: 256 << 20, ReconcileInterval: 30 * time.Second, SnippetBytes: 700}
}

func (s Settings) withDefaults() Settings {
	d := Defaults()
	if s.ChunkTokens <= 0 {
		s.ChunkTokens = d.ChunkTokens
	}
	if s.OverlapTokens <= 0 {
		s.OverlapTokens = d.OverlapTokens
	}
	if s.VectorWeight < 0 || s.TextWeight < 0 || s.VectorWeight+s.TextWeight == 0 {
		s.VectorWeight, s.TextWeight = d.VectorWeight, d.TextWeight
	}
	if s.HalfLifeDays == 0 {
		s.HalfLifeDays = d.HalfLifeDays
	}
	if s.ExactBoost == 0 {
		s.ExactBoost = d.ExactBoost
	}
	if s.DecayFloor <= 0 || s.DecayFloor > 1 {
		s.DecayFloor = d.DecayFloor
	}
	if s.MMRLambda <= 0 || s.MMRLambda > 1 {
		s.MMRLambda = d.MMRLambda
	}
	if s.MinCoverage == 0 {
		s.MinCoverage = d.MinCoverage
	}
	if s.SupersedeShare <= 0 || s.SupersedeShare > 1 {
		s.SupersedeShare = d.SupersedeShare
	}
	if s.MinCosine == 0 {
		s.MinCosine = d.MinCosine
	}
	if s.DefaultResults <= 0 {
		s.DefaultResults = d.DefaultResults
	}
	if s.MaxResults <= 0 {
		s.MaxResults = d.MaxResults
	}
	if s.MaxQueryBytes <= 0 {
		s.MaxQueryBytes = d.MaxQueryBytes
	}
	if s.CacheBytes <= 0 {
		s.CacheBytes = d.CacheBytes
	}
	if s.ReconcileInterval <= 0 {
		s.ReconcileInterval = d.ReconcileInterval
	}
	if s.SnippetBytes <= 0 {
		s.SnippetBytes = d.SnippetBytes
	}
	return s
}

// InvalidError is a query the caller got wrong: fault's one invalid-input error.
type InvalidError = fault.Invalid

// ErrInvalid is matched by every InvalidError.
var ErrInvalid = fault.ErrInvalid

func invalidf(format string, args ...any) error { return fault.Invalidf(format, args...) }
