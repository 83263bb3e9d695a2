package blame

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func rev(v int64, actor, content string) Revision {
	return Revision{Content: content, Change: Change{Version: v, Actor: actor, Action: "write", Ref: fmt.Sprintf("run-%d", v),
		Time: time.Date(2026, 1, int(v), 0, 0, 0, 0, time.UTC)}}
}

func TestAnnotate(t *testing.T) {
	revs := []Revision{
		rev(1, "seed", "# MEMORY\n- a\n- b"),
		rev(2, "summarizer", "# MEMORY\n- a\n- b\n- c\n"),
		rev(3, "summarizer", "# MEMORY\n- a\n- c\n"),           // b removed
		rev(4, "api", "# MEMORY\n- a\n- c\n"),                  // flags only: confirms nothing
		rev(5, "emergence", "# MEMORY\n## People\n- c\n- a\n"), // a moved below c, heading new
	}
	got := Annotate(revs)
	want := []struct {
		text             string
		intro, confirmed int64
	}{
		{"# MEMORY", 1, 5},
		{"## People", 5, 5},
		{"- c", 2, 5},
		{"- a", 1, 5},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Number != i+1 || g.Text != w.text || g.Introduced.Version != w.intro || g.Confirmed.Version != w.confirmed {
			t.Errorf("line %d: got #%d %q introduced v%d confirmed v%d, want %q v%d v%d", i+1, g.Number, g.Text,
				g.Introduced.Version, g.Confirmed.Version, w.text, w.intro, w.confirmed)
		}
	}
	if got[2].Introduced.Actor != "summarizer" || got[2].Introduced.Ref != "run-2" {
		t.Errorf("- c introduced by %+v", got[2].Introduced)
	}
	if Annotate(nil) != nil {
		t.Error("no revisions: want nil")
	}
}

// TestAnnotateAgainstReplay checks the invariants on random histories: the lines are the last
// content's, each line's origin is a version that held its text while the version before did
// not (or held fewer copies), and no line is confirmed before it was introduced.
func TestAnnotateAgainstReplay(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 200; n++ {
		var revs []Revision
		var lines []string
		for v := int64(1); v <= 12; v++ {
			switch op := r.IntN(4); {
			case op == 0 || len(lines) == 0:
				lines = append(lines, fmt.Sprintf("- fact %d.%d", v, r.IntN(3)))
			case op == 1:
				i := r.IntN(len(lines))
				lines = append(lines[:i], lines[i+1:]...)
			case op == 2:
				i, j := r.IntN(len(lines)), r.IntN(len(lines))
				lines[i], lines[j] = lines[j], lines[i]
			default:
				lines[r.IntN(len(lines))] = fmt.Sprintf("- changed %d", v)
			}
			content := ""
			if len(lines) > 0 {
				content = strings.Join(lines, "\n") + "\n"
			}
			revs = append(revs, rev(v, "summarizer", content))
		}
		got := Annotate(revs)
		if len(got) != len(lines) {
			t.Fatalf("history %d: %d lines, want %d", n, len(got), len(lines))
		}
		for i, l := range got {
			if l.Text != lines[i] {
				t.Fatalf("history %d line %d: %q, want %q", n, i+1, l.Text, lines[i])
			}
			held := revs[l.Introduced.Version-1].Content
			if !strings.Contains("\n"+held, "\n"+l.Text+"\n") {
				t.Fatalf("history %d: %q introduced by v%d, which does not hold it", n, l.Text, l.Introduced.Version)
			}
			if l.Confirmed.Version < l.Introduced.Version {
				t.Fatalf("history %d: %q confirmed v%d before introduced v%d", n, l.Text, l.Confirmed.Version, l.Introduced.Version)
			}
			if l.Introduced.Version > 1 && strings.Contains("\n"+revs[l.Introduced.Version-2].Content, "\n"+l.Text+"\n") {
				// The version before held the text too: only a second copy may be new.
				if strings.Count(revs[l.Introduced.Version-1].Content, l.Text+"\n") <= strings.Count(revs[l.Introduced.Version-2].Content, l.Text+"\n") {
					t.Fatalf("history %d: %q blamed on v%d but v%d held it already", n, l.Text, l.Introduced.Version, l.Introduced.Version-1)
				}
			}
		}
	}
}
