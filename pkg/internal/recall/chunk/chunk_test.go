package chunk

import (
	"strings"
	"testing"
	"time"
)

func TestSplitFollowsHeadingsAndLines(t *testing.T) {
	content := "# Profile\n\nLikes tea.\n\n## Work\n\nDeploys db-prod-03 on Fridays.\nOrder ORD-2026-0042 shipped.\n\n## 饮食\n\n不吃香菜。\n"
	got := Split(content, Options{})
	if len(got) != 3 {
		t.Fatalf("want 3 chunks (one per section), got %d: %+v", len(got), got)
	}
	want := []struct {
		start, end int
		heading    string
		first      string
	}{{1, 3, "Profile", "# Profile"}, {5, 8, "Work", "## Work"}, {10, 12, "饮食", "## 饮食"}}
	for i, w := range want {
		c := got[i]
		if c.StartLine != w.start || c.EndLine != w.end || c.Heading != w.heading || !strings.HasPrefix(c.Text, w.first) {
			t.Errorf("chunk %d = lines %d-%d heading %q text %q; want %d-%d %q starting %q", i, c.StartLine, c.EndLine, c.Heading, c.Text, w.start, w.end, w.heading, w.first)
		}
		if c.Ordinal != i || len(c.Hash) != 64 {
			t.Errorf("chunk %d: ordinal %d hash %q", i, c.Ordinal, c.Hash)
		}
	}
	// The line range points at the text: the lines of the file are the chunk.
	lines := strings.Split(content, "\n")
	if strings.Join(lines[got[1].StartLine-1:got[1].EndLine], "\n") != got[1].Text {
		t.Errorf("line range %d-%d does not reproduce the chunk text %q", got[1].StartLine, got[1].EndLine, got[1].Text)
	}
}

func TestSplitBoundsSizeWithOverlap(t *testing.T) {
	var b strings.Builder
	b.WriteString("# Log\n\n")
	for i := 0; i < 200; i++ {
		b.WriteString("Line number " + strings.Repeat("word ", 10) + "\n")
	}
	got := Split(b.String(), Options{MaxTokens: 100, OverlapTokens: 20})
	if len(got) < 10 {
		t.Fatalf("want many chunks, got %d", len(got))
	}
	for i, c := range got {
		if n := approxTokens(c.Text) + strings.Count(c.Text, "\n") + 1; n > 100 {
			t.Errorf("chunk %d has %d tokens > 100", i, n)
		}
		if i > 0 && c.StartLine > got[i-1].EndLine {
			t.Errorf("chunk %d starts at %d after the previous ended at %d: no overlap", i, c.StartLine, got[i-1].EndLine)
		}
		if i > 0 && c.Heading != "Log" {
			t.Errorf("chunk %d lost its heading: %q", i, c.Heading)
		}
	}
}

func TestSplitHugeLineAndBadUTF8(t *testing.T) {
	long := strings.Repeat("长", 5000) + "\xff\xfe"
	got := Split(long, Options{MaxTokens: 400})
	if len(got) < 12 {
		t.Fatalf("a 5000-rune line should be cut into pieces of <= 400 tokens, got %d chunks", len(got))
	}
	for _, c := range got {
		if !strings.HasPrefix(c.Text, "长") && !strings.HasPrefix(c.Text, "\uFFFD") {
			t.Errorf("piece cut inside a rune: %q", c.Text[:8])
		}
		if c.StartLine != 1 || c.EndLine != 1 {
			t.Errorf("pieces of line 1 must say line 1, got %d-%d", c.StartLine, c.EndLine)
		}
	}
	if len(Split("\n\n  \n", Options{})) != 0 {
		t.Error("blank content must give no chunks")
	}
}

func TestNoteDate(t *testing.T) {
	cases := []struct {
		name  string
		want  string
		dated bool
	}{
		{"memory/2026-04-03.md", "2026-04-03", true},
		{"memory/2026/04/2026-04-03.md", "2026-04-03", true},
		{"memory/projects/2026-04-03-launch.md", "2026-04-03", true},
		{"memory/2026-04-03/notes.md", "2026-04-03", true},
		{"MEMORY.md", "", false},
		{"notes/2026-04-03.md", "", false},
		{"memory/ideas.md", "", false},
		{"memory/2026-13-40.md", "", false},
	}
	for _, c := range cases {
		d, ok := NoteDate(c.name, time.UTC)
		if ok != c.dated || (ok && d.Format("2006-01-02") != c.want) {
			t.Errorf("NoteDate(%q) = %v %v; want %q %v", c.name, d, ok, c.want, c.dated)
		}
	}
}

// Issue 19: a heading directly followed by another heading is not a chunk of its own (a
// sectioned daily note's date title went alone, and won one-word queries).
func TestSplitKeepsStackedHeadingsWithTheirSection(t *testing.T) {
	for _, c := range []struct {
		content string
		want    [][2]int
	}{
		{"# 2026-05-12\n\n## 工作\n\n修了登录的 bug。\n\n## 生活\n\n买了菜。\n", [][2]int{{1, 5}, {7, 9}}},
		{"# SOUL.md — 我是谁\n## Core\n### Values\n\nBe kind.\n", [][2]int{{1, 5}}},
		{"# Only a title\n", [][2]int{{1, 1}}},
	} {
		got := Split(c.content, Options{})
		var ranges [][2]int
		for _, ch := range got {
			ranges = append(ranges, [2]int{ch.StartLine, ch.EndLine})
		}
		if len(ranges) != len(c.want) {
			t.Errorf("%q: chunks %v, want %v", c.content, ranges, c.want)
			continue
		}
		for i := range ranges {
			if ranges[i] != c.want[i] {
				t.Errorf("%q: chunks %v, want %v", c.content, ranges, c.want)
			}
		}
	}
}
