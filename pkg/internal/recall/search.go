package recall

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/matememory/matememory/pkg/api"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/sync/singleflight"
	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/panics"
	"github.com/matememory/matememory/pkg/internal/recall/embed"
	"github.com/matememory/matememory/pkg/internal/recall/lexical"
	"github.com/matememory/matememory/pkg/internal/store"
)

// Query is one search.
type Query struct {
	Text string
	// MaxResults bounds the hits (0 = the default, unless MaxResultsGiven).
	MaxResults int
	// MaxResultsGiven says the caller set MaxResults: 0 is then refused, not the default.
	MaxResultsGiven bool
	// FilenamePrefix keeps files whose name starts with it ("memory/").
	FilenamePrefix string
	// Since and Until keep chunks dated within [Since, Until] (days, inclusive); zero = open.
	Since, Until time.Time
	// MinRelevance keeps only hits whose relevance reaches it (0–1; 0 = every hit that
	// matches: an explicit search returns the ranked matches, confident or not).
	MinRelevance float64
	// Auto is a search the caller did not ask for (the context window's recall block, a
	// proactive injection): only confident hits (relevance ≥ ConfidentRelevance), so a
	// question memory has no answer to, or small talk, recalls nothing.
	Auto bool
}

// ConfidentRelevance is the relevance at which a hit is confident: it clears the relevance
// floor (min-coverage, or min-cosine), holds a query identifier verbatim, or corrects a
// confident hit. Auto-recall injects only confident hits.
const ConfidentRelevance = 0.5

// floor is the least relevance a hit of q must have.
func (q Query) floor() float64 {
	if q.Auto {
		return max(q.MinRelevance, ConfidentRelevance)
	}
	return q.MinRelevance
}

// Hit is one recalled chunk: where to read it, what it says, and why it ranked (the wire
// type, pkg/api, is its one declaration).
type Hit = api.MemoryHit

// Stated is how often a fact was restated.
type Stated = api.MemoryStated

const maxStatedFiles = 10

// Modes of a result.
const (
	ModeHybrid  = "hybrid"
	ModeLexical = "lexical"
)

// Result is the answer to a Query.
type Result = api.MemorySearchResult

// cachedChunk is what a search needs of a chunk.
type cachedChunk struct {
	filename       string
	startLine, end int
	heading, text  string
	fileVersion    int64
	hash           string
	ordinal        int
	terms          string // analysed terms, space-separated (the BM25 rebuild reads them)
	date           time.Time
	dated          bool
	vec            []float32
	ix             int         // document number in the BM25 index (the chunk's place in the snapshot)
	doc            lexical.Doc // the chunk's posting lists: which segment, which document of it
}

// Searcher answers queries from the database through a per-process cache.
type Searcher struct {
	db    *gorm.DB
	emb   embed.Embedder
	an    *lexical.Analyzer
	set   Settings
	now   func() time.Time
	log   *slog.Logger
	cache *cache
	sf    singleflight.Group
	qmu   sync.Mutex
	qvecs map[string][]float32 // query embeddings, small and bounded
	guard *panics.Guard
	// compacting holds the agents whose snapshot is being rebuilt in the background.
	compacting sync.Map
	// fullRebuild rebuilds the whole index on every refresh (the benchmarks' baseline).
	fullRebuild bool
	// files keeps large agents' snapshots on disk (nil: none); persisting holds the agents
	// whose file is being written.
	files      *snapshotFiles
	persisting sync.Map
	fileLoads  atomic.Int64 // snapshots loaded from a file
	fileStale  atomic.Int64 // of which the database had moved on since
}

// SearcherOption configures a Searcher.
type SearcherOption func(*Searcher)

// SearchWithEmbedder sets the embedding endpoint (none: lexical only).
func SearchWithEmbedder(e embed.Embedder) SearcherOption { return func(s *Searcher) { s.emb = e } }

// SearchWithClock replaces time.Now (decay in tests).
func SearchWithClock(now func() time.Time) SearcherOption { return func(s *Searcher) { s.now = now } }

// SearchWithLogger sets the logger.
func SearchWithLogger(l *slog.Logger) SearcherOption { return func(s *Searcher) { s.log = l } }

// SearchWithGuard recovers, logs and counts a panic of a background snapshot refresh (the
// next search loads the snapshot again); without it a guard logs to the searcher's logger.
func SearchWithGuard(g *panics.Guard) SearcherOption { return func(s *Searcher) { s.guard = g } }

// SearchWithSnapshotFiles keeps the snapshot of every agent with at least minChunks chunks
// (0: DefaultSnapshotMinChunks) in a file in dir, so that a cold load reads the file and
// only what changed since from the database (docs/recall.md, "Snapshot files").
func SearchWithSnapshotFiles(dir string, minChunks int) SearcherOption {
	return func(s *Searcher) {
		if dir == "" {
			return
		}
		if minChunks <= 0 {
			minChunks = DefaultSnapshotMinChunks
		}
		s.files = &snapshotFiles{dir: dir, minChunks: minChunks, forgotten: map[int64]uint64{}}
	}
}

// DefaultSnapshotMinChunks is the smallest agent whose snapshot is kept in a file: below,
// a cold load from the database takes tens of milliseconds anyway.
const DefaultSnapshotMinChunks = 5000

// NewSearcher builds a searcher.
func NewSearcher(db *gorm.DB, an *lexical.Analyzer, set Settings, opts ...SearcherOption) *Searcher {
	set = set.withDefaults()
	s := &Searcher{db: db, an: an, set: set, now: time.Now, log: slog.Default(), cache: newCache(set.CacheBytes),
		qvecs: map[string][]float32{}}
	for _, o := range opts {
		o(s)
	}
	if s.guard == nil {
		s.guard = panics.New(s.log, nil)
	}
	return s
}

// Invalidate drops an agent's cached snapshot: the next search loads it again, from its
// snapshot file if it has one, else from the database (a cold search; benchmarks and tests
// use it).
func (s *Searcher) Invalidate(agentID int64) { s.cache.drop(agentID) }

// Forget drops the agent's cached snapshot and deletes its snapshot file (an erasure: its
// chunks must leave the disk too); a file being written meanwhile is not put in place.
func (s *Searcher) Forget(agentID int64) error {
	s.cache.drop(agentID)
	if s.files == nil {
		return nil
	}
	err := s.files.remove(agentID)
	s.cache.drop(agentID) // a refresh that raced the removal
	return err
}

// SweepSnapshots removes the snapshot files of erased agents (an erasure run by another
// process) and leftover temporary files: at start, before the files are trusted.
func (s *Searcher) SweepSnapshots(ctx context.Context) error {
	if s.files == nil {
		return nil
	}
	return s.files.sweep(func(ids []int64) (map[int64]bool, error) {
		gone := map[int64]bool{}
		for start := 0; start < len(ids); start += 500 {
			var erased []int64
			if err := s.db.WithContext(ctx).Model(&store.AgentErasure{}).Where("agent_id IN ?", ids[start:min(start+500, len(ids))]).
				Pluck("agent_id", &erased).Error; err != nil {
				return nil, fmt.Errorf("read erased agents: %w", err)
			}
			for _, id := range erased {
				gone[id] = true
			}
		}
		return gone, nil
	})
}

// persist writes the snapshot's file in the background when the agent is large enough (one
// write per agent at a time).
func (s *Searcher) persist(snap *snapshot) {
	if s.files == nil || len(snap.chunks) < s.files.minChunks {
		return
	}
	if _, busy := s.persisting.LoadOrStore(snap.agentID, true); busy {
		return
	}
	s.guard.Go("recall.persist", func() {
		defer s.persisting.Delete(snap.agentID)
		if err := s.files.save(snap, snap.epoch); err != nil {
			s.log.Warn("recall: snapshot file not written; cold loads read the database", "agent", snap.agentID, "err", err)
		}
	}, "agent", snap.agentID)
}

