// Package archive keeps what leaves an agent's core files (MEMORY.md, PROFILE.md) through the
// pipeline: an extraction's or an emergence's rewrite or edits, a consolidation, or the
// service's own demotion of entries to fit a budget. Nothing is lost, only demoted: the
// entries go verbatim to a note of the day, memory/archive/YYYY-MM-DD.md (and, when a day
// holds more than one note can, YYYY-MM-DD-2.md, …), which recall indexes but which is not
// injected into the prompt nor read by emergence or consolidation, so demoted facts come back
// only when a search asks for them.
//
// An entry is the unit of a core file that moves as a whole, as a Markdown parser reads the
// file: a top-level list item with what it holds, a paragraph, a code block, a quote. A
// heading goes with its section when the last entry of the section goes; whatever leaves a
// file, whatever its shape, is archived verbatim.
package archive

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sergi/go-diff/diffmatchpatch"

	"github.com/matememory/matememory/pkg/internal/blame"
)

// Dir is the folder of the archive notes.
const Dir = "memory/archive/"

// FileFor is the archive note of the day of t (in t's location): one note a day, like the
// daily notes, so that each append's history row (the note's previous content) stays small
// however long the agent lives.
func FileFor(t time.Time) string { return Dir + t.Format("2006-01-02") + ".md" }

// PartFile is the n-th note of day (YYYY-MM-DD), counting from 1: the day's note, then
// YYYY-MM-DD-2.md, … when the notes before are full.
func PartFile(day string, n int) string {
	if n <= 1 {
		return Dir + day + ".md"
	}
	return Dir + day + "-" + strconv.Itoa(n) + ".md"
}

// Header starts a new archive note of day (YYYY-MM-DD): every pipeline change that archives
// entries (an extraction, an emergence) creates the note with it.
func Header(day string) string {
	return "# Archive " + day + "\n\n" +
		"Entries that left MEMORY.md or PROFILE.md, verbatim, with when, why and which run. Memory search finds them; they are not injected into the prompt.\n\n"
}

// IsArchive reports whether a workspace file name is an archive note.
func IsArchive(name string) bool { return strings.HasPrefix(name, Dir) }

// Entry is one entry that left a core file: its lines verbatim, the section it stood under,
// and where it came from when that is known.
type Entry struct {
	Text    string
	Heading string
	// Origin is the change that introduced the entry's first line (zero when unknown).
	Origin blame.Change
	// Parent is the first line of the block the entry's lines stood in when that line is
	// still in the file (a sub-item removed from an item that stays): context for a search.
	Parent string
}

// Reasons an entry leaves a core file.
const (
	ReasonRewrite       = "rewrite"       // an extraction's or emergence's whole-file answer dropped it
	ReasonEdit          = "edit"          // an edit deleted or replaced it
	ReasonConsolidation = "consolidation" // the model fitted the file to its budget without it
	ReasonDemotion      = "demotion"      // the service demoted it to keep the budget
)

