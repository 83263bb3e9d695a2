package recall_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/matememory/matememory/pkg/internal/fault"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/recall/embed"
	"github.com/matememory/matememory/pkg/internal/recall/embed/embedtest"
	"github.com/matememory/matememory/pkg/internal/recall/lexical"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

var now = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

type rig struct {
	ws  *workspace.Service
	ix  *recall.Indexer
	se  *recall.Searcher
	emb *embedtest.Server
	db  storetest.DB
}

func newRig(t *testing.T, db storetest.DB, withEmbedder bool) *rig {
	an := lexical.NewAnalyzer()
	r := &rig{db: db, ws: workspace.New(db.DB, workspace.WithDefaults("en", "UTC"), workspace.WithClock(func() time.Time { return now }))}
	var iopts []recall.IndexerOption
	var sopts []recall.SearcherOption
	if withEmbedder {
		r.emb = embedtest.New(t, 64)
		e := embed.NewOpenAI(r.emb.Config())
		iopts = append(iopts, recall.WithEmbedder(e))
		sopts = append(sopts, recall.SearchWithEmbedder(e))
	}
	r.ix = recall.NewIndexer(db.DB, an, recall.Settings{}, iopts...)
	r.se = recall.NewSearcher(db.DB, an, recall.Settings{}, append(sopts, recall.SearchWithClock(func() time.Time { return now }))...)
	return r
}

func (r *rig) write(t *testing.T, agent int64, name, content string) {
	t.Helper()
	if _, _, err := r.ws.Write(context.Background(), agent, name, content, workspace.AnyVersion, workspace.Change{Actor: store.ActorTool}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ix.Sync(context.Background(), agent, name); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) search(t *testing.T, agent int64, q recall.Query) recall.Result {
	t.Helper()
	res, err := r.se.Search(context.Background(), agent, q)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func files(res recall.Result) []string {
	var out []string
	for _, h := range res.Hits {
		out = append(out, h.Filename)
	}
	return out
}

func TestSearchIsolationAndFields(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		r := newRig(t, db, true)
		r.write(t, 1, "memory/2026-05-30.md", "# 2026-05-30\n\nThe user deploys db-prod-03 every Friday.\n\n用户喜欢喝乌龙茶。\n")
		r.write(t, 2, "memory/2026-05-30.md", "# 2026-05-30\n\nAgent two deploys db-prod-07 on Friday too.\n")
		res := r.search(t, 1, recall.Query{Text: "deploy Friday"})
		if res.Mode != recall.ModeHybrid || res.Degraded || len(res.Hits) == 0 {
			t.Fatalf("result %+v", res)
		}
		for _, h := range res.Hits {
			if strings.Contains(h.Snippet, "db-prod-07") || strings.Contains(h.Snippet, "Agent two") {
				t.Fatalf("agent 1 sees agent 2's chunk: %+v", h)
			}
		}
		h := res.Hits[0]
		if h.Filename != "memory/2026-05-30.md" || h.StartLine != 1 || h.EndLine < 3 || h.Date != "2026-05-30" || !h.Dated ||
			h.FileVersion != 1 || h.Lexical <= 0 || h.Vector <= 0 || h.Decay >= 1 || h.Decay <= 0.9 {
			t.Errorf("hit fields %+v", h)
		}
		zh := r.search(t, 1, recall.Query{Text: "乌龙茶"})
		if len(zh.Hits) == 0 || !strings.Contains(zh.Hits[0].Snippet, "乌龙茶") {
			t.Errorf("Chinese query: %+v", zh)
		}
		other := r.search(t, 2, recall.Query{Text: "乌龙茶 db-prod-03"})
		for _, h := range other.Hits {
			if strings.Contains(h.Snippet, "乌龙") || strings.Contains(h.Snippet, "db-prod-03") {
				t.Fatalf("agent 2 sees agent 1's chunk: %+v", h)
			}
		}
	})
}

func TestSearchBadInput(t *testing.T) {
	r := newRig(t, storetest.SQLite(t), false)
	for _, q := range []recall.Query{
		{Text: "  "}, {Text: strings.Repeat("x", 2001)}, {Text: "a\xffb"}, {Text: "x", MaxResults: 51},
		{Text: "x", Since: now, Until: now.AddDate(0, 0, -1)},
		// What a JSON decoder makes of raw non-UTF-8 bytes or a lone "\ud800" escape.
		{Text: "tea \uFFFD"}, {Text: "x", MaxResults: 0, MaxResultsGiven: true},
	} {
		_, err := r.se.Search(context.Background(), 1, q)
		var ie *recall.InvalidError
		if !errors.As(err, &ie) || !errors.Is(err, fault.ErrInvalid) || ie.Msg == "" {
			t.Errorf("query %.20q: want a 400 InvalidError, got %v", q.Text, err)
		}
	}
}

