package consolidate

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/archive"
	"github.com/matememory/matememory/pkg/internal/blame"
	"github.com/matememory/matememory/pkg/internal/tokens"
)

// A model answer: the new content the model proposes for a core file, from the current one.
type behaviour func(r *rand.Rand, cur string, step int) string

func fact(r *rand.Rand, step int) string {
	return fmt.Sprintf("F-%04d-%d: customer C-%d ships on day %d", step, r.Intn(100), r.Intn(1000), r.Intn(30))
}

var behaviours = map[string]behaviour{
	// well-behaved: one new entry under the facts' section.
	"well-behaved": func(r *rand.Rand, cur string, step int) string {
		if !strings.Contains(cur, "## Facts\n") {
			cur = strings.TrimRight(cur, "\n") + "\n\n## Facts\n"
		}
		return strings.Replace(cur, "## Facts\n", "## Facts\n- "+fact(r, step)+"\n", 1)
	},
	// whole-file rewriter: keeps some lines, rewords some, drops the rest, adds one.
	"rewriter": func(r *rand.Rand, cur string, step int) string {
		var out []string
		for _, l := range strings.Split(cur, "\n") {
			switch x := r.Intn(10); {
			case x < 6:
				out = append(out, l)
			case x < 8 && strings.HasPrefix(l, "- "):
				out = append(out, l+" (confirmed)")
			}
		}
		return strings.Join(out, "\n") + "\n- " + fact(r, step) + "\n"
	},
	// section-per-fact: every fact under a heading of its own.
	"section-per-fact": func(r *rand.Rand, cur string, step int) string {
		return strings.TrimRight(cur, "\n") + fmt.Sprintf("\n\n## Topic T-%04d\n\n- %s\n", step, fact(r, step))
	},
	// verbose: a long paragraph, now and then one bigger than a quarter of the budget.
	"verbose": func(r *rand.Rand, cur string, step int) string {
		n := 8 + r.Intn(12)
		if r.Intn(4) == 0 {
			n = 60
		}
		words := make([]string, n)
		for i := range words {
			words[i] = fmt.Sprintf("filler%d", r.Intn(500))
		}
		return strings.TrimRight(cur, "\n") + "\n\n" + fact(r, step) + " " + strings.Join(words, " ") + ".\n"
	},
	// garbage: shapes a line-based reader mistakes for headings or structure, and random
	// removals of whatever is there (sub-items, heading lines, code).
	"garbage": func(r *rand.Rand, cur string, step int) string {
		lines := strings.Split(strings.TrimRight(cur, "\n"), "\n")
		for i := 0; i < len(lines); i++ {
			if r.Intn(6) == 0 {
				lines = append(lines[:i], lines[i+1:]...)
				i--
			}
		}
		shapes := []string{
			fmt.Sprintf("#PO-%d ships Friday", step),
			fmt.Sprintf("```\n# comment %d in code\nrun --step %d\n```", step, step),
			fmt.Sprintf("## PO-%d ships on Monday", step),
			fmt.Sprintf("- item %d\n  - sub %d: %s\n  - sub %d-b", step, step, fact(r, step), step),
			fmt.Sprintf("Setext %d\n---", step),
			fmt.Sprintf("> quoted %d\n> %s", step, fact(r, step)),
			fmt.Sprintf("1. numbered %d\n2. %s", step, fact(r, step)),
			fmt.Sprintf("<!-- note %d -->", step),
			fmt.Sprintf("    indented code %d", step),
		}
		lines = append(lines, "", shapes[r.Intn(len(shapes))])
		return strings.Join(lines, "\n") + "\n"
	},
}

// Whatever sequence of answers a model gives, every version the fit commits is within the
// budget, and every line that leaves the file (dropped by the answer or demoted by the
// service), whatever its shape, is in the archive verbatim (issue 29).
func TestFitKeepsTheBoundAndTheArchive(t *testing.T) {
	count := tokens.NewCounter().Estimator().Count
	names := []string{"well-behaved", "rewriter", "section-per-fact", "verbose", "garbage"}
	for seed := int64(1); seed <= 40; seed++ {
		r := rand.New(rand.NewSource(seed))
		budget := []int{60, 150, 400}[r.Intn(3)]
		cur := "# MEMORY.md\n"
		revs := []blame.Revision{{Content: cur, Change: blame.Change{Version: 1, Actor: "api"}}}
		at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.FixedZone("CST", 8*3600))
		for step := 1; step <= 60; step++ {
			name := names[r.Intn(len(names))]
			after := behaviours[name](r, cur, step)
			change := blame.Change{Version: int64(len(revs) + 1), Actor: "summarizer", Ref: fmt.Sprintf("run-%d", step), Time: at}
			history := func() []blame.Revision { return revs[max(0, len(revs)-8):] }
			f := Fit(cur, after, count, budget, history, change)
			if n := count(f.Content); n > budget {
				t.Fatalf("seed %d step %d (%s): %d tokens, budget %d:\n%s", seed, step, name, n, budget, f.Content)
			}
			arch := strings.Join(f.Parts("MEMORY.md", archive.ReasonRewrite, change.Ref, at, 2048), "\n")
			have := map[string]bool{}
			for _, l := range strings.Split(f.Content+"\n"+arch, "\n") {
				have[l] = true
			}
			for _, l := range strings.Split(cur+"\n"+after, "\n") {
				if strings.TrimSpace(l) != "" && !have[l] {
					t.Fatalf("seed %d step %d (%s): %q left the file and is not in the archive:\nbefore:\n%s\nanswer:\n%s\nkept:\n%s\narchive:\n%s",
						seed, step, name, l, cur, after, f.Content, arch)
				}
			}
			for _, p := range f.Parts("MEMORY.md", archive.ReasonRewrite, change.Ref, at, 2048) {
				if len(p) > 2048 {
					t.Fatalf("an archive block of %d bytes, max 2048", len(p))
				}
			}
			cur = f.Content
			revs = append(revs, blame.Revision{Content: cur, Change: change})
		}
	}
}