// CacheStats reports cached agents and bytes.
func (s *Searcher) CacheStats() (agents int, bytes int64) { return s.cache.stats() }

// Settings are the effective settings.
func (s *Searcher) Settings() Settings { return s.set }

// ValidateText checks a query's text: not empty, valid UTF-8 without U+FFFD (what a JSON
// decoder puts for invalid bytes or a lone surrogate such as \ud800), and at most maxBytes
// (0 = the default limit).
func ValidateText(text string, maxBytes int) error {
	if maxBytes <= 0 {
		maxBytes = Defaults().MaxQueryBytes
	}
	text = strings.TrimSpace(text)
	switch {
	case !utf8.ValidString(text):
		return invalidf("query is not valid UTF-8")
	case strings.ContainsRune(text, utf8.RuneError):
		return invalidf("query contains U+FFFD: the request had bytes that are not UTF-8 or a lone surrogate escape (\\ud800); send the text as UTF-8")
	case text == "":
		return invalidf("query is empty; say what to look for, e.g. \"where does the user deploy\"")
	case len(text) > maxBytes:
		return invalidf("query is %d bytes; at most %d allowed: search for the key words, not a whole document", len(text), maxBytes)
	}
	return nil
}

// Validate checks a query without running it.
func (s *Searcher) Validate(q Query) (Query, error) {
	q.Text = strings.TrimSpace(q.Text)
	if err := ValidateText(q.Text, s.set.MaxQueryBytes); err != nil {
		return q, err
	}
	switch {
	case q.MaxResultsGiven && q.MaxResults == 0:
		return q, invalidf("maxResults must be between 1 and %d (or omitted for %d), got 0", s.set.MaxResults, s.set.DefaultResults)
	case q.MaxResults < 0 || q.MaxResults > s.set.MaxResults:
		return q, invalidf("maxResults must be between 1 and %d, got %d", s.set.MaxResults, q.MaxResults)
	case !q.Since.IsZero() && !q.Until.IsZero() && q.Until.Before(q.Since):
		return q, invalidf("until (%s) is before since (%s)", q.Until.Format(time.DateOnly), q.Since.Format(time.DateOnly))
	case !utf8.ValidString(q.FilenamePrefix) || len(q.FilenamePrefix) > 256:
		return q, invalidf("filenamePrefix must be valid UTF-8 of at most 256 bytes")
	case math.IsNaN(q.MinRelevance) || q.MinRelevance < 0 || q.MinRelevance > 1:
		return q, invalidf("minRelevance must be between 0 and 1, got %v", q.MinRelevance)
	}
	if q.MaxResults == 0 {
		q.MaxResults = s.set.DefaultResults
	}
	return q, nil
}

// Search runs q over agentID's chunks, and only theirs. It reads in the order it ranks: the
// query's vector, the chunks that clear the relevance floor, their scores, the pool, the
// updates among them, the diversified order, the hits.
func (s *Searcher) Search(ctx context.Context, agentID int64, q Query) (Result, error) {
	q, err := s.Validate(q)
	if err != nil {
		return Result{}, err
	}
	ai, err := s.load(ctx, agentID)
	if err != nil {
		return Result{}, err
	}
	res := Result{AgentID: agentID, Query: q.Text, Mode: ModeLexical, Hits: []Hit{}}
	qvec, err := s.embedQuery(ctx, agentID, q.Text, &res)
	if err != nil {
		return Result{}, err
	}
	lq := s.an.Query(q.Text)
	if lq.Empty() {
		res.Notice = "nothing to search for: the query is only punctuation or question words"
		return res, nil
	}
	m := ai.bm25.Search(lq)
	cands, searched := s.candidates(ai, m, q, s.idents(q.Text, lq), qvec)
	res.Searched = searched
	if !slices.ContainsFunc(cands, func(c cand) bool { return !c.drop }) {
		res.Notice = "nothing in memory matches this query"
		if q.floor() > 0 {
			res.Notice = fmt.Sprintf("nothing in memory is relevant enough to this query (no chunk reaches relevance %.2f)", q.floor())
		}
		return res, nil
	}
	cands = s.score(cands, qvec)
	cands = best(cands, 4*q.MaxResults)
	byScore(cands)
	cands = pool(cands, q.MaxResults)
	// A candidate's best-matching fact is analysed only when a step needs it.
	facts := &factCache{s: s, ai: ai, lq: lq, f: make([]*fact, len(cands))}
	s.focus(cands, facts, m, qvec, q.MaxResults)
	cands = s.settle(cands, facts, m, q.MaxResults)
	order := s.diversify(cands, facts, qvec != nil, q.MaxResults)
	for _, k := range order {
		h := s.hit(cands[k])
		res.Confident = res.Confident || h.Relevance >= ConfidentRelevance
		res.Hits = append(res.Hits, h)
	}
	if len(res.Hits) > 0 && !res.Confident {
		res.Notice = joinNotice(res.Notice, fmt.Sprintf("no hit is confident (relevance below %.2f): they share some of the query's words, maybe not what it asks", ConfidentRelevance))
	}
	return res, nil
}

// joinNotice adds b to notice a.
func joinNotice(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// embedQuery is the query's vector, nil when search is lexical: no embedder configured, or
// the endpoint failed (res says so and is marked degraded). Only a cancelled ctx is an error.
func (s *Searcher) embedQuery(ctx context.Context, agentID int64, text string, res *Result) ([]float32, error) {
	if s.emb == nil {
		res.Notice = "no embedding endpoint configured (mate.embedding.base-url): lexical (BM25) search only"
		return nil, nil
	}
	v, err := s.queryVector(ctx, text)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		res.Degraded = true
		res.Notice = "embedding endpoint failed; lexical (BM25) results only: " + err.Error()
		s.log.Warn("recall: query embedding failed; answering lexically", "agent", agentID, "err", err)
		return nil, nil
	}
	res.Mode = ModeHybrid
	return v, nil
}

