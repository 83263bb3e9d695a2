// Package archive keeps what leaves an agent's core files (MEMORY.md, PROFILE.md) through the
// pipeline: an extraction's or an emergence's rewrite or edits, a consolidation, or the
// service's own demotion of entries to fit a budget. Nothing is lost, only demoted: the
// entries go verbatim to a note of the day, memory/archive/YYYY-MM-DD.md, which recall indexes but
// which is not injected into the prompt nor read by emergence or consolidation, so demoted
// facts come back only when a search asks for them.
//
// An entry is the unit of a core file that moves as a whole: a list item with its indented
// continuation lines, or a paragraph. Headings are structure, not entries: they stay.
package archive

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sergi/go-diff/diffmatchpatch"

	"github.com/matememory/matememory/pkg/internal/blame"
)

// Dir is the folder of the archive notes.
const Dir = "memory/archive/"

// FileFor is the archive note of the day of t (in t's location): one note a day, like the
// daily notes, so that each append's history row (the note's previous content) stays small
// however long the agent lives.
func FileFor(t time.Time) string { return Dir + t.Format("2006-01-02") + ".md" }

// Header starts a new archive note of day (YYYY-MM-DD): every pipeline change that archives
// entries (an extraction, an emergence) creates the note with it.
func Header(day string) string {
	return "# Archive " + day + "\n\n" +
		"Entries that left MEMORY.md or PROFILE.md, verbatim, with when, why and which run. Memory search finds them; they are not injected into the prompt.\n\n"
}

// IsArchive reports whether a workspace file name is an archive note.
func IsArchive(name string) bool { return strings.HasPrefix(name, Dir) }

// Entry is one demoted entry: its lines verbatim, the section it stood under, and where it
// came from when that is known.
type Entry struct {
	Text    string
	Heading string
	// Origin is the change that introduced the entry's first line (zero when unknown).
	Origin blame.Change
}

// Reasons an entry leaves a core file.
const (
	ReasonRewrite       = "rewrite"       // an extraction's or emergence's whole-file answer dropped it
	ReasonEdit          = "edit"          // an edit deleted or replaced it
	ReasonConsolidation = "consolidation" // the model fitted the file to its budget without it
	ReasonDemotion      = "demotion"      // the service demoted it to keep the budget
)

// Removed lists the entries of before that after no longer holds: lines a change deleted
// that it did not only move elsewhere, grouped into the entries they belonged to. A line
// that is part of an entry whose other lines stay (an item with one sub-line changed) is
// kept as the entry's removed part, so every removed byte is accounted for. blameOf, when not
// nil, gives before's blame (called only when something was removed): each entry's Origin is
// then its first removed line's introduction.
func Removed(before, after string, blameOf func() []blame.Line) []Entry {
	dmp := diffmatchpatch.New()
	ca, cb, table := dmp.DiffLinesToChars(before, after)
	diffs := dmp.DiffCharsToLines(dmp.DiffMain(ca, cb, false), table)
	inserted := map[string]int{}
	for _, d := range diffs {
		if d.Type == diffmatchpatch.DiffInsert {
			for _, l := range splitLines(d.Text) {
				inserted[l]++
			}
		}
	}
	old := splitLines(before)
	gone := make([]bool, len(old))
	at := 0
	for _, d := range diffs {
		n := len(splitLines(d.Text))
		switch d.Type {
		case diffmatchpatch.DiffDelete:
			for i := at; i < at+n; i++ {
				if inserted[old[i]] > 0 { // moved, not removed
					inserted[old[i]]--
					continue
				}
				gone[i] = strings.TrimSpace(old[i]) != "" && !isHeading(old[i])
			}
			at += n
		case diffmatchpatch.DiffEqual:
			at += n
		}
	}
	var lines []blame.Line
	if blameOf != nil && slices.Contains(gone, true) {
		lines = blameOf()
	}
	var out []Entry
	for _, e := range entries(before) {
		var kept []string
		var origin blame.Change
		for i := e.first; i <= e.last; i++ {
			if gone[i] {
				if len(kept) == 0 && i < len(lines) {
					origin = lines[i].Introduced
				}
				kept = append(kept, old[i])
			}
		}
		if len(kept) > 0 {
			out = append(out, Entry{Text: strings.Join(kept, "\n"), Heading: e.heading, Origin: origin})
		}
	}
	return out
}

// span is an entry's place in a file: lines first..last (from 0).
type span struct {
	first, last int
	heading     string
}

// entries splits content into its entries (items with their continuation lines, paragraphs).
func entries(content string) []span {
	var out []span
	heading := ""
	lines := splitLines(content)
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "":
			continue
		case isHeading(l):
			heading = strings.TrimSpace(l)
			continue
		}
		s := span{first: i, last: i, heading: heading}
		item := isItem(l)
		for i+1 < len(lines) {
			next := lines[i+1]
			if strings.TrimSpace(next) == "" || isHeading(next) {
				break
			}
			if item && !indented(next) {
				break
			}
			if !item && isItem(next) {
				break
			}
			i++
			s.last = i
		}
		out = append(out, s)
	}
	return out
}

