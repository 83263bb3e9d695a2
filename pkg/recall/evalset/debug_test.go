package evalset_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/recall"
	"github.com/matememory/matememory/pkg/recall/evalset"
	"github.com/matememory/matememory/pkg/recall/lexical"
	"github.com/matememory/matememory/pkg/store/storetest"
	"github.com/matememory/matememory/pkg/workspace"
)

func TestDebugCoverage(t *testing.T) {
	if os.Getenv("DEBUG_EVAL") == "" {
		t.Skip()
	}
	set, _ := evalset.Default()
	ctx := context.Background()
	db := storetest.SQLite(t)
	an := lexical.NewAnalyzer()
	clock := func() time.Time { return set.Now }
	ws := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"), workspace.WithClock(clock))
	ix := recall.NewIndexer(db.DB, an, recall.Settings{}, recall.WithClock(clock))
	if err := evalset.Seed(ctx, ws, ix, 1, set); err != nil {
		t.Fatal(err)
	}
	se := recall.NewSearcher(db.DB, an, recall.Settings{}, recall.SearchWithClock(clock))
	var gold, none []float64
	kinds := strings.Split(os.Getenv("DEBUG_EVAL"), ",")
	for _, q := range set.Queries {
		res, err := se.Search(ctx, 1, recall.Query{Text: q.Query, MaxResults: 10})
		if err != nil {
			t.Fatal(err)
		}
		top := 0.0
		if len(res.Hits) > 0 {
			top = res.Hits[0].Coverage
		}
		if len(q.Gold) == 0 {
			none = append(none, top)
			if kinds[0] == "all" || contains(kinds, q.Kind) {
				h := ""
				if len(res.Hits) > 0 {
					h = res.Hits[0].Snippet
				}
				fmt.Printf("NONE %-12s %.2f %q -> %.60q\n", q.Kind, top, q.Query, h)
			}
			continue
		}
		g := -1.0
		rank := -1
		for r, h := range res.Hits {
			if h.Filename == q.Gold[0].File && strings.Contains(h.Snippet, q.Gold[0].Contains) {
				g, rank = h.Coverage, r
				break
			}
		}
		gold = append(gold, g)
		if kinds[0] == "all" || contains(kinds, q.Kind) {
			if rank != 0 {
				fmt.Printf("GOLD %-12s rank %d cov %.2f %q", q.Kind, rank, g, q.Query)
				for r, h := range res.Hits[:min(3, len(res.Hits))] {
					fmt.Printf("\n     %d %.3f cov %.2f sup %s %s %.70q", r, h.Score, h.Coverage, h.SupersededBy, h.Filename, h.Snippet)
				}
				fmt.Println()
			}
		}
	}
	sort.Float64s(gold)
	sort.Float64s(none)
	for _, th := range []float64{0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8} {
		tp, fp := 0, 0
		for _, g := range gold {
			if g >= th {
				tp++
			}
		}
		for _, n := range none {
			if n >= th {
				fp++
			}
		}
		fmt.Printf("floor %.2f: gold kept %d/%d, no-answer with hits %d/%d\n", th, tp, len(gold), fp, len(none))
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}