// candidates are the chunks within q's filters that match it (hold a query term, or have
// a cosine), each with its relevance; those below q's floor are dropped, unless they may
// still update a note that reaches it (drop: a hit only if it does). searched counts the
// chunks within the filters.
func (s *Searcher) candidates(ai *snapshot, m lexical.Match, q Query, idents []ident, qvec []float32) (cands []cand, searched int) {
	sinceDay, untilDay := day(q.Since), day(q.Until)
	floor := q.floor()
	onlyLight := m.OnlyLight
	cands = make([]cand, 0, 256)
	for k := range ai.chunks {
		c := &ai.chunks[k]
		if q.FilenamePrefix != "" && !strings.HasPrefix(c.filename, q.FilenamePrefix) {
			continue
		}
		if !sinceDay.IsZero() && day(c.date).Before(sinceDay) {
			continue
		}
		if !untilDay.IsZero() && day(c.date).After(untilDay) {
			continue
		}
		searched++
		l := m.Score[c.ix]
		var v float64
		if qvec != nil && len(c.vec) == len(qvec) {
			v = math.Max(0, float64(embed.Dot(qvec, c.vec)))
		}
		// A chunk matches when it holds a query term, or its cosine reaches half of
		// min-cosine (relevance 0.25): every chunk has some cosine to every query.
		if l <= 0 && (v <= 0 || (s.set.MinCosine > 0 && v < s.set.MinCosine/2)) {
			continue
		}
		cd := cand{c: c, vec: v}
		if l > 0 {
			cd.cov = m.Coverage(c.ix)
			// A chunk containing an identifier verbatim contains all its parts: only those
			// that hold every query term of one are scanned.
			has := m.Terms(c.ix)
			for _, id := range idents {
				if id.mayHold(has, cd.cov, s.set.MinCoverage) && containsIdent(c.text, id.text) {
					cd.exact += 1 / float64(len(idents))
					cd.strongExact = cd.strongExact || id.strong
				}
			}
		}
		cd.rel = s.relevance(cd.cov, v, cd.strongExact)
		if onlyLight {
			// Function words alone ("it", "how are you") are searched, never answered
			// confidently.
			cd.rel = math.Min(cd.rel, lightRelevance)
		}
		// Below the relevance floor (not confident): such a chunk is kept aside when it holds
		// a good part of the query; it is confident after all if it turns out to update a
		// note that is (a correction seldom repeats every word of what it corrects).
		cd.weak = cd.rel < ConfidentRelevance
		cd.drop = cd.rel < floor
		if cd.drop && (s.set.NoSupersede || !cd.weak || cd.cov < s.set.MinCoverage/2 || !c.dated) {
			continue
		}
		// The lexical score is BM25 against the query's own weight, times the share of the
		// query held: a long chunk repeating one common word does not outrank one holding
		// the whole question.
		cd.lex = cd.cov * l / m.Weight
		cands = append(cands, cd)
	}
	return cands, searched
}

// lightRelevance is the most a hit of a query of function words only can have.
const lightRelevance = 0.4

// relevance is how surely a chunk is about the query (0–1), from its coverage (the
// IDF-weighted share of the query's words it holds), its cosine and whether it holds one of
// the query's identifiers verbatim: ConfidentRelevance (0.5) is the relevance floor
// (coverage at min-coverage, cosine at min-cosine), 1 a chunk holding every word of the
// query, 0 none; in between it is linear in coverage (and cosine) on each side of the
// floor. A verbatim identifier makes a chunk confident.
func (s *Searcher) relevance(cov, vec float64, exact bool) float64 {
	scale := func(x, floor float64) float64 {
		switch {
		case floor <= 0:
			return 0.5 + 0.5*x
		case x >= floor:
			return 0.5 + 0.5*(x-floor)/math.Max(1-floor, 1e-9)
		default:
			return 0.5 * x / floor
		}
	}
	r := scale(cov, s.set.MinCoverage)
	if s.set.MinCosine > 0 && vec > 0 {
		r = math.Max(r, scale(vec, s.set.MinCosine))
	}
	if exact {
		r = math.Max(r, ConfidentRelevance+0.25*cov)
	}
	return math.Min(1, math.Max(0, r))
}

// score gives each candidate its score (the blend of vector and lexical, the boost for the
// query's identifiers found verbatim, the age decay) and keeps those above MinScore (and
// the ones kept aside).
func (s *Searcher) score(cands []cand, qvec []float32) []cand {
	kept := cands[:0]
	now := s.now()
	for _, cd := range cands {
		cd.decay = s.decay(cd.c, now)
		if s.blend(&cd, qvec) < s.set.MinScore && !cd.drop {
			continue
		}
		kept = append(kept, cd)
	}
	return kept
}

// instructionFactor is what the seeded instruction files (AGENTS.md, SOUL.md) weigh beside
// notes: they say how the agent works, not what happened.
const instructionFactor = 0.5

// decay is a chunk's age and kind factor: a dated note's decays from 1 to the floor with its
// age; an undated file stands at the floor (a daily note never ranks below the same text in
// MEMORY.md for being old); the instruction files at half the floor.
func (s *Searcher) decay(c *cachedChunk, now time.Time) float64 {
	if s.set.HalfLifeDays <= 0 {
		return 1
	}
	f := s.set.DecayFloor
	if !c.dated {
		if c.filename == "AGENTS.md" || c.filename == "SOUL.md" {
			return f * instructionFactor
		}
		return f
	}
	if age := now.Sub(c.date).Hours() / 24; age > 0 {
		return f + (1-f)*math.Pow(0.5, age/s.set.HalfLifeDays)
	}
	return 1
}

// blend sets cd's score from its parts and returns its relevance before the boost and the
// decay (what MinScore compares).
func (s *Searcher) blend(cd *cand, qvec []float32) float64 {
	wv, wt := s.set.VectorWeight, s.set.TextWeight
	rel := cd.lex
	if qvec != nil && cd.c.vec != nil {
		rel = (wv*cd.vec + wt*cd.lex) / (wv + wt)
	}
	cd.score = rel
	// An identifier the user typed, found verbatim, outranks chunks that merely share its
	// parts (stage, corp, 22) or resemble it semantically.
	if s.set.ExactBoost > 0 {
		cd.score += s.set.ExactBoost * cd.exact
	}
	cd.score *= cd.decay
	return rel
}

// focus scores the pooled candidates by their best fact: the lexical score counts the share
// of the query that one line or sentence holds, not the whole chunk. A daily note whose
// lines each hold a word of the query ("staging" in one, "job runner" in another) ranks
// below one whose sentence holds the question; a chunk whose fact holds all it matches
// keeps its score. Focusing only lowers scores, so candidates are taken in score order and
// the rest are left as they are once one scores below the best 2 × maxResults focused so
// far: the hits are the same, and most candidates are never analysed.
func (s *Searcher) focus(cands []cand, facts *factCache, m lexical.Match, qvec []float32, maxResults int) {
	keep := 2 * maxResults
	best := make([]float64, 0, keep+1) // the best focused scores so far, highest first
	for k := range cands {
		cd := &cands[k]
		if len(best) == keep && cd.score < best[keep-1] {
			break
		}
		if cd.cov > 0 {
			if fcov := m.Share(facts.mask(cands, k) & m.Terms(cd.c.ix)); fcov < cd.cov {
				cd.lex *= fcov / cd.cov
				s.blend(cd, qvec)
			}
		}
		at, _ := slices.BinarySearchFunc(best, cd.score, func(x, y float64) int { return cmp.Compare(y, x) })
		if best = slices.Insert(best, at, cd.score); len(best) > keep {
			best = best[:keep]
		}
	}
	byScoreWith(cands, facts.f)
}

// best keeps the candidates kept (not drop) that score at least the n-th best of them, and
// those that drop: what pool takes from, without sorting every chunk that matches (an
// explicit search ranks every match, in hybrid mode every chunk with a cosine).
func best(cands []cand, n int) []cand {
	kept := 0
	for k := range cands {
		if !cands[k].drop {
			kept++
		}
	}
	if kept <= 2*n {
		return cands
	}
	scores := make([]float64, 0, kept)
	for k := range cands {
		if !cands[k].drop {
			scores = append(scores, cands[k].score)
		}
	}
	slices.Sort(scores)
	at := scores[len(scores)-n]
	out := cands[:0]
	for _, cd := range cands {
		if cd.drop || cd.score >= at {
			out = append(out, cd)
		}
	}
	return out
}

// pool keeps, of candidates sorted by score, the best 4 × maxResults of those kept and 2 ×
// maxResults of those that stay below the request's floor unless they update one of the
// first.
func pool(cands []cand, maxResults int) []cand {
	kept, dropped := 0, 0
	out := cands[:0]
	for _, cd := range cands {
		if cd.drop && dropped < 2*maxResults {
			dropped++
			out = append(out, cd)
		} else if !cd.drop && kept < 4*maxResults {
			kept++
			out = append(out, cd)
		}
	}
	return out
}