// Demote removes whole entries from content until fits says it fits, those least recently
// confirmed first (then least recently introduced, then the first in the file), per the
// file's blame (lines, in content's order; nil when unknown). Headings left without entries
// stay: the structure is the model's. It returns the content kept and the entries demoted;
// when nothing can be demoted any more the content may still not fit (only headings left).
func Demote(content string, lines []blame.Line, fits func(string) bool) (string, []Entry) {
	if fits(content) {
		return content, nil
	}
	text := splitLines(content)
	spans := entries(content)
	// Ranked by version (a file's versions are ordered whatever the clocks of the
	// processes that wrote them), newest line of the entry counting.
	type ranked struct {
		span
		confirmed, introduced int64
		origin                blame.Change
	}
	rs := make([]ranked, len(spans))
	for k, s := range spans {
		r := ranked{span: s}
		for i := s.first; i <= s.last && i < len(lines); i++ {
			r.confirmed = max(r.confirmed, lines[i].Confirmed.Version)
			r.introduced = max(r.introduced, lines[i].Introduced.Version)
		}
		if s.first < len(lines) {
			r.origin = lines[s.first].Introduced
		}
		rs[k] = r
	}
	order := make([]int, len(rs))
	for k := range order {
		order[k] = k
	}
	sort.SliceStable(order, func(a, b int) bool {
		ra, rb := rs[order[a]], rs[order[b]]
		if ra.confirmed != rb.confirmed {
			return ra.confirmed < rb.confirmed
		}
		return ra.introduced < rb.introduced
	})
	dropped := make([]bool, len(text))
	var demoted []Entry
	kept := content
	for _, k := range order {
		r := rs[k]
		for i := r.first; i <= r.last; i++ {
			dropped[i] = true
		}
		demoted = append(demoted, Entry{Text: strings.Join(text[r.first:r.last+1], "\n"), Heading: r.heading, Origin: r.origin})
		kept = join(text, dropped, strings.HasSuffix(content, "\n"))
		if fits(kept) {
			break
		}
	}
	return kept, demoted
}

// Render is the block an archive note gets for entries that left file at t through run for
// reason: a heading that says when, whence, why and by which run (recall dates the block's
// chunks by it), then each entry verbatim, followed by a comment with the section it stood
// in and where it came from.
func Render(entries []Entry, file, reason, run string, t time.Time) string {
	if len(entries) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## %s · %s · %s", t.Format("2006-01-02 15:04"), file, reason)
	if run != "" {
		fmt.Fprintf(&b, " · run %s", run)
	}
	b.WriteString("\n\n")
	for _, e := range entries {
		b.WriteString(e.Text)
		b.WriteString("\n")
		var from []string
		if h := strings.TrimSpace(strings.TrimLeft(e.Heading, "#")); h != "" {
			from = append(from, "under "+h)
		}
		if o := e.Origin; o.Version > 0 {
			from = append(from, fmt.Sprintf("%s v%d", file, o.Version))
			if !o.Time.IsZero() {
				from = append(from, o.Time.UTC().Format("2006-01-02"))
			}
			if o.Actor != "" {
				from = append(from, o.Actor)
			}
			if o.Ref != "" {
				from = append(from, "run "+o.Ref)
			}
		}
		if len(from) > 0 {
			fmt.Fprintf(&b, "<!-- %s -->\n", strings.Join(from, ", "))
		}
	}
	return b.String()
}

// DateOf is the date of an archive block from its heading (as Render writes it).
func DateOf(heading string, loc *time.Location) (time.Time, bool) {
	h := strings.TrimSpace(strings.TrimLeft(heading, "#"))
	if len(h) < 10 {
		return time.Time{}, false
	}
	d, err := time.ParseInLocation("2006-01-02", h[:10], loc)
	return d, err == nil
}

func join(text []string, dropped []bool, finalNewline bool) string {
	var b strings.Builder
	blank := false
	for i, l := range text {
		if dropped[i] {
			continue
		}
		// Two blank lines left where an entry was read as one.
		if strings.TrimSpace(l) == "" {
			if blank {
				continue
			}
			blank = true
		} else {
			blank = false
		}
		b.WriteString(l)
		b.WriteString("\n")
	}
	s := b.String()
	if !finalNewline {
		s = strings.TrimSuffix(s, "\n")
	}
	return s
}

func isHeading(l string) bool {
	t := strings.TrimLeft(l, " ")
	return strings.HasPrefix(t, "#") && len(l)-len(t) < 4
}

func isItem(l string) bool {
	t := strings.TrimLeft(l, " ")
	if len(l)-len(t) >= 2 { // a nested item belongs to the item above it
		return false
	}
	if strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* ") || strings.HasPrefix(t, "+ ") {
		return true
	}
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	return i > 0 && i+1 < len(t) && (t[i] == '.' || t[i] == ')') && t[i+1] == ' '
}

func indented(l string) bool { return strings.HasPrefix(l, "  ") || strings.HasPrefix(l, "\t") }

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
