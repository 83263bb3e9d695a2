package recall

import (
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/recall/lexical"
)

// MMR must not lift a superseded note above the note that superseded it: here the
// correction reads like the hit already taken (MMR would push it down) and the older note
// does not (MMR would take it next).
func TestDiversifyKeepsASupersededNoteBelowItsSuperseder(t *testing.T) {
	s := &Searcher{set: Settings{MMRLambda: 0.9}.withDefaults(), an: lexical.NewAnalyzer()}
	day := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	chunk := func(name, text string, vec []float32, d int) *cachedChunk {
		return &cachedChunk{filename: name, text: text, hash: name, vec: vec, date: day.AddDate(0, 0, d), dated: true}
	}
	hit := chunk("memory/2026-05-20.md", "The daily standup moved to 10:30 from now on.", []float32{1, 0}, 19)
	newer := chunk("memory/2026-05-03.md", "Standup moved to Teams.", []float32{0.99, 0.141}, 2)
	older := chunk("memory/2026-03-19.md", "The standup is on Zoom; the link is in the calendar.", []float32{0, 1}, -43)
	cands := []cand{{c: hit, score: 1.0}, {c: newer, score: 0.98}, {c: older, score: 0.96, by: newer}}
	facts := &factCache{s: s, lq: s.an.Query("standup"), f: make([]*fact, len(cands))}
	order := s.diversify(cands, facts, true, 3)
	if len(order) != 3 || cands[order[1]].c != newer || cands[order[2]].c != older {
		var got []string
		for _, k := range order {
			got = append(got, cands[k].c.filename)
		}
		t.Fatalf("order %v: the superseded note must come after the note that superseded it", got)
	}
}

func TestContainsIdent(t *testing.T) {
	for _, c := range []struct {
		text, id string
		want     bool
	}{
		{"Order ORD-2026-0042 shipped", "ord-2026-0042", true},
		{"gateway at V1.27.3", "v1.27.3", true},
		{"gateway at 1.27.3", "v1.27.3", true},
		{"ORD\r2026", "ord-2026", false}, // '\r' | 0x20 is '-': no folding but A–Z
		{"ord-202", "ord-2026", false},
		{"用户的订单PO-55812的交期", "po-55812", true},
		{"pPo-55812", "po-55812", true},
		{"po-5581", "po-55812", false},
		{"ab", "abc", false},
	} {
		if got := containsIdent(c.text, c.id); got != c.want {
			t.Errorf("containsIdent(%q, %q) = %v, want %v", c.text, c.id, got, c.want)
		}
	}
}

// TestContainsFoldAgreesWithAScan checks the IndexByte search against a plain scan of every
// position, on random ASCII texts of a small alphabet (so that partial matches abound).
func TestContainsFoldAgreesWithAScan(t *testing.T) {
	scan := func(text, id string) bool {
		return strings.Contains(strings.ToLower(text), id)
	}
	rnd := rand.New(rand.NewSource(1))
	const alphabet = "aAbB-1"
	word := func(n int, lower bool) string {
		b := make([]byte, n)
		for k := range b {
			b[k] = alphabet[rnd.Intn(len(alphabet))]
			if lower && 'A' <= b[k] && b[k] <= 'Z' {
				b[k] += 'a' - 'A'
			}
		}
		return string(b)
	}
	for k := 0; k < 20000; k++ {
		text, id := word(rnd.Intn(12), false), word(1+rnd.Intn(4), true)
		if got, want := containsFold(text, id), scan(text, id); got != want {
			t.Fatalf("containsFold(%q, %q) = %v, want %v", text, id, got, want)
		}
	}
}

// A refresh keeps the analysis of the chunks it keeps (same hash and text), not of a chunk
// whose text changed under the same hash, and counts its bytes.
func TestInheritKeepsTheAnalysisOfKeptChunks(t *testing.T) {
	old := &snapshot{chunks: []cachedChunk{{hash: "a", text: "kept text"}, {hash: "b", text: "old text"}}}
	for k := range old.chunks {
		old.sents.Store(&old.chunks[k], []sentence{{text: old.chunks[k].text, terms: []string{"x"}}})
	}
	snap := &snapshot{chunks: []cachedChunk{old.chunks[0], {hash: "b", text: "new text"}}}
	if n := snap.inherit(old); n <= 0 {
		t.Fatalf("inherited %d bytes", n)
	}
	if _, ok := snap.sents.Load(&snap.chunks[0]); !ok {
		t.Fatal("the kept chunk's sentences were not inherited")
	}
	if _, ok := snap.sents.Load(&snap.chunks[1]); ok {
		t.Fatal("a changed chunk inherited the old text's sentences")
	}
}