// settle lets newer notes supersede what they update, drops what stayed below the floor
// and sorts the rest, at most 4 × maxResults, with their facts.
func (s *Searcher) settle(cands []cand, facts *factCache, m lexical.Match, maxResults int) []cand {
	if !s.set.NoSupersede {
		s.supersede(cands, facts, m)
	}
	// Drop what stayed below the floor, keeping the facts with their candidates.
	n := 0
	for k := range cands {
		if !cands[k].drop {
			cands[n], facts.f[n] = cands[k], facts.f[k]
			n++
		}
	}
	cands, facts.f = cands[:n], facts.f[:n]
	byScoreWith(cands, facts.f)
	if most := 4 * maxResults; len(cands) > most {
		cands, facts.f = cands[:most], facts.f[:most]
	}
	return cands
}

// hit is the answer's form of a ranked candidate.
func (s *Searcher) hit(cd cand) Hit {
	src := "file"
	if IsConversation(cd.c.filename) {
		src = "conversation"
	}
	h := Hit{Source: src, Filename: cd.c.filename, StartLine: cd.c.startLine, EndLine: cd.c.end,
		Heading: cd.c.heading, Snippet: snippet(cd.c.text, s.set.SnippetBytes), Date: cd.c.date.Format(time.DateOnly),
		Dated: cd.c.dated, FileVersion: cd.c.fileVersion, Score: round(cd.score), Lexical: round(cd.lex),
		Vector: round(cd.vec), Decay: round(cd.decay), Exact: round(cd.exact), Coverage: round(cd.cov),
		Relevance: round(cd.rel)}
	if cd.by != nil {
		h.SupersededBy = cd.by.filename
	}
	if len(cd.stated) > 1 {
		h.Stated = &Stated{Days: len(cd.stated), Latest: latest(cd.stated)}
		for _, o := range cd.others {
			if len(h.Stated.Files) < maxStatedFiles {
				h.Stated.Files = append(h.Stated.Files, o.filename)
			}
		}
	}
	return h
}

// cand is a chunk being ranked.
type cand struct {
	c               *cachedChunk
	lex, vec, decay float64
	cov, exact      float64
	score           float64
	// by is the newer candidate that supersedes this one.
	by *cachedChunk
	// rel is the relevance (0–1, ConfidentRelevance and above: confident).
	rel float64
	// weak: not confident (below the relevance floor): it may take the place of a hit it
	// updates, and is lifted when it does. drop: below the request's floor, kept only to see
	// whether it updates a hit.
	weak, lifted, drop bool
	// strongExact: holds a distinctive identifier of the query verbatim.
	strongExact bool
	// noCue: no word of the chunk says that something changed (known once looked at).
	noCue bool
	// stated are the days the hit's fact was written on (it and its restatements), others
	// the restatements folded into it.
	stated map[string]bool
	others []*cachedChunk
}

// fold counts candidate o as a restatement of hit j.
func fold(cands []cand, j, o int) {
	cands[j].stated[cands[o].c.date.Format(time.DateOnly)] = true
	cands[j].others = append(cands[j].others, cands[o].c)
}

// byScoreWith orders cands by score and facts along with them.
func byScoreWith(cands []cand, facts []*fact) {
	ix := make([]int, len(cands))
	for k := range ix {
		ix[k] = k
	}
	sort.SliceStable(ix, func(a, b int) bool {
		ca, cb := cands[ix[a]], cands[ix[b]]
		if ca.score != cb.score {
			return ca.score > cb.score
		}
		return ca.c.ix < cb.c.ix
	})
	cs, fs := make([]cand, len(cands)), make([]*fact, len(facts))
	for k, j := range ix {
		cs[k], fs[k] = cands[j], facts[j]
	}
	copy(cands, cs)
	copy(facts, fs)
}

func byScore(cands []cand) {
	sort.SliceStable(cands, func(a, b int) bool {
		if cands[a].score != cands[b].score {
			return cands[a].score > cands[b].score
		}
		return cands[a].c.ix < cands[b].c.ix
	})
}

// supersede puts a dated note's newer statement about the same thing in its place: the
// newer note takes the older one's score (if lower) and the older one ranks just below it,
// saying which note superseded it. Like an invalidated edge in a temporal graph, the older
// note stays findable. "The same thing" is what the index can tell: the newer note holds
// every specific word of the query that the older one holds (lexical.Match.SameSubject), or,
// when its sentence says that something changed (updateCue: moved, raised, 改到, 换成 …),
// at least SupersedeShare of them. Notes no newer note matches that way (evergreen facts)
// keep their place.
func (s *Searcher) supersede(cands []cand, facts *factCache, m lexical.Match) {
	idx := make([]int, 0, len(cands))
	for k := range cands {
		if cands[k].c.dated && cands[k].cov > 0 {
			idx = append(idx, k)
		}
	}
	// An open to-do in an undated file (MEMORY.md: "- To do: ask the supplier about the
	// inspection") names a topic without answering it: a dated note about the same thing
	// takes its place, as a newer statement would.
	for ka := range cands {
		a := &cands[ka]
		if a.c.dated || a.weak || !openItem(facts.get(cands, ka).text) {
			continue
		}
		for _, kb := range idx {
			b := &cands[kb]
			if !m.SameSubject(b.c.ix, a.c.ix, 1) {
				continue
			}
			s.replace(a, b)
		}
	}
	// Oldest first: in a chain (a < b < c) c ends above b above a.
	sort.SliceStable(idx, func(x, y int) bool { return cands[idx[x]].c.date.Before(cands[idx[y]].c.date) })
	for x, ka := range idx {
		a := &cands[ka]
		if a.weak && !a.lifted {
			continue // only what cleared the floor (or took the place of what did) is updated
		}
		for _, kb := range idx[x+1:] {
			b := &cands[kb]
			if !day(b.c.date).After(day(a.c.date)) || b.c.filename == a.c.filename {
				continue
			}
			// A note below the floor takes another's place only when it says it changes it.
			// Either b says that something changed and shares enough of a's specific words,
			// or it restates a's sentence with something changed (most terms alike) and
			// holds all of them. A newer note that merely mentions the topic ("weekly sync
			// went fine") does neither.
			cue := m.SameSubject(b.c.ix, a.c.ix, s.set.SupersedeShare) && facts.cue(cands, kb)
			restated := !cue && !b.weak && m.SameSubject(b.c.ix, a.c.ix, 1) &&
				holdsAll(m, facts.mask(cands, kb), facts.mask(cands, ka)) &&
				jaccardAtLeast(facts.get(cands, kb).terms, facts.get(cands, ka).terms, restatedJaccard)
			if !cue && !restated {
				continue
			}
			s.replace(a, b)
		}
	}
}

// holdsAll reports whether the fact with query terms mb covers every unit of the query that
// the fact with ma covers: "the prod job runner now lives on …" restates "the staging job
// runner now lives on …" with a change, but for a query about staging it says nothing.
func holdsAll(m lexical.Match, mb, ma uint64) bool {
	return m.Share(ma&mb) >= m.Share(ma)-1e-9
}

// replace puts b in a's place: b takes a's score if lower, a ranks just below b.
func (s *Searcher) replace(a, b *cand) {
	if b.score < a.score {
		b.score = a.score
	}
	if b.weak {
		// A correction of a hit is as relevant as the hit.
		b.weak, b.lifted = false, true
		b.rel = max(b.rel, a.rel)
	}
	b.drop = b.drop && a.drop
	if below := b.score * 0.98; a.score > below {
		a.score = below
	}
	a.by = b.c
}

