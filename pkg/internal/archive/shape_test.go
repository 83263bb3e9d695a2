package archive

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/blame"
)

// Lines that look like headings but are not (a "#" with no space, a "#" comment in a code
// block), and a real heading carrying a fact, are archived when a change removes them:
// whatever leaves a core file, whatever its shape, is in the archive verbatim (issue 29).
func TestRemovedWhateverItsShape(t *testing.T) {
	before := "# MEMORY.md\n\n## Orders\n#PO-55812 ships Friday\n- PO-1 ships Monday\n\n```sh\n# deploy with --canary\nmake deploy\n```\n\n## PO-777 was cancelled on 2026-11-02\n\n## Team\n- lead: Chen\n  - deputy: Li (ID-4411)\n"
	after := "# MEMORY.md\n\n## Orders\n- PO-1 ships Monday\n\n## Team\n- lead: Chen\n"
	got := Removed(before, after, nil)
	var text []string
	for _, e := range got {
		text = append(text, e.Text)
	}
	all := strings.Join(text, "\n")
	for _, l := range []string{"#PO-55812 ships Friday", "```sh", "# deploy with --canary", "make deploy", "```", "## PO-777 was cancelled on 2026-11-02", "  - deputy: Li (ID-4411)"} {
		if !strings.Contains(all+"\n", l+"\n") {
			t.Errorf("%q left the file and is not archived; archived:\n%s", l, all)
		}
	}
	// The removed sub-item is archived with its parent line, so a search for the parent finds it.
	var sub Entry
	for _, e := range got {
		if strings.Contains(e.Text, "ID-4411") {
			sub = e
		}
	}
	if sub.Parent != "- lead: Chen" || !strings.Contains(Render([]Entry{sub}, "MEMORY.md", ReasonEdit, "r", at0), "- lead: Chen\n  - deputy: Li (ID-4411)\n") {
		t.Errorf("sub-item entry %+v", sub)
	}
}

// The parser tells a paragraph starting with "#" from a heading, and a code block's "#"
// lines from headings: each is an entry that demotion can move.
func TestBlocksByTheParser(t *testing.T) {
	content := "# MEMORY.md\n\n#PO-55812 ships Friday\n\n```\n# not a heading\n\nstill code\n```\n\n## Real\n- a\n  - b\nlazy line\n"
	lines, blocks := parse(content)
	var got []string
	for _, b := range blocks {
		k := "entry"
		if b.kind == kindHeading {
			k = fmt.Sprintf("h%d", b.level)
		}
		got = append(got, k+":"+strings.Join(lines[b.first:b.last+1], "|"))
	}
	want := "h1:# MEMORY.md\nentry:#PO-55812 ships Friday\nentry:```|# not a heading||still code|```\nh2:## Real\nentry:- a|  - b|lazy line"
	if strings.Join(got, "\n") != want {
		t.Errorf("blocks:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
	}
	// Demoting everything but the code block keeps its blank line.
	count := func(s string) int { return len(s) }
	kept, _ := Demote(content, nil, Limits{Count: count, Tokens: 40})
	if !strings.Contains(kept, "# not a heading\n\nstill code") && kept != "" {
		t.Errorf("the code block's blank line went:\n%q", kept)
	}
}

// An entry bigger than a quarter of the budget goes before the older small ones; a
// person's entries go after the model's.
func TestDemotionOrder(t *testing.T) {
	var b strings.Builder
	b.WriteString("# MEMORY.md\n\n## Facts\n")
	var lines []blame.Line
	add := func(text string, v int64, actor string) {
		b.WriteString(text + "\n")
		for _, l := range strings.Split(text, "\n") {
			lines = append(lines, blame.Line{Text: l, Introduced: blame.Change{Version: v, Actor: actor}, Confirmed: blame.Change{Version: v, Actor: actor}})
		}
	}
	lines = append(lines, blame.Line{}, blame.Line{}, blame.Line{})
	for i := 0; i < 10; i++ {
		add(fmt.Sprintf("- user fact %d", i), int64(i+1), "api")
	}
	add("- model fact", 11, "summarizer")
	add("- huge "+strings.Repeat("word ", 60), 12, "summarizer")
	content := b.String()
	count := func(s string) int { return len(strings.Fields(s)) }
	budget := count(content) - 50
	kept, demoted := Demote(content, lines, Limits{Count: count, Tokens: budget, Big: budget / 4})
	if len(demoted) != 1 || !strings.HasPrefix(demoted[0].Text, "- huge") {
		t.Fatalf("demoted %+v, want the huge entry only", demoted)
	}
	if strings.Count(kept, "- user fact") != 10 {
		t.Errorf("kept:\n%s", kept)
	}
	// Over again: the model's fact goes before any of the user's, older though they are.
	_, demoted = Demote(kept, append(lines[:13:13], lines[13]), Limits{Count: count, Tokens: count(kept) - 2, Big: 1000})
	if len(demoted) != 1 || demoted[0].Text != "- model fact" {
		t.Errorf("demoted %+v, want the model's fact", demoted)
	}
}

var at0 = time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)

func benchMemory(n int) (string, []blame.Line) {
	var b strings.Builder
	b.WriteString("# MEMORY.md\n")
	for i := 0; i < n; i++ {
		if i%10 == 0 {
			fmt.Fprintf(&b, "\n## Project P-%05d\n\n", i/10)
		}
		fmt.Fprintf(&b, "- F-%06d: the order for customer C-%06d ships from warehouse W-%03d\n", i, i, i%997)
	}
	content := b.String()
	var lines []blame.Line
	for i, l := range splitLines(content) {
		lines = append(lines, blame.Line{Text: l, Introduced: blame.Change{Version: int64(i)}, Confirmed: blame.Change{Version: int64(i)}})
	}
	return content, lines
}

// BenchmarkDemote8000 demotes an 8,000-entry MEMORY.md (about 700 KB) to a budget of 1,400
// tokens (the service's fit of a large imported file): n log n, not quadratic.
func BenchmarkDemote8000(b *testing.B) {
	content, lines := benchMemory(8000)
	count := func(s string) int { return len(s) / 4 }
	for b.Loop() {
		kept, demoted := Demote(content, lines, Limits{Count: count, Tokens: 1400, Big: 500})
		if count(kept) > 1400 || len(demoted) < 7900 {
			b.Fatalf("kept %d tokens, %d demoted", count(kept), len(demoted))
		}
	}
}

// The archive's dates are the agent's: the heading in its zone with the offset shown, the
// origin's date in the same zone (issue 29).
func TestArchiveDatesInTheAgentsZone(t *testing.T) {
	cst := time.FixedZone("CST", 8*3600)
	at := time.Date(2026, 12, 2, 1, 30, 0, 0, cst) // 2026-12-01 17:30 UTC
	origin := blame.Change{Version: 3, Actor: "api", Ref: "req-1", Time: time.Date(2026, 11, 30, 20, 0, 0, 0, time.UTC)}
	got := Render([]Entry{{Text: "- a", Origin: origin}}, "MEMORY.md", ReasonDemotion, "run-1", at)
	if !strings.HasPrefix(got, "## 2026-12-02 01:30 +08:00 · MEMORY.md") || !strings.Contains(got, "2026-12-01, api, request req-1") {
		t.Errorf("block:\n%s", got)
	}
	if d, ok := DateOf(strings.SplitN(got, "\n", 2)[0], time.UTC); !ok || d.Day() != 2 {
		t.Errorf("dated %v", d)
	}
}
