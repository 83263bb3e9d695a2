package archive

import (
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/blame"
)

const memory = `# MEMORY

## Preferences
- likes green tea
- prefers morning meetings
  (asked twice in October)

## Work
The user leads the payments team
and reports to Chen.
- PO-55812 ships on 2026-12-20
`

func TestRemoved(t *testing.T) {
	after := strings.Replace(memory, "- likes green tea\n", "", 1)
	after = strings.Replace(after, "- PO-55812 ships on 2026-12-20", "- PO-55812 ships on 2027-01-05", 1)
	// A move is not a removal: the meetings item goes to the end of the file.
	after = strings.Replace(after, "- prefers morning meetings\n  (asked twice in October)\n", "", 1) +
		"- prefers morning meetings\n  (asked twice in October)\n"
	got := Removed(memory, after, nil)
	want := []Entry{{Text: "- likes green tea", Heading: "## Preferences"}, {Text: "- PO-55812 ships on 2026-12-20", Heading: "## Work"}}
	if len(got) != len(want) {
		t.Fatalf("removed %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if r := Removed(memory, memory, nil); len(r) != 0 {
		t.Errorf("no change removed %+v", r)
	}
	var lines []blame.Line
	for i, l := range splitLines(memory) {
		lines = append(lines, blame.Line{Number: i + 1, Text: l, Introduced: blame.Change{Version: int64(i + 1)}})
	}
	r := Removed(memory, "", func() []blame.Line { return lines })
	// Everything goes, headings too: whatever leaves the file is archived.
	if len(r) != 7 {
		t.Fatalf("emptied file: %d entries, want 7: %+v", len(r), r)
	}
	if r[2].Origin.Version != 4 || r[5].Origin.Version != 9 { // "- likes green tea" is line 4, the paragraph starts at 9
		t.Errorf("origins: %+v", r)
	}
}

func TestEntries(t *testing.T) {
	var got []string
	lines, blocks := parse(memory)
	for k, s := range blocks {
		if s.kind == kindEntry {
			got = append(got, strings.Join(lines[s.first:s.last+1], "|")+" @"+headingOf(lines, blocks, k))
		}
	}
	want := []string{
		"- likes green tea @## Preferences",
		"- prefers morning meetings|  (asked twice in October) @## Preferences",
		"The user leads the payments team|and reports to Chen. @## Work",
		"- PO-55812 ships on 2026-12-20 @## Work",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("entries:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDemote(t *testing.T) {
	day := func(d int) blame.Change {
		return blame.Change{Version: int64(d), Time: time.Date(2026, 10, d, 0, 0, 0, 0, time.UTC)}
	}
	// Lines of memory with their provenance: the Work paragraph is the oldest, the tea the newest.
	var lines []blame.Line
	for i, l := range splitLines(memory) {
		c := day(5)
		switch {
		case strings.Contains(l, "payments") || strings.Contains(l, "Chen"):
			c = day(1)
		case strings.Contains(l, "tea"):
			c = day(9)
		}
		lines = append(lines, blame.Line{Number: i + 1, Text: l, Introduced: c, Confirmed: c})
	}
	limit := len(memory) - 40
	count := func(s string) int { return len(s) }
	kept, demoted := Demote(memory, lines, Limits{Count: count, Tokens: limit})
	if len(kept) > limit {
		t.Fatalf("kept %d bytes, limit %d", len(kept), limit)
	}
	if len(demoted) != 1 || !strings.HasPrefix(demoted[0].Text, "The user leads") || demoted[0].Origin.Version != 1 {
		t.Fatalf("demoted %+v, want the oldest entry (the Work paragraph)", demoted)
	}
	if !strings.Contains(kept, "## Work\n- PO-55812") || !strings.Contains(kept, "likes green tea") {
		t.Errorf("kept:\n%s", kept)
	}
	// Every byte of an entry is either kept or demoted.
	for _, e := range demoted {
		if strings.Contains(kept, e.Text) {
			t.Errorf("%q both kept and demoted", e.Text)
		}
	}
	// Nothing fits: every entry goes, and the headings with their sections: the bound counts
	// every line.
	kept, demoted = Demote(memory, nil, Limits{Count: count, Tokens: 0})
	if len(demoted) != 7 || kept != "" {
		t.Errorf("all demoted: %d entries, kept %q", len(demoted), kept)
	}
	if k, d := Demote(memory, nil, Limits{Count: count, Tokens: len(memory)}); k != memory || d != nil {
		t.Error("a file that fits changed")
	}
}

func TestRender(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	got := Render([]Entry{
		{Text: "- likes green tea", Heading: "## Preferences", Origin: blame.Change{Version: 4, Actor: "summarizer", Ref: "run-a", Time: at.AddDate(0, -2, 0)}},
		{Text: "- prefers mornings", Heading: "## Preferences"},
	}, "MEMORY.md", ReasonDemotion, "run-z", at)
	want := "## 2026-12-01 09:30 +00:00 · MEMORY.md · demotion · run run-z\n\n- likes green tea\n" +
		"<!-- under Preferences, MEMORY.md v4, 2026-10-01, summarizer, run run-a -->\n- prefers mornings\n<!-- under Preferences -->\n"
	if got != want {
		t.Errorf("render:\n%s\nwant:\n%s", got, want)
	}
	if Render(nil, "MEMORY.md", ReasonEdit, "", at) != "" {
		t.Error("no entries: want no block")
	}
	if d, ok := DateOf("2026-12-01 09:30 · MEMORY.md · demotion", time.UTC); !ok || !d.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("date of a block: %v %v", d, ok)
	}
	if _, ok := DateOf("Preferences", time.UTC); ok {
		t.Error("a heading without a date is dated")
	}
	if FileFor(at) != "memory/archive/2026-12-01.md" || !IsArchive(FileFor(at)) || IsArchive("memory/2026-12-01.md") {
		t.Error("archive names")
	}
}
