package lexical

import (
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
		{"The user's cats were deploying", []string{"user", "cat", "deploi"}, []string{"the", "user's", "cats"}},
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
		"date":               {"date"}, // alone, the word is what is asked for
		"what time":          {"time"},
	} {
		if got := a.Query(q).Terms; !slices.Equal(got, want) {
			t.Errorf("Query(%q).Terms = %q, want %q", q, got, want)
		}
	}
}
