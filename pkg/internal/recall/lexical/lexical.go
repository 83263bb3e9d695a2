// Package lexical scores text with BM25 over terms from bleve's analysers: Unicode word
// segmentation (UAX #29), CJK width folding and bigrams for Chinese and Japanese, lower
// case, English possessives, stop words and Porter stemming for words in Latin script.
//
// The scoring is BM25 over one agent's chunks held in memory (not a bleve index): an agent's
// memory is small, its statistics must be its own (never another agent's), and a per-agent
// in-memory posting list is built from stored terms, and kept up to date segment by segment.
package lexical

import (
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	bregexp "github.com/blevesearch/bleve/v2/analysis/char/regexp"
	"github.com/blevesearch/bleve/v2/analysis/lang/cjk"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
)

// Analyzer turns text into terms. It is safe for concurrent use.
type Analyzer struct {
	a analysis.Analyzer
	// q analyses queries: CJK runs become bigrams only (a lone character stays a unigram),
	// so a two-character word scores as a word and one shared character does not match.
	q analysis.Analyzer
	// question removes Chinese question words from a query ("是什么", "多少", "谁"): they are
	// how a question is asked, not what it is about, and notes rarely contain them.
	question analysis.CharFilter
	// answer removes the words that name the kind of answer wanted ("birthday date",
	// "上线日期"): a note gives the date, seldom the word. Kept when nothing else is left.
	answer analysis.CharFilter
	// light are the analysed forms of English function words (the, it, which, does): indexed
	// and searched like any word, but weighed down in a query that holds other words.
	light map[string]bool
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
	for _, w := range lightWords {
		stops.AddToken(w)
	}
	chain := func(unigrams bool, extra ...analysis.TokenFilter) *analysis.DefaultAnalyzer {
		return &analysis.DefaultAnalyzer{
			Tokenizer: compounds{unicode.NewUnicodeTokenizer()},
			TokenFilters: append([]analysis.TokenFilter{
				cjk.NewCJKWidthFilter(),
				lowercase.NewLowerCaseFilter(),
				cjk.NewCJKBigramFilter(unigrams),
				latinOnly{en.NewPossessiveFilter()},
				latinOnly{porter.NewPorterStemmer()},
			}, extra...),
		}
	}
	a := &Analyzer{
		// Unigrams too in the index, so a one-character query (猫) still matches.
		a:        chain(true),
		q:        chain(false, versionVariants{}),
		question: bregexp.New(questionWords, []byte(" ")),
		answer:   bregexp.New(answerWords, []byte(" ")),
		light:    map[string]bool{},
	}
	for w := range stops {
		for _, t := range a.Terms(w) {
			a.light[t] = true
		}
	}
	return a
}

// lightTerms are the analysed function words (the document lengths of BM25 leave them out).
var lightTerms = sync.OnceValue(func() map[string]bool { return NewAnalyzer().light })

// lightWords are English words of questions that the standard list of function words
// (the, it, which) lacks. No word is removed: these and the standard list are weighed
// down in a query holding other words ("which gym does the user go to" is about the gym),
// and searched at full weight when the query holds nothing else ("it").
var lightWords = []string{"much", "many", "do", "does", "did", "please"}

// questionWords are the Chinese ways of asking (and of asking how something stands: 进度,
// 状态), longest first where one starts another.
var questionWords = regexp.MustCompile(`是什么时候|什么时候|是什么|什么|是多少|多少|哪里|哪儿|哪个|哪天|哪家|哪些|哪|是谁|谁|怎么样|怎么|为什么|几点|几号|几天|是否|有没有|进度|进展|状态|吗|呢`)

// answerWords name the kind of answer a query wants, in English (whole words, any case)
// and Chinese.
var answerWords = regexp.MustCompile(`(?i)\b(?:date|dates|time|times)\b|日期|时间`)

// versionVariants adds, for a version token, the same version with or without its "v"
// (v1.27.3 and 1.27.3), at the same position: a query for either finds a note with the other.
type versionVariants struct{}

var versionRE = regexp.MustCompile(`^v?[0-9]+(\.[0-9]+)+$`)

func (versionVariants) Filter(in analysis.TokenStream) analysis.TokenStream {
	out := in
	for _, t := range in {
		if !versionRE.Match(t.Term) {
			continue
		}
		alt := *t
		if t.Term[0] == 'v' {
			alt.Term = append([]byte(nil), t.Term[1:]...)
		} else {
			alt.Term = append([]byte("v"), t.Term...)
		}
		out = append(out, &alt)
	}
	return out
}