// openItems are the ways a memory file writes down something still to do or find out.
var openItems = regexp.MustCompile(`(?i)^\s*(?:[-*+]\s*)?(?:\[ \]\s*|待办|todo\b|to do\b|to-do\b|待确认|待跟进)`)

// openItem reports whether a line is an open to-do.
func openItem(text string) bool { return openItems.MatchString(text) }

// restatedJaccard is how alike two sentences' terms must be for the newer to be the older
// restated with a change.
const restatedJaccard = 0.25

// updateCuesEn and updateCuesZh are how notes say that something changed (English words
// are matched as whole words, lower-cased; Chinese as they are). Plain substring tests: a
// regular expression over every candidate's sentence cost more than the rest of a search.
var (
	updateCuesEn = []string{"moved", "changed", "switched", "raised", "lowered", "increased", "reduced", "postponed",
		"delayed", "rescheduled", "replaced", "renamed", "upgraded", "downgraded", "took over", "instead",
		"from now on", "no longer", "goes up", "went up", "goes down", "went down"}
	updateCuesZh = []string{"改到", "改成", "改为", "改在", "改约", "改寄", "改喝", "改用", "改了", "换成", "换了", "换到",
		"调到", "推迟", "延后", "提前到", "降到", "升到", "涨到", "挪到", "不再", "变成", "更新为", "现在是", "取消了"}
)

// updateCue reports whether a sentence says that something changed (a cue word, or a
// sentence that ends in "now").
func updateCue(text string) bool {
	for _, c := range updateCuesZh {
		if strings.Contains(text, c) {
			return true
		}
	}
	low := strings.ToLower(text)
	for _, c := range updateCuesEn {
		for off := 0; ; {
			i := strings.Index(low[off:], c)
			if i < 0 {
				break
			}
			i += off
			if !letterAt(low, i-1) && !letterAt(low, i+len(c)) {
				return true
			}
			off = i + len(c)
		}
	}
	end := strings.TrimRightFunc(low, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	return strings.HasSuffix(end, " now") || end == "now"
}

// letterAt reports whether s has an ASCII letter at byte i.
func letterAt(s string, i int) bool {
	return i >= 0 && i < len(s) && (s[i] >= 'a' && s[i] <= 'z')
}

func latest(days map[string]bool) string {
	l := ""
	for d := range days {
		if d > l {
			l = d
		}
	}
	return l
}

// restatementJaccard is how alike two facts' terms must be to count as one fact stated
// twice: a changed number or name keeps two statements apart.
const restatementJaccard = 0.9

// diversify picks up to n hits: a candidate whose best-matching fact (the line or sentence
// holding most of the query) restates a fact already taken is folded into that hit (which
// counts the days it was stated on), then MMR trades relevance against similarity to the
// hits taken, so near-duplicates do not crowd out other hits.
func (s *Searcher) diversify(cands []cand, facts *factCache, vectors bool, n int) []int {
	var terms [][]string
	sim := func(a, b int) float64 {
		ca, cb := cands[a].c, cands[b].c
		if vectors && ca.vec != nil && cb.vec != nil {
			return float64(embed.Dot(ca.vec, cb.vec))
		}
		if terms == nil {
			terms = make([][]string, len(cands))
		}
		for _, k := range []int{a, b} {
			if terms[k] == nil {
				terms[k] = s.termSetOf(facts.ai, cands[k].c)
			}
		}
		return jaccard(terms[a], terms[b])
	}
	taken := make([]bool, len(cands))
	// A superseded note never ranks above the note that superseded it, however different
	// the two read: it waits until that one is taken.
	at := make(map[*cachedChunk]int, len(cands))
	for k := range cands {
		at[cands[k].c] = k
	}
	waits := func(k int) bool {
		if by := cands[k].by; by != nil {
			j, ok := at[by]
			return ok && !taken[j]
		}
		return false
	}
	var order []int
	// order only grows: checked[k] hits of it are known not to be restated by candidate k,
	// and maxSim[k] is its greatest similarity to the first simmed[k] (each pair is compared
	// once, not once a round).
	checked, simmed := make([]int, len(cands)), make([]int, len(cands))
	maxSim := make([]float64, len(cands))
	lambda := s.set.MMRLambda
	dup := map[string]int{}
	for len(order) < n {
		best, bestVal := -1, math.Inf(-1)
		for k := range cands {
			if taken[k] {
				continue
			}
			if j, ok := dup[cands[k].c.hash]; ok {
				taken[k] = true // the same text as a hit already taken (copied between files)
				fold(cands, j, k)
				continue
			}
			if j := restates(cands, facts, order[checked[k]:], k); j >= 0 {
				taken[k] = true
				fold(cands, j, k)
				continue
			}
			checked[k] = len(order)
			if waits(k) {
				continue
			}
			for _, j := range order[simmed[k]:] {
				maxSim[k] = math.Max(maxSim[k], sim(k, j))
			}
			simmed[k] = len(order)
			val := lambda*cands[k].score - (1-lambda)*maxSim[k]
			if val > bestVal {
				best, bestVal = k, val
			}
		}
		if best < 0 {
			break
		}
		taken[best] = true
		dup[cands[best].c.hash] = best
		cands[best].stated = map[string]bool{cands[best].c.date.Format(time.DateOnly): true}
		order = append(order, best)
	}
	// Restatements ranked below the last hit taken still count for it.
	for k := range cands {
		if !taken[k] {
			if j := restates(cands, facts, order[checked[k]:], k); j >= 0 {
				fold(cands, j, k)
			}
		}
	}
	return order
}

// restates returns the first hit in order (or a tail of it) whose fact candidate k
// restates, or -1.
func restates(cands []cand, facts *factCache, order []int, k int) int {
	fk := facts.get(cands, k).terms
	if len(fk) == 0 {
		return -1
	}
	for _, j := range order {
		if sameFact(fk, facts.get(cands, j).terms) {
			return j
		}
	}
	return -1
}

// sameFact reports whether two facts' terms say the same: nearly the same terms
// (restatementJaccard), and none of the differing ones a number, a name or an identifier
// in Latin script (db-dev-13 and queue-dev-26 are two facts, however alike the sentence).
func sameFact(a, b []string) bool {
	if len(a) == 0 || len(b) == 0 || !jaccardAtLeast(a, b, restatementJaccard) {
		return false
	}
	// a and b are term sets (sorted): walk both, looking at the terms only one holds.
	latin := func(t string) bool { return t[0] < utf8.RuneSelf }
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			if latin(a[i]) {
				return false
			}
			i++
		case i == len(a) || b[j] < a[i]:
			if latin(b[j]) {
				return false
			}
			j++
		default:
			i++
			j++
		}
	}
	return true
}

// fact is a candidate's line or sentence holding most of the query: its text and terms,
// and whether it says that something changed.
type fact struct {
	text  string
	terms []string
	cue   int8   // 0 unknown, 1 yes, -1 no
	mask  uint64 // the query terms it holds (bit i = lq.Terms[i])
}

// factCache analyses candidates' best facts on first use (f is aligned with the candidates).
type factCache struct {
	s  *Searcher
	ai *snapshot
	lq lexical.Query
	f  []*fact
}

func (fc *factCache) get(cands []cand, k int) *fact {
	if fc.f[k] == nil {
		f := fc.s.bestFact(fc.s.sentences(fc.ai, cands[k].c), fc.lq)
		fc.f[k] = &f
	}
	return fc.f[k]
}

// mask is the set of query terms candidate k's best fact holds (bit i = lq.Terms[i]).
func (fc *factCache) mask(cands []cand, k int) uint64 { return fc.get(cands, k).mask }