func TestLexicalOnlySaysSo(t *testing.T) {
	r := newRig(t, storetest.SQLite(t), false)
	r.write(t, 1, "MEMORY.md", "# Facts\n\nOrder ORD-2026-0042 was refunded.\n")
	res := r.search(t, 1, recall.Query{Text: "ORD-2026-0042"})
	if res.Mode != recall.ModeLexical || res.Degraded || !strings.Contains(res.Notice, "no embedding endpoint") {
		t.Errorf("want lexical mode with a notice, got %+v", res)
	}
	// Issue 30: an undated file stands at the decay floor, where the oldest note ends.
	if len(res.Hits) != 1 || res.Hits[0].Decay != recall.Defaults().DecayFloor || res.Hits[0].Dated {
		t.Errorf("MEMORY.md hit must stand at the decay floor: %+v", res.Hits)
	}
}

func TestEmbedDownDegradesThenCatchesUp(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		r := newRig(t, db, true)
		r.emb.SetDown(true)
		r.write(t, 1, "memory/2026-05-31.md", "# 2026-05-31\n\nThe staging host is stg-web-12.\n")
		var rec store.RecallFile
		if err := db.DB.Where("agent_id = 1 AND filename = ?", "memory/2026-05-31.md").Take(&rec).Error; err != nil || !rec.EmbedPending {
			t.Fatalf("embedding down: file must be indexed with embed_pending, got %+v %v", rec, err)
		}
		res := r.search(t, 1, recall.Query{Text: "stg-web-12"})
		if !res.Degraded || res.Mode != recall.ModeLexical || len(res.Hits) != 1 {
			t.Fatalf("want degraded lexical hit, got %+v", res)
		}
		r.emb.SetDown(false)
		sr, err := r.ix.Sync(context.Background(), 1, "memory/2026-05-31.md")
		if err != nil || sr.Outcome != recall.Embedded || sr.EmbeddedTexts != 1 {
			t.Fatalf("catch-up sync: %+v %v", sr, err)
		}
		res = r.search(t, 1, recall.Query{Text: "staging host"})
		if res.Degraded || len(res.Hits) != 1 || res.Hits[0].Vector <= 0 {
			t.Fatalf("after catch-up the hit has a vector: %+v", res)
		}
	})
}

func TestOnlyChangedChunksAreEmbeddedAndDeletesRemove(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		r := newRig(t, db, true)
		ctx := context.Background()
		var b strings.Builder
		for i := 0; i < 5; i++ {
			b.WriteString("## Section " + string(rune('A'+i)) + "\n\nSome fact number " + string(rune('A'+i)) + " about the project.\n\n")
		}
		r.write(t, 1, "notes.md", b.String())
		first := r.emb.Texts.Load()
		if first != 5 {
			t.Fatalf("first write embeds 5 chunks, got %d", first)
		}
		if _, err := r.ws.Append(ctx, 1, "notes.md", "## Section F\n\nA new fact about kiwis.\n", "", workspace.Change{Actor: store.ActorTool}); err != nil {
			t.Fatal(err)
		}
		sr, err := r.ix.Sync(ctx, 1, "notes.md")
		if err != nil || sr.EmbeddedTexts != 1 || sr.Chunks != 6 {
			t.Fatalf("append must embed only the new chunk: %+v %v", sr, err)
		}
		// Redelivery: a second Sync changes nothing and calls nothing.
		calls := r.emb.Calls.Load()
		if sr, err := r.ix.Sync(ctx, 1, "notes.md"); err != nil || sr.Outcome != recall.Unchanged || r.emb.Calls.Load() != calls {
			t.Fatalf("second sync must be a no-op: %+v %v", sr, err)
		}
		if res := r.search(t, 1, recall.Query{Text: "kiwis"}); len(res.Hits) != 1 {
			t.Fatalf("kiwis: %+v", res)
		}
		if err := r.ws.Delete(ctx, 1, "notes.md", workspace.AnyVersion, workspace.Change{Actor: store.ActorTool}); err != nil {
			t.Fatal(err)
		}
		if sr, err := r.ix.Sync(ctx, 1, "notes.md"); err != nil || sr.Outcome != recall.Removed {
			t.Fatalf("delete: %+v %v", sr, err)
		}
		if res := r.search(t, 1, recall.Query{Text: "kiwis"}); len(res.Hits) != 0 {
			t.Fatalf("deleted file still found: %+v", res)
		}
		var n int64
		db.DB.Model(&store.RecallChunk{}).Where("agent_id = 1 AND filename = ?", "notes.md").Count(&n)
		if n != 0 {
			t.Fatalf("%d chunks of a deleted file left", n)
		}
	})
}

func TestDecayPrefersRecentAndFilters(t *testing.T) {
	r := newRig(t, storetest.SQLite(t), true)
	r.write(t, 1, "memory/2026-01-05.md", "# 2026-01-05\n\nThe team standup is at 9:00.\n")
	r.write(t, 1, "memory/archive/2026-05-28.md", "# 2026-05-28\n\nThe team standup moved to 10:30.\n")
	res := r.search(t, 1, recall.Query{Text: "team standup"})
	if len(res.Hits) < 1 || res.Hits[0].Filename != "memory/archive/2026-05-28.md" {
		t.Fatalf("the recent note (dated in a sub-folder) must rank first: %v", files(res))
	}
	res = r.search(t, 1, recall.Query{Text: "team standup", Until: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)})
	if len(res.Hits) != 1 || res.Hits[0].Filename != "memory/2026-01-05.md" {
		t.Fatalf("until filter: %v", files(res))
	}
	res = r.search(t, 1, recall.Query{Text: "team standup", FilenamePrefix: "memory/archive/"})
	if len(res.Hits) != 1 || res.Hits[0].Filename != "memory/archive/2026-05-28.md" {
		t.Fatalf("prefix filter: %v", files(res))
	}
}