// compounds adds, after a hyphenated compound of letters (Wi-Fi, e-mail, check-in), the
// compound written as one word (wifi, email, checkin), at the first part's offset: a query
// for either spelling finds a note with the other. Identifiers with digits (web-staging-14)
// keep their parts only.
type compounds struct{ t analysis.Tokenizer }

func (c compounds) Tokenize(input []byte) analysis.TokenStream {
	ts := c.t.Tokenize(input)
	var out analysis.TokenStream
	for k, t := range ts {
		out = append(out, t)
		if k == 0 || t.Type != analysis.AlphaNumeric || !letters(t.Term) {
			continue
		}
		prev := ts[k-1]
		if prev.Type != analysis.AlphaNumeric || !letters(prev.Term) || prev.End+1 != t.Start || input[prev.End] != '-' {
			continue
		}
		if k >= 2 && ts[k-2].End+1 == prev.Start && input[ts[k-2].End] == '-' {
			continue // a longer chain (state-of-the-art) is not one word
		}
		if k+1 < len(ts) && t.End+1 == ts[k+1].Start && input[t.End] == '-' {
			continue
		}
		term := make([]byte, 0, len(prev.Term)+len(t.Term))
		term = append(append(term, prev.Term...), t.Term...)
		out = append(out, &analysis.Token{Term: term, Start: prev.Start, End: t.End, Position: t.Position, Type: analysis.AlphaNumeric})
	}
	return out
}

// letters reports whether b is ASCII letters only.
func letters(b []byte) bool {
	for _, c := range b {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return false
		}
	}
	return len(b) > 0
}

// Light reports whether an analysed term is a function word (the, it, which, does).
func (a *Analyzer) Light(term string) bool { return a.light[term] }

