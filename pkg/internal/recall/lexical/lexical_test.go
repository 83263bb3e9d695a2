package lexical

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

func TestAnalyzerChineseEnglishIdentifiers(t *testing.T) {
	a := NewAnalyzer()
	cases := []struct {
		text string
		want []string
		not  []string
	}{
		{"用户喜欢喝乌龙茶", []string{"喜欢", "乌龙", "龙茶"}, []string{"用户喜欢喝乌龙茶"}},
		{"The user's cats were deploying", []string{"the", "user", "cat", "deploi"}, []string{"user's", "cats"}}, // no stop list: "the" is a (light) term
		{"Order ORD-2026-0042 on db-prod-03", []string{"ord", "0042", "db", "prod", "03"}, nil},
		{"ＡＢＣ全角", []string{"abc", "全角"}, nil},
		{"周五部署 deploy 到 staging", []string{"周五", "部署", "deploi", "stage"}, nil},
	}
	for _, c := range cases {
		got := a.Terms(c.text)
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("Terms(%q) = %q; missing %q", c.text, got, w)
			}
		}
		for _, n := range c.not {
			if slices.Contains(got, n) {
				t.Errorf("Terms(%q) = %q; must not contain %q", c.text, got, n)
			}
		}
	}
}

func TestBM25RanksRareAndFrequentTerms(t *testing.T) {
	a := NewAnalyzer()
	docs := [][]string{
		a.Terms("The server db-prod-03 crashed on Monday."),
		a.Terms("We talked about the weather and the server room."),
		a.Terms("用户的订单 ORD-2026-0042 已经发货"),
		a.Terms("Nothing relevant here at all."),
	}
	ix := NewIndex(docs)
	s := ix.Score(a.Terms("db-prod-03 crash"))
	if s[0] <= 0 || s[1] != 0 || s[2] != 0 || s[3] != 0 {
		t.Errorf("scores %v: only the document naming the host (and 'crashed', stemmed) may match", s)
	}
	s = ix.Score(a.Terms("server"))
	if s[0] <= 0 || s[1] <= 0 || s[2] != 0 || s[3] != 0 {
		t.Errorf("scores %v: both documents with server match, no other", s)
	}
	if s[3] != 0 {
		t.Errorf("a document with no query term scored: %v", s)
	}
	s = ix.Score(a.Terms("订单发货"))
	if s[2] <= 0 || s[0] != 0 || s[1] != 0 || s[3] != 0 {
		t.Errorf("Chinese query must match only the Chinese document: %v", s)
	}
}

// An index assembled from segments after random edits (documents removed, added in new
// segments, reordered) matches NewIndex over the same documents bit for bit: scores, the
// query's weight, the terms each document holds, coverage and subjects.
func TestAssembledIndexMatchesNewIndex(t *testing.T) {
	rnd := rand.New(rand.NewSource(7))
	words := make([]string, 60)
	for i := range words {
		words[i] = fmt.Sprintf("w%d", i)
	}
	doc := func() []string {
		terms := make([]string, 1+rnd.Intn(30))
		for i := range terms {
			terms[i] = words[int(float64(len(words))*rnd.Float64()*rnd.Float64())]
		}
		return terms
	}
	type held struct {
		terms []string
		ref   Doc
	}
	var docs []held
	add := func(n int) {
		batch := make([][]string, n)
		for i := range batch {
			batch[i] = doc()
		}
		sg := NewSegment(batch)
		if rnd.Intn(2) == 0 {
			joined := make([]string, len(batch))
			for i, terms := range batch {
				joined[i] = JoinTerms(terms)
			}
			sg = NewSegmentJoined(joined)
		}
		for i, terms := range batch {
			docs = append(docs, held{terms: terms, ref: Doc{Seg: sg, N: uint32(i)}})
		}
	}
	add(200)
	an := NewAnalyzer()
	for step := 0; step < 60; step++ {
		// Remove a few, add a few in a new segment, shuffle the order.
		for k := rnd.Intn(8); k > 0 && len(docs) > 0; k-- {
			i := rnd.Intn(len(docs))
			docs = append(docs[:i], docs[i+1:]...)
		}
		add(rnd.Intn(10))
		rnd.Shuffle(len(docs), func(i, j int) { docs[i], docs[j] = docs[j], docs[i] })
		refs := make([]Doc, len(docs))
		plain := make([][]string, len(docs))
		for k, d := range docs {
			refs[k], plain[k] = d.ref, d.terms
		}
		got, want := Assemble(refs), NewIndex(plain)
		if got.Len() != want.Len() || got.Held() < got.Len() {
			t.Fatalf("step %d: %d documents (%d held), want %d", step, got.Len(), got.Held(), want.Len())
		}
		for qn := 0; qn < 5; qn++ {
			text := ""
			for k := 1 + rnd.Intn(4); k > 0; k-- {
				text += words[rnd.Intn(len(words))] + " "
			}
			text += "absent"
			q := an.Query(text)
			mg, mw := got.Search(q), want.Search(q)
			if mg.Weight != mw.Weight || mg.total != mw.total {
				t.Fatalf("step %d %q: weight %v/%v, want %v/%v", step, text, mg.Weight, mg.total, mw.Weight, mw.total)
			}
			for d := range plain {
				if mg.Score[d] != mw.Score[d] || mg.Terms(d) != mw.Terms(d) || mg.Coverage(d) != mw.Coverage(d) ||
					mg.CoveredBy(d, mw.Terms(0)) != mw.CoveredBy(d, mw.Terms(0)) ||
					mg.SameSubject(d, 0, 0.5) != mw.SameSubject(d, 0, 0.5) || mg.SameSubject(0, d, 1) != mw.SameSubject(0, d, 1) {
					t.Fatalf("step %d %q doc %d: score %v terms %b, want %v %b", step, text, d, mg.Score[d], mg.Terms(d), mw.Score[d], mw.Terms(d))
				}
			}
			if sg, sw := got.Score(q.Terms), want.Score(q.Terms); !slices.Equal(sg, sw) {
				t.Fatalf("step %d %q: Score %v, want %v", step, text, sg, sw)
			}
		}
	}
}

