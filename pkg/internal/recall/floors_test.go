package recall_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/recall/embed"
	"github.com/matememory/matememory/pkg/internal/recall/embed/embedtest"
	"github.com/matememory/matememory/pkg/internal/recall/lexical"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// cosineServer is an OpenAI embeddings endpoint whose vectors the test chooses: a text
// holding "quarterly" is the query, (1, 0, 0, 0); a text holding one of cos's words has that
// cosine with the query; any other text is orthogonal to it.
func cosineServer(t *testing.T, cos map[string]float64) embed.Config {
	return embedtest.NewWith(t, 4, func(text string) []float32 {
		if strings.Contains(text, "quarterly") {
			return []float32{1, 0, 0, 0}
		}
		for w, c := range cos {
			if strings.Contains(text, w) {
				return []float32{float32(c), float32(math.Sqrt(1 - c*c)), 0, 0}
			}
		}
		return []float32{0, 0, 0, 1}
	}).Config()
}

// A chunk that shares no word with the query is relevant on its cosine alone only when that
// cosine reaches MinCosine (0.8 by default): 0.85 is, 0.75 is not, however many results are
// asked for. Auto-recall keeps only relevant hits; an explicit search returns all three,
// with the floor at relevance 0.5.
func TestCosineFloorDecidesVectorOnlyHits(t *testing.T) {
	db := storetest.SQLite(t)
	e := embed.NewOpenAI(cosineServer(t, map[string]float64{"zebra": 0.85, "falcon": 0.75, "otter": 0.5}))
	an := lexical.NewAnalyzer()
	ws := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"))
	ix := recall.NewIndexer(db.DB, an, recall.Settings{}, recall.WithEmbedder(e))
	for name, text := range map[string]string{
		"notes/zebra.md":  "# Savanna\n\nThe zebra herd crossed the river at dawn.\n",
		"notes/falcon.md": "# Cliffs\n\nA falcon nests above the old quarry.\n",
		"notes/otter.md":  "# Coast\n\nAn otter cracks mussels on its belly.\n",
	} {
		if _, _, err := ws.Write(context.Background(), 1, name, text, workspace.AnyVersion, workspace.Change{Actor: store.ActorTool}); err != nil {
			t.Fatal(err)
		}
		if res, err := ix.Sync(context.Background(), 1, name); err != nil || res.EmbedPending {
			t.Fatalf("index %s: %+v %v", name, res, err)
		}
	}
	search := func(set recall.Settings) recall.Result {
		se := recall.NewSearcher(db.DB, an, set, recall.SearchWithEmbedder(e))
		res, err := se.Search(context.Background(), 1, recall.Query{Text: "quarterly budget review", MaxResults: 10, Auto: true})
		if err != nil {
			t.Fatal(err)
		}
		if res.Mode != recall.ModeHybrid {
			t.Fatalf("mode %q (%s); want hybrid", res.Mode, res.Notice)
		}
		return res
	}
	res := search(recall.Settings{})
	if got := files(res); len(got) != 1 || got[0] != "notes/zebra.md" {
		t.Fatalf("hits %v (%+v); want only notes/zebra.md (cosine 0.85 ≥ 0.8; falcon 0.75 and otter 0.5 below)", got, res.Hits)
	}
	if h := res.Hits[0]; math.Abs(h.Vector-0.85) > 0.01 || h.Coverage != 0 {
		t.Errorf("hit %+v; want vector 0.85 and coverage 0 (a hit on its cosine alone)", h)
	}
	// The floor is the setting: at 0.7 the falcon clears it too; the otter never does.
	if got := files(search(recall.Settings{MinCosine: 0.7})); len(got) != 2 || got[0] != "notes/zebra.md" || got[1] != "notes/falcon.md" {
		t.Errorf("MinCosine 0.7: hits %v; want zebra then falcon", got)
	}
	// An explicit search returns every match; the floor is where relevance crosses 0.5.
	se := recall.NewSearcher(db.DB, an, recall.Settings{}, recall.SearchWithEmbedder(e))
	all, err := se.Search(context.Background(), 1, recall.Query{Text: "quarterly budget review", MaxResults: 10})
	if err != nil {
		t.Fatal(err)
	}
	rel := map[string]float64{}
	for _, h := range all.Hits {
		rel[h.Filename] = h.Relevance
	}
	if len(rel) != 3 || rel["notes/zebra.md"] < 0.5 || rel["notes/falcon.md"] >= 0.5 || rel["notes/otter.md"] >= rel["notes/falcon.md"] {
		t.Errorf("explicit search relevances %v; want zebra ≥ 0.5 > falcon > otter", rel)
	}
}

// The rebuild of files indexed by an older format reads a page of them at a time: a
// newer version's rows (a rolling update, format above IndexFormat) must not fill that
// page, or an older file sorted after 500 of them is never built again.
func TestNewerFormatRowsDoNotStarveTheRebuild(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		r := newRig(t, db, false)
		nc, js := connect(t)
		w := recall.NewWorker(js, nc, db.DB, r.ix, slogDiscard(), time.Hour)
		// Agent 8's one file, to be marked as indexed by an older version.
		r.write(t, 8, "memory/2026-05-30.md", "# 2026-05-30\n\nThe Wi-Fi password hint changed to 'red kite'.\n")
		// Agent 3 (sorted first) has 500 files a newer version indexed, written last (an hour
		// ahead: the reconciler's watermark sweep, which looks back 5 minutes, never meets agent
		// 8's file again, so only the rebuild of older formats can reach it).
		at := time.Now().UTC().Add(time.Hour)
		var rows []store.WorkspaceFile
		for i := range 500 {
			rows = append(rows, store.WorkspaceFile{AgentID: 3, Filename: fmt.Sprintf("notes/n%03d.md", i), Content: "x\n",
				FileSize: 2, Enabled: true, Version: 1, CreateTime: at, UpdateTime: at})
		}
		if err := db.DB.CreateInBatches(&rows, 100).Error; err != nil {
			t.Fatal(err)
		}
		var recs []store.RecallFile
		for _, f := range rows {
			recs = append(recs, store.RecallFile{AgentID: 3, Filename: f.Filename, FileID: f.ID, Version: 1, Chunks: 1, IndexTime: at, Format: recall.IndexFormat + 1})
		}
		if err := db.DB.CreateInBatches(&recs, 100).Error; err != nil {
			t.Fatal(err)
		}
		if _, err := w.Reconcile(ctx); err != nil { // the watermark sweep: everything is current
			t.Fatal(err)
		}
		if err := db.DB.Model(&store.RecallFile{}).Where("agent_id = 8 AND filename = ?", "memory/2026-05-30.md").Update("format", 0).Error; err != nil {
			t.Fatal(err)
		}
		rep, err := w.Reconcile(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var f store.RecallFile
		if err := db.DB.Where("agent_id = 8 AND filename = ?", "memory/2026-05-30.md").Take(&f).Error; err != nil {
			t.Fatal(err)
		}
		if f.Format != recall.IndexFormat || rep.Changed != 1 {
			t.Fatalf("after a reconcile: the older file's format is %d (want %d), %+v; 500 newer-format rows starved the rebuild", f.Format, recall.IndexFormat, rep)
		}
		var newer int64
		db.DB.Model(&store.RecallFile{}).Where("agent_id = 3 AND format = ?", recall.IndexFormat+1).Count(&newer)
		if newer != 500 {
			t.Errorf("%d of the newer version's 500 rows left as they were", newer)
		}
	})
}