// Content is terms without function words (in place).
func (a *Analyzer) Content(terms []string) []string {
	return slices.DeleteFunc(terms, a.Light)
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

// Query is an analysed query: the terms scored, and the units (a word, or one CJK character)
// its coverage is counted over. A unit is covered by a chunk holding any term over it: a
// bigram covers its two characters, a version covers its variants.
type Query struct {
	Terms []string
	units []unit
	// light: bit i = Terms[i] is a function word, weighed down (LightWeight) when the query
	// holds another word (not light: heavy).
	light uint64
	heavy bool
}

// LightWeight is what a function word of a query weighs, as a share of its IDF, when the
// query holds other words.
const LightWeight = 0.1

// OnlyLight reports whether the query is function words only ("it", "how are you"): it is
// searched, but nothing it finds is confidently about it.
func (q Query) OnlyLight() bool { return !q.heavy && len(q.units) > 0 }

type unit struct {
	key      string // the character or word, for its weight
	terms    uint64 // bit i: Terms[i] covers this unit
	weight   float64
	specific bool // held by few documents (under SpecificShare)
	light    bool // a function word
}

// SpecificShare is the most documents a word may be in and still say what a query is about
// (用户 and "user" are in most of an agent's notes; 生产 or "rent" in few).
const SpecificShare = 0.1

// minUnitDocs smooths the unit weights of small agents; minSpecificDocs is how many chunks
// a word may always be in and still be specific.
const (
	minUnitDocs     = 100
	minSpecificDocs = 3
)

// MaxQueryTerms is how many distinct terms of a query count towards coverage (the rest are
// still scored).
const MaxQueryTerms = 64

// Query analyses a search query.
func (a *Analyzer) Query(text string) Query {
	asked := a.question.Filter([]byte(text))
	// The answer words go only when a content word is left: "what time" asks for a time.
	if q := a.query(string(a.answer.Filter(asked))); !q.Empty() && !q.OnlyLight() {
		return q
	}
	return a.query(string(asked))
}

func (a *Analyzer) query(filtered string) Query {
	ts := a.q.Analyze([]byte(filtered))
	var q Query
	termIx := map[string]int{}
	unitIx := map[int]int{} // byte offset of a character or word start -> unit
	addUnit := func(off int, key string, term int) {
		u, ok := unitIx[off]
		if !ok {
			u = len(q.units)
			unitIx[off] = u
			q.units = append(q.units, unit{key: key})
		}
		if term < MaxQueryTerms {
			q.units[u].terms |= 1 << term
		}
	}
	for _, t := range ts {
		if len(t.Term) == 0 {
			continue
		}
		term := string(t.Term)
		ix, ok := termIx[term]
		if !ok {
			ix = len(q.Terms)
			termIx[term] = ix
			q.Terms = append(q.Terms, term)
		}
		switch t.Type {
		case analysis.Double, analysis.Single, analysis.Ideographic:
			// One unit per character; the unigram is the character's weight.
			off := t.Start
			for _, r := range term {
				addUnit(off, string(r), ix)
				if off < len(filtered) {
					_, size := utf8.DecodeRuneInString(filtered[off:])
					off += size
				}
			}
		default:
			addUnit(t.Start, term, ix)
		}
		if a.light[term] && ix < MaxQueryTerms {
			q.light |= 1 << ix
		} else {
			q.heavy = true
		}
	}
	for k := range q.units {
		q.units[k].light = q.units[k].terms != 0 && q.units[k].terms&^q.light == 0
	}
	return q
}

// Empty reports whether the query has no term to look for (only punctuation or question
// words).
func (q Query) Empty() bool { return len(q.units) == 0 }

// BM25 parameters (the usual ones).
const (
	k1 = 1.2
	b  = 0.75
)

// Index is an immutable BM25 index over documents given as term lists, held as segments:
// posting lists over some of the documents each, built once and shared by the indexes
// assembled from them. A change of a few documents is a new small segment and a new
// assembly (NewSegment, Assemble), not a rebuild of every posting list; the statistics
// (document frequencies, lengths) are summed over the live documents at query time, so the
// scores are those of NewIndex over the same documents, bit for bit. Search is safe for
// concurrent use.
type Index struct {
	segs   []part
	n      int // live documents
	total  int // their terms
	avgLen float64
}

// part is a segment as an index uses it: which of its documents are live, and their numbers.
type part struct {
	seg *Segment
	num []int32 // segment document -> index document number; -1 = not in the index
	all bool    // every document of the segment is live (its frequencies need no count)
	// ident: all, and numbered as in the segment (one segment in order: no lookup)
	ident bool
}

// Segment is an immutable set of posting lists over documents numbered from 0.
type Segment struct {
	vocab    map[string]uint32
	postings [][]posting
	docLen   []uint32
	bytes    int
}

type posting struct {
	doc uint32
	tf  uint32
}

// Doc is a document of a segment: what Assemble is given for each document of an index.
type Doc struct {
	Seg *Segment
	N   uint32
}

// NewSegment indexes docs (each a list of terms; the position is the segment's document
// number).
func NewSegment(docs [][]string) *Segment {
	return buildSegment(len(docs), func(d int, add func(string)) {
		for _, t := range docs[d] {
			add(t)
		}
	})
}

// NewSegmentJoined indexes docs given as JoinTerms strings, without splitting them into
// term slices first.
func NewSegmentJoined(docs []string) *Segment {
	return buildSegment(len(docs), func(d int, add func(string)) {
		for t := range strings.FieldsSeq(docs[d]) {
			add(t)
		}
	})
}

// buildSegment indexes n documents whose terms each(d, add) gives. Documents come in order,
// so a term's last posting is the current document's when it was seen before in it.
func buildSegment(n int, each func(d int, add func(string))) *Segment {
	sg := &Segment{vocab: map[string]uint32{}, docLen: make([]uint32, n)}
	var doc uint32
	var length uint32
	light := lightTerms()
	add := func(t string) {
		// A document's length counts its content words: function words are indexed (a
		// query may be "it") but do not make a chunk longer than what it says.
		if !light[t] {
			length++
		}
		id, ok := sg.vocab[t]
		if !ok {
			id = uint32(len(sg.postings))
			sg.vocab[strings.Clone(t)] = id // not a slice of the document's string, which may go
			sg.postings = append(sg.postings, nil)
		}
		ps := sg.postings[id]
		if k := len(ps) - 1; k >= 0 && ps[k].doc == doc {
			ps[k].tf++
			return
		}
		sg.postings[id] = append(ps, posting{doc: doc, tf: 1})
	}
	for d := range n {
		doc, length = uint32(d), 0
		each(d, add)
		sg.docLen[d] = length
	}
	sg.bytes = len(sg.docLen) * 4
	for t, id := range sg.vocab {
		sg.bytes += len(t) + 24 + cap(sg.postings[id])*8
	}
	return sg
}

// Len is the number of documents of the segment.
func (sg *Segment) Len() int { return len(sg.docLen) }

// Bytes estimates the segment's memory.
func (sg *Segment) Bytes() int { return sg.bytes }

// NewIndex indexes docs (each a list of terms; the position is the document number) as one
// segment.
func NewIndex(docs [][]string) *Index {
	sg := NewSegment(docs)
	refs := make([]Doc, len(docs))
	for d := range refs {
		refs[d] = Doc{Seg: sg, N: uint32(d)}
	}
	return Assemble(refs)
}

// Assemble builds the index whose document k is docs[k]. The documents of its segments
// that docs leaves out are not in the index (removed); a document listed twice counts
// twice in the statistics but is scored under its last number only: do not list one twice.
func Assemble(docs []Doc) *Index {
	ix := &Index{n: len(docs)}
	at := map[*Segment]int{}
	var last *Segment
	li := -1
	for k, d := range docs {
		if d.Seg != last {
			i, ok := at[d.Seg]
			if !ok {
				i = len(ix.segs)
				at[d.Seg] = i
				num := make([]int32, d.Seg.Len())
				for j := range num {
					num[j] = -1
				}
				ix.segs = append(ix.segs, part{seg: d.Seg, num: num})
			}
			last, li = d.Seg, i
		}
		ix.segs[li].num[d.N] = int32(k)
		ix.total += int(d.Seg.docLen[d.N])
	}
	for i := range ix.segs {
		p := &ix.segs[i]
		live := 0
		for _, k := range p.num {
			if k >= 0 {
				live++
			}
		}
		p.all = live == len(p.num)
		p.ident = p.all
		for j, k := range p.num {
			if int(k) != j {
				p.ident = false
				break
			}
		}
	}
	if ix.n > 0 {
		ix.avgLen = float64(ix.total) / float64(ix.n)
	}
	return ix
}

// Len is the number of documents.
func (ix *Index) Len() int { return ix.n }

// Held is the number of documents the index's segments hold, live or removed.
func (ix *Index) Held() int {
	n := 0
	for _, p := range ix.segs {
		n += len(p.num)
	}
	return n
}

// Segments is the number of segments.
func (ix *Index) Segments() int { return len(ix.segs) }

// Bytes estimates the index's memory: its segments whole (removed documents too) and its
// document numbers.
func (ix *Index) Bytes() int {
	n := 0
	for _, p := range ix.segs {
		n += p.seg.bytes + 4*len(p.num)
	}
	return n
}

// lookup returns the posting lists of term t in each segment (nil where absent) and its
// document frequency over the live documents.
func (ix *Index) lookup(t string, lists [][]posting) ([][]posting, int) {
	lists = lists[:0]
	df := 0
	for _, p := range ix.segs {
		id, ok := p.seg.vocab[t]
		if !ok {
			lists = append(lists, nil)
			continue
		}
		ps := p.seg.postings[id]
		lists = append(lists, ps)
		if p.all {
			df += len(ps)
			continue
		}
		for _, q := range ps {
			if p.num[q.doc] >= 0 {
				df++
			}
		}
	}
	return lists, df
}

// Match is how the documents match a query.
type Match struct {
	// Score is the BM25 score of every document (0 = no query term).
	Score []float64
	// Weight is the query's own weight: the BM25 score of a document of average length that
	// holds every query term once (the sum of their IDFs). Score / Weight means the same from
	// one query to the next.
	Weight float64
	terms  []uint64 // per document: bit i = holds Terms[i]
	units  []unit
	// OnlyLight: the query is function words only (Query.OnlyLight).
	OnlyLight bool
	total     float64
}

// Search scores every document and notes which query terms each holds. A unit's weight is
// the IDF of its word or character (a term no document holds weighs the most).
func (ix *Index) Search(q Query) Match {
	m := Match{Score: make([]float64, ix.n), terms: make([]uint64, ix.n), units: append([]unit(nil), q.units...), OnlyLight: q.OnlyLight()}
	n := float64(ix.n)
	idf := func(df int) float64 { return math.Log(1 + (n-float64(df)+0.5)/(float64(df)+0.5)) }
	var lists [][]posting
	for i, t := range q.Terms {
		var df int
		lists, df = ix.lookup(t, lists)
		w := idf(df)
		if q.heavy && i < MaxQueryTerms && q.light&(1<<i) != 0 {
			w *= LightWeight
		}
		m.Weight += w
		if df == 0 {
			continue
		}
		var bit uint64
		if i < MaxQueryTerms {
			bit = 1 << i
		}
		for s, ps := range lists {
			p := &ix.segs[s]
			num, docLen, avg := p.num, p.seg.docLen, ix.avgLen
			if p.ident {
				for _, po := range ps {
					tf := float64(po.tf)
					dl := float64(docLen[po.doc])
					m.Score[po.doc] += w * tf * (k1 + 1) / (tf + k1*(1-b+b*dl/avg))
					m.terms[po.doc] |= bit
				}
				continue
			}
			for _, po := range ps {
				d := num[po.doc]
				if d < 0 {
					continue
				}
				tf := float64(po.tf)
				dl := float64(docLen[po.doc])
				m.Score[d] += w * tf * (k1 + 1) / (tf + k1*(1-b+b*dl/avg))
				m.terms[d] |= bit
			}
		}
	}
	// Units are weighed as if the agent had at least minUnitDocs chunks: in a new agent's
	// five notes every word is "common", and coverage would mean nothing.
	un := math.Max(n, minUnitDocs)
	for k := range m.units {
		var df int
		lists, df = ix.lookup(m.units[k].key, lists)
		m.units[k].weight = math.Log(1 + (un-float64(df)+0.5)/(float64(df)+0.5))
		if q.heavy && m.units[k].light {
			m.units[k].weight *= LightWeight
		}
		m.units[k].specific = float64(df) <= max(SpecificShare*n, minSpecificDocs) && !m.units[k].light
		m.total += m.units[k].weight
	}
	return m
}

// Coverage is the IDF-weighted share of the query's units that document d holds (0–1):
// "杭州出差" against a note about 出差 in 杭州 is 1; a note sharing only 用户 is near 0.
func (m Match) Coverage(d int) float64 {
	if m.total == 0 {
		return 0
	}
	return m.CoveredBy(d, ^uint64(0)) / m.total
}

// CoveredBy is the weight of the units document d holds through terms in mask (the terms
// another document holds: the weight the two share).
func (m Match) CoveredBy(d int, mask uint64) float64 {
	has := m.terms[d] & mask
	w := 0.0
	for _, u := range m.units {
		if u.terms&has != 0 {
			w += u.weight
		}
	}
	return w
}

// Share is the IDF-weighted share of the query's units covered by the terms in mask (0–1):
// what Coverage is for a document, for any set of terms (one sentence of a document).
func (m Match) Share(mask uint64) float64 {
	if m.total == 0 {
		return 0
	}
	w := 0.0
	for _, u := range m.units {
		if u.terms&mask != 0 {
			w += u.weight
		}
	}
	return w / m.total
}

// SameSubject reports whether document b holds at least share of the weight of the
// specific units of the query that document a holds (and a holds one): both are about the
// same specific thing asked for.
func (m Match) SameSubject(b, a int, share float64) bool {
	ha, hb := m.terms[a], m.terms[b]
	held, both := 0.0, 0.0
	for _, u := range m.units {
		if !u.specific || u.terms&ha == 0 {
			continue
		}
		held += u.weight
		if u.terms&hb != 0 {
			both += u.weight
		}
	}
	return held > 0 && both >= share*held
}

// Terms is the set of query terms document d holds (bit i = Terms[i]).
func (m Match) Terms(d int) uint64 { return m.terms[d] }

// Score returns the BM25 score of every document (indexed by document number; 0 = no
// query term). Repeated query terms count once.
func (ix *Index) Score(query []string) []float64 {
	out := make([]float64, ix.n)
	n := float64(ix.n)
	seen := map[string]bool{}
	var lists [][]posting
	for _, q := range query {
		if seen[q] {
			continue
		}
		seen[q] = true
		var df int
		lists, df = ix.lookup(q, lists)
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (n-float64(df)+0.5)/(float64(df)+0.5))
		for s, ps := range lists {
			p := &ix.segs[s]
			for _, po := range ps {
				d := p.num[po.doc]
				if d < 0 {
					continue
				}
				tf := float64(po.tf)
				dl := float64(p.seg.docLen[po.doc])
				out[d] += idf * tf * (k1 + 1) / (tf + k1*(1-b+b*dl/ix.avgLen))
			}
		}
	}
	return out
}

// JoinTerms and SplitTerms store a term list as one string (terms never contain spaces).
func JoinTerms(t []string) string { return strings.Join(t, " ") }

// SplitTerms is the inverse of JoinTerms.
func SplitTerms(s string) []string { return strings.Fields(s) }