func (fc *factCache) cue(cands []cand, k int) bool {
	if cands[k].noCue {
		return false
	}
	if fc.noCue(cands[k].c) {
		cands[k].noCue = true
		return false // no cue anywhere in the chunk: no need to find its best fact
	}
	f := fc.get(cands, k)
	if f.cue == 0 {
		f.cue = -1
		if updateCue(f.text) {
			f.cue = 1
		}
	}
	return f.cue > 0
}

// noCue reports whether chunk c's text has no word saying that something changed, looked at
// once per snapshot.
func (fc *factCache) noCue(c *cachedChunk) bool {
	if fc.ai != nil {
		if v, ok := fc.ai.noCue.Load(c); ok {
			return v.(bool)
		}
	}
	none := !updateCue(c.text) && !strings.Contains(strings.ToLower(c.text), "now")
	if fc.ai != nil {
		if _, loaded := fc.ai.noCue.LoadOrStore(c, none); !loaded {
			fc.s.cache.grow(fc.ai, mapEntryBytes)
		}
	}
	return none
}

// bestFact returns the line or sentence of text that holds most of the query's terms
// (empty when none holds any).
func (s *Searcher) bestFact(sents []sentence, lq lexical.Query) fact {
	want := make(map[string]int, len(lq.Terms))
	for i, t := range lq.Terms {
		if _, dup := want[t]; !dup {
			want[t] = i
		}
	}
	var best fact
	bestN, bestLen := 0, 0
	for _, sn := range sents {
		f, ts := sn.text, sn.terms
		var held uint64
		var beyond map[int]bool // query terms past the mask's 64, rare
		n := 0
		for _, t := range ts {
			i, ok := want[t]
			switch {
			case !ok:
			case i < lexical.MaxQueryTerms:
				if held&(1<<i) == 0 {
					held |= 1 << i
					n++
				}
			case !beyond[i]:
				if beyond == nil {
					beyond = map[int]bool{}
				}
				beyond[i] = true
				n++
			}
		}
		if n > bestN || (n == bestN && n > 0 && len(ts) < bestLen) {
			best, bestN, bestLen = fact{text: f, terms: sn.set, mask: held}, n, len(ts)
		}
	}
	return best
}

// termSetOf is chunk c's content terms as a set (termSet), built once per snapshot.
func (s *Searcher) termSetOf(ai *snapshot, c *cachedChunk) []string {
	if ai != nil {
		if v, ok := ai.sets.Load(c); ok {
			return v.([]string)
		}
	}
	set := termSet(s.an.Content(lexical.SplitTerms(c.terms)))
	if ai != nil {
		if _, loaded := ai.sets.LoadOrStore(c, set); !loaded {
			s.cache.grow(ai, mapEntryBytes+termsBytes(set, true))
		}
	}
	return set
}

// sentences are chunk c's lines and sentences with their terms, analysed once per snapshot.
func (s *Searcher) sentences(ai *snapshot, c *cachedChunk) []sentence {
	if ai != nil {
		if v, ok := ai.sents.Load(c); ok {
			return v.([]sentence)
		}
	}
	facts := splitFacts(c.text)
	out := make([]sentence, len(facts))
	for k, f := range facts {
		ts := s.an.Terms(f)
		out[k] = sentence{text: f, terms: ts, set: termSet(s.an.Content(slices.Clone(ts)))}
	}
	if ai != nil {
		if _, loaded := ai.sents.LoadOrStore(c, out); !loaded {
			s.cache.grow(ai, sentencesBytes(out))
		}
	}
	return out
}

// inherit takes over old's analyses of the chunks snap keeps (same hash and text, or terms:
// the analysis is the same), so that a search after a refresh does not analyse them again;
// it returns the bytes they hold.
func (snap *snapshot) inherit(old *snapshot) (n int64) {
	byHash := make(map[string]*cachedChunk, len(snap.chunks))
	for k := range snap.chunks {
		if c := &snap.chunks[k]; c.hash != "" {
			byHash[c.hash] = c
		}
	}
	kept := func(k any, same func(c, oc *cachedChunk) bool) *cachedChunk {
		oc := k.(*cachedChunk)
		if c, ok := byHash[oc.hash]; ok && oc.hash != "" && same(c, oc) {
			return c
		}
		return nil
	}
	sameText := func(c, oc *cachedChunk) bool { return c.text == oc.text }
	old.sents.Range(func(k, v any) bool {
		if c := kept(k, sameText); c != nil {
			snap.sents.Store(c, v)
			n += sentencesBytes(v.([]sentence))
		}
		return true
	})
	old.sets.Range(func(k, v any) bool {
		if c := kept(k, func(c, oc *cachedChunk) bool { return c.terms == oc.terms }); c != nil {
			snap.sets.Store(c, v)
			n += mapEntryBytes + termsBytes(v.([]string), true)
		}
		return true
	})
	old.noCue.Range(func(k, v any) bool {
		if c := kept(k, sameText); c != nil {
			snap.noCue.Store(c, v)
			n += mapEntryBytes
		}
		return true
	})
	return n
}

// sentencesBytes is what a chunk's analysed sentences hold in the snapshot's cache.
func sentencesBytes(out []sentence) int64 {
	n := mapEntryBytes + int64(len(out))*int64(unsafe.Sizeof(sentence{}))
	for _, sn := range out {
		n += termsBytes(sn.terms, false) + termsBytes(sn.set, true)
	}
	return n
}

// mapEntryBytes is about what an entry of a sync.Map costs beside its value.
const mapEntryBytes = 96

// termsBytes is what a slice of terms holds: its string headers, and the strings' bytes
// unless they are shared with another slice (shared).
func termsBytes(terms []string, shared bool) int64 {
	n := int64(len(terms)) * int64(unsafe.Sizeof(""))
	if !shared {
		for _, t := range terms {
			n += int64(len(t))
		}
	}
	return n
}

// splitFacts cuts text into facts: lines (a bullet is a line), and a long line at the end of
// its sentences.
func splitFacts(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		start := 0
		for i, r := range l {
			if r == '。' || r == '！' || r == '？' || ((r == '.' || r == '!' || r == '?') && (i+1 == len(l) || l[i+1] == ' ')) {
				end := i + utf8.RuneLen(r)
				if strings.TrimSpace(l[start:end]) != "" {
					out = append(out, l[start:end])
				}
				start = end
			}
		}
		if strings.TrimSpace(l[start:]) != "" {
			out = append(out, l[start:])
		}
	}
	return out
}

// identifiers are the query's identifier-like runs (order numbers, host names, e-mail
// addresses, paths, versions), lower-cased: ASCII runs with a digit or one of - . _ @ / #,
// at least 4 characters, cut out of the text around them (PO-55812的交期 gives po-55812).
func identifiers(q string) []string {
	var out []string
	for _, f := range identRE.FindAllString(strings.ToLower(q), -1) {
		f = strings.Trim(f, ".-_/#@")
		if len(f) >= 4 && strings.ContainsAny(f, "0123456789-._@/") {
			out = append(out, f)
		}
	}
	return out
}

// ident is a query's identifier and the query terms it is made of (parts: bit i =
// lq.Terms[i]): a chunk holding it verbatim holds all of them.
type ident struct {
	text  string
	parts uint64
	// strong: distinctive enough that holding it makes a chunk confident (not a bare
	// number of up to 4 digits, such as a year).
	strong bool
	// either: a version, whose parts are its two spellings (a chunk holds one of them).
	either bool
}