func TestMMRDropsNearDuplicates(t *testing.T) {
	r := newRig(t, storetest.SQLite(t), true)
	same := "# Note\n\nThe user's cat is called Miso and eats salmon.\n"
	r.write(t, 1, "a.md", same)
	r.write(t, 1, "b.md", same)
	r.write(t, 1, "c.md", "# Pets\n\nThe user also has a dog called Pepper; the cat Miso hates it.\n")
	res := r.search(t, 1, recall.Query{Text: "cat Miso", MaxResults: 2})
	got := files(res)
	if len(got) != 2 || got[1] != "c.md" {
		t.Fatalf("MMR must prefer the different chunk over the duplicate as 2nd hit: %v", got)
	}
}

func TestCacheFollowsGenerationAndBudget(t *testing.T) {
	r := newRig(t, storetest.SQLite(t), false)
	r.write(t, 1, "MEMORY.md", "# Facts\n\nFavourite colour: teal.\n")
	if res := r.search(t, 1, recall.Query{Text: "colour"}); len(res.Hits) != 1 {
		t.Fatal(res)
	}
	// A write indexed elsewhere (another replica) is seen without any invalidation message.
	r.write(t, 1, "MEMORY.md", "# Facts\n\nFavourite colour: orange.\n")
	res := r.search(t, 1, recall.Query{Text: "colour"})
	if len(res.Hits) != 1 || !strings.Contains(res.Hits[0].Snippet, "orange") {
		t.Fatalf("stale cache: %+v", res)
	}
	small := recall.NewSearcher(r.db.DB, lexical.NewAnalyzer(), recall.Settings{CacheBytes: 3000})
	for a := int64(10); a < 20; a++ {
		r.write(t, a, "MEMORY.md", "# Facts\n\n"+strings.Repeat("filler words here ", 20)+"\n")
		if _, err := small.Search(context.Background(), a, recall.Query{Text: "filler"}); err != nil {
			t.Fatal(err)
		}
		if _, used := small.CacheStats(); used > 3000 {
			t.Fatalf("cache uses %d bytes > budget 3000", used)
		}
	}
	if n, _ := small.CacheStats(); n == 0 || n >= 10 {
		t.Fatalf("LRU must keep some but not all agents within the budget, keeps %d", n)
	}
}

func slogDiscard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A warm snapshot is refreshed file by file: a change of one file is seen, the other files'
// chunks stay, a deleted file's chunks go, and the result equals a cold build.
func TestIncrementalRefreshMatchesColdBuild(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		r := newRig(t, db, true)
		ctx := context.Background()
		r.write(t, 1, "memory/2026-05-01.md", "# 2026-05-01\n\nThe router is rt-lab-01.\n")
		r.write(t, 1, "memory/2026-05-02.md", "# 2026-05-02\n\nThe printer is pr-hall-02.\n")
		r.write(t, 1, "notes.md", "# Notes\n\nThe scanner is sc-desk-03.\n")
		_ = r.search(t, 1, recall.Query{Text: "router"}) // warm
		r.write(t, 1, "memory/2026-05-02.md", "# 2026-05-02\n\nThe printer moved; it is pr-roof-09 now.\n")
		if err := r.ws.Delete(ctx, 1, "notes.md", workspace.AnyVersion, workspace.Change{Actor: store.ActorTool}); err != nil {
			t.Fatal(err)
		}
		if _, err := r.ix.Sync(ctx, 1, "notes.md"); err != nil {
			t.Fatal(err)
		}
		warm := func(q string) []string {
			var out []string
			for _, h := range r.search(t, 1, recall.Query{Text: q}).Hits {
				out = append(out, h.Filename+":"+h.Snippet)
			}
			return out
		}
		got := map[string][]string{}
		for _, q := range []string{"router rt-lab-01", "printer", "pr-hall-02", "scanner sc-desk-03"} {
			got[q] = warm(q)
		}
		if len(got["router rt-lab-01"]) == 0 || !strings.Contains(strings.Join(got["printer"], " "), "pr-roof-09") ||
			strings.Contains(strings.Join(got["pr-hall-02"], " "), "pr-hall-02") || strings.Contains(strings.Join(got["scanner sc-desk-03"], " "), "sc-desk-03") {
			t.Fatalf("incremental refresh: %q", got)
		}
		r.se.Invalidate(1) // cold build from the database
		for q, want := range got {
			if cold := warm(q); strings.Join(cold, "|") != strings.Join(want, "|") {
				t.Errorf("%q: warm %q, cold %q", q, want, cold)
			}
		}
	})
}