// A segment decoded from its encoding scores as the original; every truncation and many
// corruptions of the encoding are an error or a segment, never a panic.
func TestSegmentEncoding(t *testing.T) {
	an := NewAnalyzer()
	docs := [][]string{an.Terms("The server db-prod-03 crashed on Monday, the server"), an.Terms("用户的订单 ORD-2026-0042 已经发货"), {}, an.Terms("server room weather")}
	sg := NewSegment(docs)
	enc, err := sg.AppendBinary([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	got, rest, err := DecodeSegment(append(enc[1:], "tail"...))
	if err != nil || string(rest) != "tail" || got.Bytes() != sg.Bytes() {
		t.Fatalf("decode: %v, rest %q, %d bytes want %d", err, rest, got.Bytes(), sg.Bytes())
	}
	assemble := func(sg *Segment) *Index {
		refs := make([]Doc, sg.Len())
		for k := range refs {
			refs[k] = Doc{Seg: sg, N: uint32(k)}
		}
		return Assemble(refs)
	}
	q := an.Query("server crash 订单")
	if a, b := assemble(got).Search(q), assemble(sg).Search(q); !slices.Equal(a.Score, b.Score) || a.Weight != b.Weight {
		t.Fatalf("decoded %v, original %v", a.Score, b.Score)
	}
	enc = enc[1:]
	for n := range enc {
		if _, _, err := DecodeSegment(enc[:n]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(enc))
		}
	}
	rnd := rand.New(rand.NewSource(1))
	for range 2000 {
		bad := append([]byte(nil), enc...)
		bad[rnd.Intn(len(bad))] = byte(rnd.Intn(256))
		if sg, _, err := DecodeSegment(bad); err == nil {
			_ = assemble(sg).Search(q)
		}
	}
}

// BenchmarkSearchSegments scores a three-term query over 10,000 documents held in one
// segment, and in nine (a base and eight small ones, a tenth of the documents removed): what
// segments cost a warm search.
//
//	go test ./pkg/internal/recall/lexical -run '^$' -bench BenchmarkSearchSegments
func BenchmarkSearchSegments(b *testing.B) {
	rnd := rand.New(rand.NewSource(1))
	words := make([]string, 3000)
	for i := range words {
		words[i] = fmt.Sprintf("w%d", i)
	}
	docs := make([][]string, 10000)
	for d := range docs {
		docs[d] = make([]string, 100)
		for i := range docs[d] {
			docs[d][i] = words[int(float64(len(words))*rnd.Float64()*rnd.Float64()*rnd.Float64())]
		}
	}
	q := NewAnalyzer().Query("w1 w20 w300")
	b.Run("segments=1", func(b *testing.B) {
		ix := NewIndex(docs)
		for b.Loop() {
			_ = ix.Search(q)
		}
	})
	b.Run("segments=9", func(b *testing.B) {
		base := NewSegment(docs[:9200])
		var refs []Doc
		for d := range 9200 {
			if d%10 != 0 {
				refs = append(refs, Doc{Seg: base, N: uint32(d)})
			}
		}
		for s := range 8 {
			sg := NewSegment(docs[9200+100*s : 9300+100*s])
			for d := range 100 {
				refs = append(refs, Doc{Seg: sg, N: uint32(d)})
			}
		}
		ix := Assemble(refs)
		for b.Loop() {
			_ = ix.Search(q)
		}
	})
}

func TestCompoundsAndAnswerWords(t *testing.T) {
	a := NewAnalyzer()
	for text, c := range map[string]struct{ want, not []string }{
		"The Wi-Fi password":          {want: []string{"wi", "fi", "wifi"}},
		"send an e-mail at check-in":  {want: []string{"email", "checkin"}},
		"state-of-the-art design":     {not: []string{"stateof", "stateofart"}},
		"web-staging-14 and ORD-2026": {not: []string{"webstage", "webstaging", "ord2026"}},
	} {
		got := a.Terms(text)
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("Terms(%q) = %q; missing %q", text, got, w)
			}
		}
		for _, n := range c.not {
			if slices.Contains(got, n) {
				t.Errorf("Terms(%q) = %q; must not contain %q", text, got, n)
			}
		}
	}
	for q, want := range map[string][]string{
		"user birthday date": {"user", "birthdai"},
		"Atlas 上线日期":         {"atla", "上线"},
		"date":               {"date"},         // alone, the word is what is asked for
		"what time":          {"what", "time"}, // only a light word besides it: the answer word stays
	} {
		if got := a.Query(q).Terms; !slices.Equal(got, want) {
			t.Errorf("Query(%q).Terms = %q, want %q", q, got, want)
		}
	}
}