// mayHold reports whether a chunk holding the query terms has may hold the identifier
// verbatim (only those are scanned): it holds all of its parts, or one spelling of a
// version; an identifier with no query term of its own is scanned in chunks that cover a
// good part of the query.
func (id ident) mayHold(has uint64, cov, floor float64) bool {
	switch {
	case id.parts == 0:
		return cov >= floor/2
	case id.either:
		return has&id.parts != 0
	default:
		return has&id.parts == id.parts
	}
}

// idents are the query's identifiers with their parts.
func (s *Searcher) idents(q string, lq lexical.Query) []ident {
	ids := identifiers(q)
	out := make([]ident, len(ids))
	for k, id := range ids {
		out[k].text = id
		out[k].strong = len(id) > 4 || strings.Trim(id, "0123456789") != ""
		terms := s.an.Terms(id)
		if versionID.MatchString(id) {
			// A version matches with or without its "v": a chunk holding either spelling's
			// term is scanned.
			out[k].either = true
			alt := "v" + id
			if id[0] == 'v' {
				alt = id[1:]
			}
			terms = append(terms, alt)
		}
		for i, t := range lq.Terms {
			if i < lexical.MaxQueryTerms && slices.Contains(terms, t) {
				out[k].parts |= 1 << i
			}
		}
	}
	return out
}

var (
	identRE   = regexp.MustCompile(`[a-z0-9][a-z0-9._@/#-]*`)
	versionID = regexp.MustCompile(`^v?[0-9]+(\.[0-9]+)+$`)
)

// containsIdent reports whether text holds id (lower-case ASCII) verbatim in any case, a
// version with or without its "v" (v1.27.3 and 1.27.3).
func containsIdent(text, id string) bool {
	if containsFold(text, id) {
		return true
	}
	if len(id) > 1 && id[0] == 'v' && id[1] >= '0' && id[1] <= '9' {
		return containsFold(text, id[1:])
	}
	return false
}

// containsFold reports whether text holds id (lower-case ASCII) with ASCII letters in any
// case, without lower-casing a copy of text.
func containsFold(text, id string) bool {
	if id == "" {
		return true
	}
	lower := func(c byte) byte {
		if 'A' <= c && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	at := func(i int) bool {
		for j := 1; j < len(id); j++ {
			if lower(text[i+j]) != id[j] {
				return false
			}
		}
		return true
	}
	// Only where the first byte matches (found with IndexByte, in either case) is the rest
	// compared.
	for _, c0 := range []byte{id[0], id[0] - ('a' - 'A')} {
		if c0 != id[0] && (id[0] < 'a' || id[0] > 'z') {
			break
		}
		for off := 0; off+len(id) <= len(text); {
			i := strings.IndexByte(text[off:len(text)-len(id)+1], c0)
			if i < 0 {
				break
			}
			if at(off + i) {
				return true
			}
			off += i + 1
		}
	}
	return false
}

func round(x float64) float64 { return math.Round(x*1e4) / 1e4 }

func day(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// jaccard is the Jaccard similarity of two sets of terms, each sorted and without repeats
// (termSet).
func jaccard(a, b []string) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	inter := 0
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch c := strings.Compare(a[i], b[j]); {
		case c == 0:
			inter++
			i++
			j++
		case c < 0:
			i++
		default:
			j++
		}
	}
	return float64(inter) / float64(len(a)+len(b)-inter)
}

// jaccardAtLeast reports whether jaccard(a, b) >= t, without merging two sets whose sizes
// alone rule it out (the intersection is at most the smaller, the union at least the larger).
func jaccardAtLeast(a, b []string, t float64) bool {
	if lo, hi := min(len(a), len(b)), max(len(a), len(b)); hi == 0 || float64(lo)/float64(hi) < t {
		return false
	}
	return jaccard(a, b) >= t
}

// termSet is terms sorted, without repeats.
func termSet(terms []string) []string {
	set := slices.Clone(terms)
	slices.Sort(set)
	return slices.Compact(set)
}

func snippet(text string, n int) string {
	if len(text) <= n {
		return text
	}
	return truncate(text, n) + "…"
}

func (s *Searcher) model() string {
	if s.emb == nil {
		return ""
	}
	return s.emb.Model()
}

// queryVector embeds a query, remembering the last few hundred.
func (s *Searcher) queryVector(ctx context.Context, text string) ([]float32, error) {
	key := s.emb.Model() + "\x00" + text
	s.qmu.Lock()
	v, ok := s.qvecs[key]
	s.qmu.Unlock()
	if ok {
		return v, nil
	}
	vs, err := s.emb.Embed(ctx, []string{text})
	if err != nil {
		return nil, err
	}
	s.qmu.Lock()
	if len(s.qvecs) >= 512 {
		clear(s.qvecs)
	}
	s.qvecs[key] = vs[0]
	s.qmu.Unlock()
	return vs[0], nil
}

// load returns the agent's snapshot, from the cache while its generation is current, else
// refreshed from the database (only the files whose index state moved are read again).
func (s *Searcher) load(ctx context.Context, agentID int64) (*snapshot, error) {
	gen, err := s.generation(ctx, agentID)
	if err != nil {
		return nil, err
	}
	old := s.cache.get(agentID)
	if old != nil && old.generation == gen && old.model == s.model() {
		return old, nil
	}
	v, err, _ := s.sf.Do(fmt.Sprint(agentID, "/", gen), func() (any, error) {
		return s.refresh(ctx, agentID, gen, old)
	})
	if err != nil {
		return nil, err
	}
	return v.(*snapshot), nil
}

// Refresh brings a cached agent's snapshot up to date in the background (an index notice
// said it changed), so the next search is warm. Agents not cached are left alone.
func (s *Searcher) Refresh(agentID int64) {
	if s.cache.get(agentID) == nil {
		return
	}
	s.guard.Go("recall.refresh", func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := s.load(ctx, agentID); err != nil {
			s.log.Warn("recall: background refresh failed; the next search reloads", "agent", agentID, "err", err)
		}
	}, "agent", agentID)
}

// CachedGeneration is the generation of the agent's cached snapshot (-1 when none).
func (s *Searcher) CachedGeneration(agentID int64) int64 {
	if snap := s.cache.get(agentID); snap != nil {
		return snap.generation
	}
	return -1
}

func (s *Searcher) generation(ctx context.Context, agentID int64) (int64, error) {
	var row store.RecallAgent
	err := s.db.WithContext(ctx).Where("agent_id = ?", agentID).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read recall generation of agent %d: %w", agentID, err)
	}
	return row.Generation, nil
}