// SyncFiles (several files of one agent at once, as the worker batches them) leaves exactly
// the chunks one Sync per file leaves: new, changed, unchanged and deleted files in one call,
// one generation bump for the files it chunks, and a second call changes nothing.
func TestSyncFilesMatchesSyncPerFile(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		r := newRig(t, db, true)
		ctx := context.Background()
		ch := workspace.Change{Actor: store.ActorTool}
		write := func(agent int64, name, content string) {
			if _, _, err := r.ws.Write(ctx, agent, name, content, workspace.AnyVersion, ch); err != nil {
				t.Fatal(err)
			}
		}
		// Agent 1 is indexed file by file, agent 2 in batches; same writes.
		names := append([]string{"memory/2026-05-01.md", "notes.md", "gone.md"}, workspace.CoreFiles...)
		for _, a := range []int64{1, 2} {
			write(a, "memory/2026-05-01.md", "# 2026-05-01\n\nThe router is rt-lab-01.\n")
			write(a, "notes.md", "# Notes\n\nThe scanner is sc-desk-03.\n")
			write(a, "gone.md", "# Gone\n\nSoon deleted.\n")
		}
		for _, n := range names {
			if _, err := r.ix.Sync(ctx, 1, n); err != nil {
				t.Fatal(err)
			}
		}
		res, err := r.ix.SyncFiles(ctx, 2, names)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if res[n].Outcome != recall.Indexed {
				t.Fatalf("%s: %+v, want indexed", n, res[n])
			}
		}
		generation := func(a int64) int64 {
			var ag store.RecallAgent
			if err := db.DB.Where("agent_id = ?", a).Take(&ag).Error; err != nil {
				t.Fatal(err)
			}
			return ag.Generation
		}
		if g := generation(2); g != 1 {
			t.Fatalf("generation %d after one batch, want 1 (one bump)", g)
		}
		// Then: a file grows, one is deleted, the rest stay.
		for _, a := range []int64{1, 2} {
			write(a, "memory/2026-05-01.md", "# 2026-05-01\n\nThe router is rt-lab-01.\n\nThe printer is pr-hall-02.\n")
			if err := r.ws.Delete(ctx, a, "gone.md", workspace.AnyVersion, ch); err != nil {
				t.Fatal(err)
			}
		}
		for _, n := range names {
			if _, err := r.ix.Sync(ctx, 1, n); err != nil {
				t.Fatal(err)
			}
		}
		if res, err = r.ix.SyncFiles(ctx, 2, names); err != nil {
			t.Fatal(err)
		}
		if res["memory/2026-05-01.md"].Outcome != recall.Indexed || res["gone.md"].Outcome != recall.Removed || res["notes.md"].Outcome != recall.Unchanged {
			t.Fatalf("second batch: %+v", res)
		}
		if res, err = r.ix.SyncFiles(ctx, 2, names); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if res[n].Changed() {
				t.Fatalf("a repeated batch changed %s: %+v", n, res[n])
			}
		}
		chunksOf := func(a int64) []string {
			var rows []store.RecallChunk
			if err := db.DB.Where("agent_id = ?", a).Order("filename, ordinal").Find(&rows).Error; err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, c := range rows {
				out = append(out, fmt.Sprintf("%s#%d %d-%d %s %q %q", c.Filename, c.Ordinal, c.StartLine, c.EndLine, c.Hash, c.Terms, c.Text))
			}
			return out
		}
		one, batched := chunksOf(1), chunksOf(2)
		if len(one) == 0 || strings.Join(one, "\n") != strings.Join(batched, "\n") {
			t.Fatalf("batched chunks differ from per-file chunks:\n%s\n---\n%s", strings.Join(batched, "\n"), strings.Join(one, "\n"))
		}
		for _, c := range batched {
			if strings.HasPrefix(c, "gone.md") {
				t.Fatal("the deleted file's chunks stayed")
			}
		}
		if !strings.Contains(strings.Join(files(r.search(t, 2, recall.Query{Text: "pr-hall-02"})), ","), "memory/2026-05-01.md") {
			t.Fatal("the grown note's new text is not found")
		}
	})
}