// Removed lists the entries of before that after no longer holds: lines a change deleted
// that it did not only move elsewhere, grouped into the blocks they belonged to (a list
// item with what it holds, a paragraph, a code block, a heading: whatever its shape). A
// removed line of a block whose first line stays (a sub-item of an item) is archived with
// that first line as its Parent, so that a search by the parent finds it. blameOf, when not
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
	old, blocks := parse(before)
	gone := make([]bool, len(old))
	at := 0
	for _, d := range diffs {
		n := len(splitLines(d.Text))
		switch d.Type {
		case diffmatchpatch.DiffDelete:
			for i := at; i < at+n && i < len(old); i++ {
				if inserted[old[i]] > 0 { // moved, not removed
					inserted[old[i]]--
					continue
				}
				gone[i] = strings.TrimSpace(old[i]) != ""
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
	for k, b := range blocks {
		var kept []string
		var origin blame.Change
		for i := b.first; i <= b.last; i++ {
			if gone[i] {
				if len(kept) == 0 && i < len(lines) {
					origin = lines[i].Introduced
				}
				kept = append(kept, old[i])
			}
		}
		if len(kept) == 0 {
			continue
		}
		e := Entry{Text: strings.Join(kept, "\n"), Heading: headingOf(old, blocks, k), Origin: origin}
		if !gone[b.first] {
			e.Parent = old[b.first]
		}
		out = append(out, e)
	}
	return out
}

// Render is the block an archive note gets for entries that left file at t through run for
// reason: a heading that says when (in t's zone, with its offset), whence, why and by which
// run (recall dates the block's chunks by it), then each entry verbatim (after its parent
// line, when only part of a block left), each run of entries from the same section and change
// followed by a comment with the section and where they came from.
func Render(entries []Entry, file, reason, run string, t time.Time) string {
	parts := Parts(entries, file, reason, run, t, 0)
	if len(parts) == 0 {
		return ""
	}
	return parts[0]
}

// Parts renders entries as Render does, in blocks of at most max bytes each (0: one block),
// each with its own heading: a block never splits an entry unless the entry alone is larger
// than max, when it goes over several blocks, line by line (a line longer than max, at rune
// boundaries).
func Parts(entries []Entry, file, reason, run string, t time.Time, max int) []string {
	if len(entries) == 0 {
		return nil
	}
	head := fmt.Sprintf("## %s · %s · %s", t.Format("2006-01-02 15:04 -07:00"), file, reason)
	if run != "" {
		head += " · run " + run
	}
	head += "\n\n"
	// pieces are what a block is made of: entries' texts and their comments.
	var pieces []string
	for i := 0; i < len(entries); {
		c := comment(entries[i], file, t.Location())
		j := i
		var b strings.Builder
		for j < len(entries) && comment(entries[j], file, t.Location()) == c {
			if p := entries[j].Parent; p != "" {
				b.WriteString(p)
				b.WriteString("\n")
			}
			b.WriteString(entries[j].Text)
			b.WriteString("\n")
			j++
			if max > 0 && b.Len() > max/4 {
				break // a comment at least every quarter of a block
			}
		}
		if c != "" {
			b.WriteString(c)
		}
		pieces = append(pieces, b.String())
		i = j
	}
	var out []string
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			out = append(out, head+b.String())
			b.Reset()
		}
	}
	room := max - len(head)
	for _, p := range pieces {
		if max <= 0 || b.Len()+len(p) <= room {
			b.WriteString(p)
			continue
		}
		flush()
		if len(p) <= room {
			b.WriteString(p)
			continue
		}
		for _, l := range strings.SplitAfter(p, "\n") {
			for len(l) > 0 {
				if b.Len()+len(l) > room {
					flush()
				}
				n := min(len(l), room)
				for n < len(l) && !utf8.RuneStart(l[n]) {
					n--
				}
				b.WriteString(l[:n])
				l = l[n:]
			}
		}
	}
	flush()
	return out
}

// comment is the line after an entry that says where it stood and where it came from ("" when
// nothing is known). A pipeline change's Ref is its run; a person's, the request.
func comment(e Entry, file string, loc *time.Location) string {
	var from []string
	if h := strings.TrimSpace(strings.TrimLeft(e.Heading, "#")); h != "" {
		from = append(from, "under "+h)
	}
	if e.Parent != "" {
		from = append(from, "its first line stays in "+file)
	}
	if o := e.Origin; o.Version > 0 {
		from = append(from, fmt.Sprintf("%s v%d", file, o.Version))
		if !o.Time.IsZero() {
			from = append(from, o.Time.In(loc).Format("2006-01-02"))
		}
		if o.Actor != "" {
			from = append(from, o.Actor)
		}
		if o.Ref != "" {
			label := "request"
			if o.Actor == "summarizer" || o.Actor == "emergence" {
				label = "run"
			}
			from = append(from, label+" "+o.Ref)
		}
	}
	if len(from) == 0 {
		return ""
	}
	return "<!-- " + strings.Join(from, ", ") + " -->\n"
}

// DateOf is the date of an archive block from its heading (as Render writes it): the day the
// heading names, in loc.
func DateOf(heading string, loc *time.Location) (time.Time, bool) {
	h := strings.TrimSpace(strings.TrimLeft(heading, "#"))
	if len(h) < 10 {
		return time.Time{}, false
	}
	d, err := time.ParseInLocation("2006-01-02", h[:10], loc)
	return d, err == nil
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