// refresh builds the agent's snapshot at generation gen. With a previous snapshot of the same
// model it keeps the chunks of files whose index state has not moved and reads only the
// others; without one it reads everything.
func (s *Searcher) refresh(ctx context.Context, agentID, gen int64, old *snapshot) (*snapshot, error) {
	var epoch uint64
	if s.files != nil {
		epoch = s.files.epoch(agentID)
	}
	model := s.model()
	full := old == nil || old.model != model
	loaded := false
	if full && s.files != nil && !s.fullRebuild {
		// The agent's file, if any, stands for a cached snapshot: only what moved since it
		// was written is read from the database.
		snap, err := s.files.load(agentID, model)
		if err != nil {
			s.log.Warn("recall: snapshot file not used", "agent", agentID, "err", err)
		}
		if snap != nil {
			s.fileLoads.Add(1)
			snap.epoch = epoch
			old, full, loaded = snap, false, true
		} else {
			// A bad file was removed just now (by this load, before anything was read).
			epoch = s.files.epoch(agentID)
		}
	}
	db := s.db.WithContext(ctx)
	files, err := readFileStates(db, agentID)
	if err != nil {
		return nil, err
	}
	var changed []string
	if !full {
		changed = changedFiles(old, files)
	}
	rows, err := readChunkRows(db, agentID, full, changed)
	if err != nil {
		return nil, err
	}
	vecs, err := s.readVectors(db, agentID, model, full, rows)
	if err != nil {
		return nil, err
	}
	fresh := make([]cachedChunk, len(rows))
	for k, r := range rows {
		fresh[k] = cachedChunk{filename: r.Filename, ordinal: r.Ordinal, startLine: r.StartLine, end: r.EndLine,
			heading: r.Heading, text: r.Text, terms: r.Terms, fileVersion: r.FileVersion, hash: r.Hash,
			date: r.NoteDate.UTC(), dated: r.Dated, vec: vecs[r.Hash]}
	}
	var snap *snapshot
	switch {
	case full:
		snap = newSnapshot(agentID, gen, model, fresh, files)
		snap.epoch = epoch
	case s.fullRebuild:
		snap = newSnapshot(agentID, gen, model, append(keptChunks(old, files, changed), fresh...), files)
	default:
		// Only the changed files' chunks are indexed; the rest keep their posting lists.
		snap = old.update(gen, files, changed, fresh)
	}
	if !full {
		snap.analysed = snap.inherit(old)
	}
	s.cache.put(snap)
	switch {
	case full:
		s.persist(snap)
	case s.files != nil && ((loaded && len(changed) > 0) || goneFiles(old, files)) && s.files.exists(agentID):
		// The agent's file holds what is no longer so (a deleted file, an erased
		// conversation): it goes now, and is written again once the snapshot is compacted.
		if loaded {
			s.fileStale.Add(1)
		}
		next, alone, err := s.files.removeAfter(agentID, snap.epoch)
		if err != nil {
			s.log.Warn("recall: stale snapshot file not removed", "agent", agentID, "err", err)
		}
		if alone {
			snap.epoch = next
		}
		s.compact(snap)
	case snap.stale():
		s.compact(snap)
	}
	return snap, nil
}

// readFileStates is the index state of each of the agent's files.
func readFileStates(db *gorm.DB, agentID int64) (map[string]fileState, error) {
	var states []store.RecallFile
	if err := db.Select("filename", "file_id", "version", "embed_pending", "format").Where("agent_id = ?", agentID).Find(&states).Error; err != nil {
		return nil, fmt.Errorf("read index state of agent %d: %w", agentID, err)
	}
	files := make(map[string]fileState, len(states))
	for _, st := range states {
		files[st.Filename] = fileState{fileID: st.FileID, version: st.Version, pending: st.EmbedPending, format: st.Format}
	}
	return files, nil
}

// changedFiles are the files whose index state is new or moved since old was built.
func changedFiles(old *snapshot, files map[string]fileState) []string {
	var changed []string
	for name, st := range files {
		if prev, ok := old.files[name]; !ok || prev != st {
			changed = append(changed, name)
		}
	}
	return changed
}

// goneFiles reports whether a file of old has no index state any more (deleted).
func goneFiles(old *snapshot, files map[string]fileState) bool {
	if old == nil {
		return false
	}
	for name := range old.files {
		if _, ok := files[name]; !ok {
			return true
		}
	}
	return false
}

// readChunkRows reads every chunk of the agent (full) or those of the changed files.
func readChunkRows(db *gorm.DB, agentID int64, full bool, changed []string) ([]store.RecallChunk, error) {
	var rows []store.RecallChunk
	cols := []string{"filename", "ordinal", "start_line", "end_line", "heading", "text", "terms", "hash", "file_version", "note_date", "dated"}
	if full {
		if err := db.Select(cols).Where("agent_id = ?", agentID).Find(&rows).Error; err != nil {
			return nil, fmt.Errorf("read chunks of agent %d: %w", agentID, err)
		}
		return rows, nil
	}
	for start := 0; start < len(changed); start += 200 {
		var part []store.RecallChunk
		if err := db.Select(cols).Where("agent_id = ? AND filename IN ?", agentID, changed[start:min(start+200, len(changed))]).
			Find(&part).Error; err != nil {
			return nil, fmt.Errorf("read chunks of agent %d: %w", agentID, err)
		}
		rows = append(rows, part...)
	}
	return rows, nil
}

// readVectors reads the vectors of model for the rows' texts (all the agent's when full),
// by text hash; none without an embedder.
func (s *Searcher) readVectors(db *gorm.DB, agentID int64, model string, full bool, rows []store.RecallChunk) (map[string][]float32, error) {
	vecs := map[string][]float32{}
	if s.emb == nil || len(rows) == 0 {
		return vecs, nil
	}
	var ems []store.RecallEmbedding
	q := db.Select("hash", "vector").Where("model = ?", model)
	if full {
		q = q.Where("hash IN (?)", s.db.Model(&store.RecallChunk{}).Select("hash").Where("agent_id = ?", agentID))
		if err := q.Find(&ems).Error; err != nil {
			return nil, fmt.Errorf("read vectors of agent %d: %w", agentID, err)
		}
	} else {
		hashes := make([]string, len(rows))
		for k, r := range rows {
			hashes[k] = r.Hash
		}
		for start := 0; start < len(hashes); start += 500 {
			var part []store.RecallEmbedding
			if err := db.Select("hash", "vector").Where("model = ? AND hash IN ?", model, hashes[start:min(start+500, len(hashes))]).
				Find(&part).Error; err != nil {
				return nil, fmt.Errorf("read vectors of agent %d: %w", agentID, err)
			}
			ems = append(ems, part...)
		}
	}
	for _, e := range ems {
		v, err := embed.Decode(e.Vector)
		if err != nil {
			return nil, fmt.Errorf("vector %s: %w", e.Hash, err)
		}
		vecs[e.Hash] = v
	}
	return vecs, nil
}

// keptChunks are old's chunks less those of changed files (read again) and of files whose
// state is gone (deleted): what a full read would give for them.
func keptChunks(old *snapshot, files map[string]fileState, changed []string) []cachedChunk {
	drop := old.dropped(files, changed)
	var chunks []cachedChunk
	for _, c := range old.chunks {
		if !drop[c.filename] {
			chunks = append(chunks, c)
		}
	}
	return chunks
}

// newSnapshot sorts the chunks in file order, packs their vectors and builds the posting
// lists (one segment).
func newSnapshot(agentID, gen int64, model string, chunks []cachedChunk, files map[string]fileState) *snapshot {
	sortChunks(chunks)
	packVectors(chunks)
	sg := lexical.NewSegmentJoined(termsOf(chunks))
	for k := range chunks {
		chunks[k].doc = lexical.Doc{Seg: sg, N: uint32(k)}
	}
	snap := &snapshot{agentID: agentID, generation: gen, model: model, chunks: chunks, files: files}
	snap.assemble()
	return snap
}

// sortChunks puts chunks in file order.
func sortChunks(chunks []cachedChunk) {
	slices.SortFunc(chunks, func(a, b cachedChunk) int { return compareChunks(&a, &b) })
}

// packVectors copies the chunks' vectors into one array (in chunk order, so the scan reads
// memory in order, and no array of a previous snapshot stays alive for a few kept chunks).
func packVectors(chunks []cachedChunk) {
	total := 0
	for _, c := range chunks {
		total += len(c.vec)
	}
	block := make([]float32, 0, total)
	for k := range chunks {
		c := &chunks[k]
		if c.vec != nil {
			start := len(block)
			block = append(block, c.vec...)
			c.vec = block[start:len(block):len(block)]
		}
	}
}