// Issue 19: a score comparable across queries. Nothing relevant gives auto-recall no hits
// (and says so), small talk and question words alone find nothing (issue 30: an explicit
// search ranks the matches, TestRelevanceApartFromRetrieval).
func TestNothingRelevantAnswersNoHits(t *testing.T) {
	r := newRig(t, storetest.SQLite(t), false)
	r.write(t, 1, "MEMORY.md", "# MEMORY\n\n- 用户喜欢乌龙茶。\n- The user works at Northwind Labs.\n")
	r.write(t, 1, "memory/2026-05-20.md", "# 2026-05-20\n\n今天主要在看文档，没有特别的事情。\n\n用户说下个月要去杭州出差。\n")
	// The last three share a word or two with a note (coverage 0.38 to 0.46): below the
	// floor, they are no hits; at half the floor they would be.
	partial := []string{"杭州的天气怎么样", "乌龙茶的价格", "what does Northwind sell"}
	for _, q := range append([]string{"你好", "谢谢，今天就到这里", "hi", "what is the user's blood type", "用户的护照号码是多少", "是什么"}, partial...) {
		res := r.search(t, 1, recall.Query{Text: q, Auto: true})
		if len(res.Hits) != 0 || res.Notice == "" {
			t.Errorf("%q: want no hits and a notice, got %d hits (%v), notice %q", q, len(res.Hits), files(res), res.Notice)
		}
	}
	half := recall.NewSearcher(r.db.DB, lexical.NewAnalyzer(), recall.Settings{MinCoverage: recall.DefaultMinCoverage / 2})
	for _, q := range partial {
		if res, err := half.Search(context.Background(), 1, recall.Query{Text: q}); err != nil || len(res.Hits) == 0 {
			t.Errorf("%q at half the floor: %v, %+v; want a hit (else this test cannot tell the floor from half of it)", q, err, res.Hits)
		}
	}
	for _, q := range []string{"杭州出差", "乌龙茶", "where does the user work"} {
		if res := r.search(t, 1, recall.Query{Text: q}); len(res.Hits) == 0 || res.Hits[0].Coverage < 0.6 {
			t.Errorf("%q: want a hit covering the query, got %+v", q, res.Hits)
		}
	}
}

// Issue 19: the newer note about the same thing first, even when the older one matches
// more of the query's words; the older one says what superseded it.
func TestNewerNoteSupersedesOlder(t *testing.T) {
	r := newRig(t, storetest.SQLite(t), false)
	r.write(t, 1, "memory/2026-05-01.md", "# 2026-05-01\n\n和供应商谈好了：最低起订量是 2000 件，低于最低起订量要加收运费。\n")
	r.write(t, 1, "memory/2026-05-20.md", "# 2026-05-20\n\n供应商同意把最低起订量降到 1500 件。\n")
	r.write(t, 1, "memory/2026-05-25.md", "# 2026-05-25\n\n供应商的发票到了。\n")
	res := r.search(t, 1, recall.Query{Text: "供应商最低起订量是多少"})
	if len(res.Hits) < 2 || res.Hits[0].Filename != "memory/2026-05-20.md" || res.Hits[1].SupersededBy != "memory/2026-05-20.md" {
		t.Fatalf("want the correction first and the older note marked superseded: %+v", res.Hits)
	}
}

// Issue 19: a fact restated on several days is one hit that says so; the changed statement
// gets a place of its own.
func TestRestatementsFoldIntoOneHit(t *testing.T) {
	r := newRig(t, storetest.SQLite(t), false)
	for _, d := range []string{"2026-05-01", "2026-05-03", "2026-05-05", "2026-05-07"} {
		r.write(t, 1, "memory/"+d+".md", "# "+d+"\n\n中午在老地方吃饭。\n\n家里的宽带是电信 300M。\n")
	}
	r.write(t, 1, "memory/2026-04-01.md", "# 2026-04-01\n\n家里的宽带是电信 1000M。\n")
	res := r.search(t, 1, recall.Query{Text: "家里宽带多少兆", MaxResults: 2})
	if len(res.Hits) != 2 {
		t.Fatalf("want the restated fact once and the other statement: %+v", res.Hits)
	}
	folded, other := res.Hits[0], res.Hits[1]
	if other.Stated != nil {
		folded, other = other, folded
	}
	if st := folded.Stated; st == nil || st.Days != 4 || st.Latest != "2026-05-07" || len(st.Files) != 3 {
		t.Errorf("one hit must say it was stated on 4 days, latest 2026-05-07: %+v", folded)
	}
	if other.Filename != "memory/2026-04-01.md" {
		t.Errorf("the other statement must be the other hit: %v", files(res))
	}
}

// Issue 19: versions with or without "v", identifiers glued to Chinese, one shared
// character is no match.
func TestIdentifiersAndVersions(t *testing.T) {
	r := newRig(t, storetest.SQLite(t), false)
	r.write(t, 1, "memory/2026-05-01.md", "# 2026-05-01\n\nUpgraded the gateway to v1.27.3 after the leak fix.\n")
	r.write(t, 1, "memory/2026-05-02.md", "# 2026-05-02\n\nstaging 集群现在跑的是 2.4.0 版本。\n")
	r.write(t, 1, "memory/2026-05-03.md", "# 2026-05-03\n\nPO-55812的交期是 12 月 3 日。\n\n包裹到了。\n")
	r.write(t, 1, "memory/2026-05-04.md", "# 2026-05-04\n\n交了房租。\n")
	for q, want := range map[string]string{"1.27.3": "memory/2026-05-01.md", "v2.4.0": "memory/2026-05-02.md", "PO-55812的交期": "memory/2026-05-03.md"} {
		res := r.search(t, 1, recall.Query{Text: q})
		if len(res.Hits) == 0 || res.Hits[0].Filename != want {
			t.Errorf("%q: want %s first, got %v", q, want, files(res))
		}
		if q == "PO-55812的交期" && (len(res.Hits) != 1 || res.Hits[0].Exact != 1) {
			t.Errorf("%q: the glued id must be boosted and the note sharing 交 not hit: %+v", q, res.Hits)
		}
	}
}

