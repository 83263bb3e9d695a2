package recall_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// Issue 30: an explicit search answers the ranked matches, each with its relevance, and says
// whether one is confident; "nothing relevant" is auto-recall's decision only.
func TestRelevanceApartFromRetrieval(t *testing.T) {
	r := newRig(t, storetest.SQLite(t), false)
	r.write(t, 1, "MEMORY.md", "# MEMORY\n\n- 用户住在杭州。\n- The user works at Northwind Labs.\n")
	// The README's example.
	r.write(t, 1, "memory/2026-04-01.md", "# 2026-04-01\n\n- 用户喜欢 Go\n")
	r.write(t, 1, "memory/2026-04-02.md", "# 2026-04-02\n\n用户今天整理了书架。\n")

	for _, q := range []string{"喜欢什么语言", "Go", "go"} {
		res := r.search(t, 1, recall.Query{Text: q})
		if len(res.Hits) == 0 || res.Hits[0].Filename != "memory/2026-04-01.md" {
			t.Errorf("%q: want memory/2026-04-01.md first, got %v (notice %q)", q, files(res), res.Notice)
			continue
		}
		for _, h := range res.Hits {
			if h.Relevance < 0 || h.Relevance > 1 {
				t.Errorf("%q: relevance %v outside 0–1", q, h.Relevance)
			}
		}
	}
	if res := r.search(t, 1, recall.Query{Text: "Go"}); !res.Confident || res.Hits[0].Relevance < recall.ConfidentRelevance {
		t.Errorf("Go: the note holding every word of the query must be confident: %+v", res)
	}

	// No answer in memory: the explicit search still ranks what shares words (用户), says
	// none is confident; auto-recall recalls nothing.
	q := "用户的护照号码是多少"
	res := r.search(t, 1, recall.Query{Text: q})
	if len(res.Hits) == 0 || res.Confident {
		t.Errorf("%q: want ranked matches, none confident; got %v confident=%v", q, files(res), res.Confident)
	}
	for _, h := range res.Hits {
		if h.Relevance >= recall.ConfidentRelevance {
			t.Errorf("%q: %s has relevance %v, yet holds only 用户", q, h.Filename, h.Relevance)
		}
	}
	if auto := r.search(t, 1, recall.Query{Text: q, Auto: true}); len(auto.Hits) != 0 || auto.Notice == "" {
		t.Errorf("%q: auto-recall must recall nothing (with a notice): %v", q, files(auto))
	}
	for _, small := range []string{"how are you", "thanks, that's all", "谢谢", "hi"} {
		if auto := r.search(t, 1, recall.Query{Text: small, Auto: true}); len(auto.Hits) != 0 {
			t.Errorf("small talk %q: auto-recall must recall nothing: %v", small, files(auto))
		}
	}

	// minRelevance filters on request.
	all := r.search(t, 1, recall.Query{Text: "用户喜欢什么"})
	some := r.search(t, 1, recall.Query{Text: "用户喜欢什么", MinRelevance: 0.5})
	if len(some.Hits) == 0 || len(some.Hits) >= len(all.Hits) {
		t.Errorf("minRelevance 0.5 must keep the confident hits only: %v of %v", files(some), files(all))
	}
	for _, h := range some.Hits {
		if h.Relevance < 0.5 {
			t.Errorf("minRelevance 0.5 kept %s at %v", h.Filename, h.Relevance)
		}
	}
	for _, bad := range []float64{-0.1, 1.5} {
		if _, err := r.se.Search(t.Context(), 1, recall.Query{Text: "Go", MinRelevance: bad}); err == nil {
			t.Errorf("minRelevance %v must be refused", bad)
		}
	}
}

// Issue 30: an identifier glued to Chinese text, a version beside Chinese words, a rare
// word: the chunk holding it verbatim is returned, first when it is the only one, and
// confident (auto-recall recalls it) even when the rest of the question is not in it.
func TestExactAndRareMatchesAreNeverLost(t *testing.T) {
	r := newRig(t, storetest.SQLite(t), false)
	r.write(t, 1, "MEMORY.md", "# MEMORY\n\n- 用户负责采购和供应商对接。\n- The IT team rotated the VPN keys.\n")
	for d := 1; d <= 20; d++ {
		r.write(t, 1, fmt.Sprintf("memory/2026-05-%02d.md", d), fmt.Sprintf("# 2026-05-%02d\n\n用户和供应商开了周会，讨论了交付和根因分析的流程。The user reviewed the weekly plan.\n", d))
	}
	r.write(t, 1, "memory/2026-05-21.md", "# 2026-05-21\n\nPO-55812 延迟是因为面料缺货。\n")
	r.write(t, 1, "memory/2026-05-22.md", "# 2026-05-22\n\n网关升级到 v1.27.3 以后内存不再泄漏。\n")
	r.write(t, 1, "memory/2026-05-23.md", "# 2026-05-23\n\nThe user plans a trip to Zanzibar.\n")
	for q, want := range map[string]string{
		"PO-55812的根因":               "memory/2026-05-21.md",
		"1.27.3版本的问题":               "memory/2026-05-22.md",
		"user weekly trip Zanzibar": "memory/2026-05-23.md",
		"IT":                        "MEMORY.md",
		"it team":                   "MEMORY.md",
	} {
		res := r.search(t, 1, recall.Query{Text: q})
		if len(res.Hits) == 0 || res.Hits[0].Filename != want {
			t.Errorf("%q: want %s first, got %v (notice %q)", q, want, files(res), res.Notice)
		}
		if q == "IT" || q == "it team" {
			continue
		}
		auto := r.search(t, 1, recall.Query{Text: q, Auto: true})
		if !slices.Contains(files(auto), want) {
			t.Errorf("%q: auto-recall must recall %s: %v", q, want, files(auto))
		}
	}
}

// Issue 30: kinds and dates are fair. A daily note however old stands at least where an
// undated file does (the decay floor), and the seeded instruction files (AGENTS.md, SOUL.md)
// do not outrank a note for what happened.
func TestDatesAndKindsAreFair(t *testing.T) {
	r := newRig(t, storetest.SQLite(t), false)
	r.write(t, 1, "memory/2025-01-10.md", "# 2025-01-10\n\nThe user moved the book club to Thursdays, at the old library.\n")
	r.write(t, 1, "SOUL.md", "# SOUL\n\nBook club Thursdays.\n")
	r.write(t, 1, "MEMORY.md", "# MEMORY\n\n- The user likes tea.\n")
	res := r.search(t, 1, recall.Query{Text: "book club Thursdays"})
	if len(res.Hits) != 2 || res.Hits[0].Filename != "memory/2025-01-10.md" || res.Hits[1].Filename != "SOUL.md" {
		t.Fatalf("want the note, then SOUL.md; got %v", files(res))
	}
	if floor := recall.Defaults().DecayFloor; res.Hits[0].Decay < floor || res.Hits[1].Decay >= floor {
		t.Errorf("decay: the old note %v (at least the floor %v wanted), SOUL.md %v (below it wanted)", res.Hits[0].Decay, floor, res.Hits[1].Decay)
	}
	if mem := r.search(t, 1, recall.Query{Text: "tea"}); len(mem.Hits) == 0 || mem.Hits[0].Decay != recall.Defaults().DecayFloor {
		t.Errorf("MEMORY.md must stand at the decay floor: %+v", mem.Hits)
	}
}