// TestArchiveIsSearchedAndDated: an archive note (memory/archive/YYYY-MM.md) is found by
// search, and each of its blocks is dated by its heading, not undated like a core file.
func TestArchiveIsSearchedAndDated(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		r := newRig(t, db, false)
		r.write(t, 1, "memory/archive/2026-05.md", "## 2026-05-03 10:00 · MEMORY.md · demotion · run r1\n\n- PO-55812 ships on 2026-06-20\n"+
			"<!-- under Orders, MEMORY.md v4 -->\n\n## 2026-05-20 08:00 · MEMORY.md · consolidation · run r2\n\n- the supplier of part 7 is Acme\n")
		res := r.search(t, 1, recall.Query{Text: "PO-55812"})
		if len(res.Hits) == 0 || res.Hits[0].Filename != "memory/archive/2026-05.md" || !res.Hits[0].Dated || res.Hits[0].Date != "2026-05-03" {
			t.Fatalf("PO-55812: %+v", res.Hits)
		}
		res = r.search(t, 1, recall.Query{Text: "supplier of part 7"})
		if len(res.Hits) == 0 || res.Hits[0].Date != "2026-05-20" {
			t.Fatalf("supplier: %+v", res.Hits)
		}
	})
}

// Many refreshes in a row (files added, rewritten, deleted), each indexing only what
// changed as a new segment, give after every one the answers of a cold build, scores
// included; the small segments are merged, and the snapshot's bytes count what its
// segments still hold of removed chunks.
func TestSegmentedRefreshMatchesColdBuild(t *testing.T) {
	r := newRig(t, storetest.SQLite(t), true)
	ctx := context.Background()
	cold := recall.NewSearcher(r.db.DB, lexical.NewAnalyzer(), recall.Settings{},
		recall.SearchWithEmbedder(embed.NewOpenAI(r.emb.Config())), recall.SearchWithClock(func() time.Time { return now }))
	words := strings.Fields("router printer scanner moved deploy staging rt-lab-01 pr-roof-09 coffee tea budget raised 咖啡 部署 改到 预算 invoice ORD-2026-0042 weekly sync")
	rnd := rand.New(rand.NewSource(3))
	text := func() string {
		var b strings.Builder
		for p := 1 + rnd.Intn(3); p > 0; p-- {
			b.WriteString("\n- ")
			for w := 3 + rnd.Intn(8); w > 0; w-- {
				b.WriteString(words[rnd.Intn(len(words))] + " ")
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	var names []string
	for d := 1; d <= 12; d++ {
		name := fmt.Sprintf("memory/2026-05-%02d.md", d)
		names = append(names, name)
		r.write(t, 1, name, "# 2026-05-"+name[15:17]+"\n"+text())
	}
	queries := []string{"router moved", "deploy staging", "咖啡 预算", "budget raised", "ORD-2026-0042", "weekly sync tea"}
	answers := func(se *recall.Searcher) string {
		var b strings.Builder
		for _, q := range queries {
			res, err := se.Search(ctx, 1, recall.Query{Text: q})
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%q: %+v\n", q, res.Hits)
		}
		return b.String()
	}
	_ = answers(r.se) // warm
	most := 0
	for round := 0; round < 30; round++ {
		switch op := rnd.Intn(4); {
		case op == 0 && len(names) > 4:
			k := rnd.Intn(len(names))
			if err := r.ws.Delete(ctx, 1, names[k], workspace.AnyVersion, workspace.Change{Actor: store.ActorTool}); err != nil {
				t.Fatal(err)
			}
			if _, err := r.ix.Sync(ctx, 1, names[k]); err != nil {
				t.Fatal(err)
			}
			names = append(names[:k], names[k+1:]...)
		case op == 1:
			name := fmt.Sprintf("memory/2026-06-%02d.md", 1+round%28)
			names = append(names, name)
			r.write(t, 1, name, "# 2026-06-"+name[15:17]+"\n"+text())
		default:
			name := names[rnd.Intn(len(names))]
			r.write(t, 1, name, "# "+name[7:17]+"\n"+text())
		}
		warm := answers(r.se)
		segs, bytes := r.se.Segments(1)
		if !r.se.InOrder(1) {
			t.Fatalf("round %d: the chunks are not in file order", round)
		}
		most = max(most, segs)
		cold.Invalidate(1)
		if want := answers(cold); warm != want {
			t.Fatalf("round %d: incremental\n%s\ncold build\n%s", round, warm, want)
		}
		if coldSegs, coldBytes := cold.Segments(1); coldSegs != 1 || (segs > 1 && bytes <= coldBytes) {
			t.Fatalf("round %d: %d segments of %d bytes, cold build %d of %d: removed chunks the segments hold must count", round, segs, bytes, coldSegs, coldBytes)
		}
	}
	if most < 3 || most > 9 {
		t.Fatalf("at most %d segments: want several, merged before they exceed 9", most)
	}
	// The compaction's snapshot (one segment) answers the same.
	warm := answers(r.se)
	if !r.se.Compact(1) {
		t.Fatal("the compacted snapshot did not replace the cached one")
	}
	if segs, _ := r.se.Segments(1); segs != 1 || !r.se.InOrder(1) {
		t.Fatalf("compacted: %d segments, in order %v", segs, r.se.InOrder(1))
	}
	if got := answers(r.se); got != warm {
		t.Fatalf("compacted\n%s\nbefore\n%s", got, warm)
	}
}

// A large agent's snapshot is written to a file after a cold build; a new searcher loads
// it from there, reads only what changed since, and answers as a cold build from the
// database. A truncated, corrupted, foreign or older-format file is ignored and removed;
// Forget (an erasure) removes the file.
func TestSnapshotFiles(t *testing.T) {
	r := newRig(t, storetest.SQLite(t), true)
	ctx := context.Background()
	dir := t.TempDir()
	emb := embed.NewOpenAI(r.emb.Config())
	searcher := func(opts ...recall.SearcherOption) *recall.Searcher {
		return recall.NewSearcher(r.db.DB, lexical.NewAnalyzer(), recall.Settings{},
			append([]recall.SearcherOption{recall.SearchWithEmbedder(emb), recall.SearchWithClock(func() time.Time { return now })}, opts...)...)
	}
	withFiles := func() *recall.Searcher { return searcher(recall.SearchWithSnapshotFiles(dir, 1)) }
	for d := 1; d <= 6; d++ {
		r.write(t, 1, fmt.Sprintf("memory/2026-05-%02d.md", d), fmt.Sprintf("# 2026-05-%02d\n\n- The router is rt-lab-%02d.\n- Coffee budget raised to %d.\n", d, d, d*10))
		r.write(t, 2, "MEMORY.md", fmt.Sprintf("# Facts\n\n- Agent two's router is rt-two-%02d.\n", d))
	}
	queries := []string{"router rt-lab-03", "coffee budget raised", "rt-two-06", "rt-roof-09"}
	answers := func(se *recall.Searcher, agent int64) string {
		var b strings.Builder
		for _, q := range queries {
			res, err := se.Search(ctx, agent, recall.Query{Text: q})
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%q: %+v\n", q, res.Hits)
		}
		return b.String()
	}
	written := func(agent int64) []byte {
		t.Helper()
		var b []byte
		poll.Until(t, 10*time.Second, "the snapshot file", func() bool {
			var err error
			b, err = os.ReadFile(recall.SnapshotPath(dir, agent))
			return err == nil
		})
		return b
	}
	first := withFiles()
	want1, want2 := answers(first, 1), answers(first, 2)
	file1, file2 := written(1), written(2)
	if !bytes.Contains(file1, []byte("rt-lab-03")) || bytes.Contains(file1, []byte("rt-two")) {
		t.Fatal("agent 1's file must hold its chunks and no other agent's")
	}
	// A new process: the file, nothing read again.
	before, err := os.Stat(recall.SnapshotPath(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	se := withFiles()
	if got := answers(se, 1); got != want1 || !se.FromFile(1) {
		t.Fatalf("from the file (%v):\n%s\nwant\n%s", se.FromFile(1), got, want1)
	}
	if after, err := os.Stat(recall.SnapshotPath(dir, 1)); err != nil || !os.SameFile(before, after) || se.StaleFiles() != 0 {
		t.Fatalf("a file that matches the database must be used as it is (%d found stale, %v)", se.StaleFiles(), err)
	}
	// A change since the file was written: read from the database, the file replaced.
	r.write(t, 1, "memory/2026-05-03.md", "# 2026-05-03\n\n- The router moved; it is rt-roof-09 now.\n")
	se = withFiles()
	cold := answers(searcher(), 1)
	if got := answers(se, 1); got != cold || !se.FromFile(1) || se.StaleFiles() != 1 || !strings.Contains(got, "rt-roof-09") {
		t.Fatalf("from the file (%v) and the change:\n%s\nwant\n%s", se.FromFile(1), got, cold)
	}
	poll.Until(t, 10*time.Second, "the file written again after the change", func() bool {
		b, err := os.ReadFile(recall.SnapshotPath(dir, 1))
		return err == nil && bytes.Contains(b, []byte("rt-roof-09"))
	})
	file1 = written(1)
	// Bad files: each ignored (the answers are the database's) and removed.
	magic := append([]byte(nil), file1...)
	magic[7]++
	flipped := append([]byte(nil), file1...)
	flipped[len(flipped)/2] ^= 0x40
	for name, bad := range map[string][]byte{"truncated": file1[:len(file1)-100], "flipped": flipped, "format version": magic,
		"another agent's": file2, "empty": {}} {
		if err := os.WriteFile(recall.SnapshotPath(dir, 1), bad, 0o600); err != nil {
			t.Fatal(err)
		}
		se := withFiles()
		if got := answers(se, 1); got != cold || se.FromFile(1) {
			t.Fatalf("%s file: from file %v\n%s\nwant\n%s", name, se.FromFile(1), got, cold)
		}
		poll.Until(t, 10*time.Second, name+" file replaced", func() bool {
			b, err := os.ReadFile(recall.SnapshotPath(dir, 1))
			return err == nil && bytes.Equal(b, file1) // removed, then written again from the database
		})
	}
	// A file deleted while the agent is cached: its chunks leave the snapshot file too.
	if !bytes.Contains(file1, []byte("rt-lab-05")) {
		t.Fatal("the file lacks memory/2026-05-05.md's chunk")
	}
	if err := r.ws.Delete(ctx, 1, "memory/2026-05-05.md", workspace.AnyVersion, workspace.Change{Actor: store.ActorTool}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ix.Sync(ctx, 1, "memory/2026-05-05.md"); err != nil {
		t.Fatal(err)
	}
	_ = answers(se, 1)
	poll.Until(t, 10*time.Second, "the file written again without the deleted file", func() bool {
		b, err := os.ReadFile(recall.SnapshotPath(dir, 1))
		return err == nil && !bytes.Contains(b, []byte("rt-lab-05")) && bytes.Contains(b, []byte("rt-lab-04"))
	})
	if err := se.Forget(1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(recall.SnapshotPath(dir, 1)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Forget left the file: %v", err)
	}
	if got := answers(withFiles(), 2); got != want2 {
		t.Fatalf("agent 2 from its file:\n%s\nwant\n%s", got, want2)
	}
}

// Issue 19: a chunk is scored by its best fact. A note whose one sentence answers the query
// ranks above a note whose lines each hold a word of it; a newer sentence that restates an
// older one about another thing (prod, not staging) does not supersede it; a hyphenated
// compound is found written as one word; the words naming the kind of answer wanted (date,
// 日期) do not keep a note that gives the answer below the floor.
func TestFactsDecideRanking(t *testing.T) {
	r := newRig(t, storetest.SQLite(t), false)
	r.write(t, 1, "memory/2026-05-10.md", "# 2026-05-10\n\nA long day of planning: the team went through the roadmap, hiring and the budget for next quarter.\n\n"+
		"The staging job runner lives on web-staging-14.\n")
	r.write(t, 1, "memory/2026-05-11.md", "# 2026-05-11\n\nJob runner: dev lives on cache-dev-02.\n\nStaging: TLS renewed.\n")
	for d := 1; d <= 5; d++ { // staging is a common word here: it does not make two notes' subjects differ
		r.write(t, 1, fmt.Sprintf("memory/2026-04-0%d.md", d), fmt.Sprintf("# 2026-04-0%d\n\nThe staging deploy %d went fine.\n", d, d))
	}
	r.write(t, 1, "memory/2026-05-12.md", "# 2026-05-12\n\nThe prod job runner now lives on api-prod-40.\n")
	r.write(t, 1, "memory/2026-05-13.md", "# 2026-05-13\n\nThe Wi-Fi password hint is 'blue heron'.\n\nThe user's birthday is on 14 March.\n")
	res := r.search(t, 1, recall.Query{Text: "where does the staging job runner live"})
	if len(res.Hits) == 0 || res.Hits[0].Filename != "memory/2026-05-10.md" || res.Hits[0].SupersededBy != "" {
		t.Fatalf("the one sentence about the staging runner must come first, not superseded: %+v", res.Hits)
	}
	for _, q := range []string{"wifi password hint", "user birthday date"} {
		if res := r.search(t, 1, recall.Query{Text: q}); len(res.Hits) == 0 || res.Hits[0].Filename != "memory/2026-05-13.md" {
			t.Errorf("%q: want memory/2026-05-13.md first, got %v", q, files(res))
		}
	}
}

// What searches analyse and keep in an agent's snapshot (chunks' sentences and their terms)
// counts in the cache's budget beside the snapshot itself.
func TestCacheCountsWhatSearchesAnalyse(t *testing.T) {
	r := newRig(t, storetest.SQLite(t), false)
	r.write(t, 1, "MEMORY.md", "# Facts\n\nFavourite colour: teal.\nThe office moved to Lisbon.\n")
	se := recall.NewSearcher(r.db.DB, lexical.NewAnalyzer(), recall.Settings{CacheBytes: 1 << 20})
	if _, err := se.Search(context.Background(), 1, recall.Query{Text: "colour"}); err != nil {
		t.Fatal(err)
	}
	_, snap := se.Segments(1)
	_, used := se.CacheStats()
	if snap == 0 || used <= snap {
		t.Fatalf("the cache counts %d bytes for a snapshot of %d: the analysed sentences are not counted", used, snap)
	}
	// The next search reads the same analysis: nothing more is counted.
	if _, err := se.Search(context.Background(), 1, recall.Query{Text: "colour"}); err != nil {
		t.Fatal(err)
	}
	if _, again := se.CacheStats(); again != used {
		t.Fatalf("the same search counted %d more bytes", again-used)
	}
}
