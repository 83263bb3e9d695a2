// Package blame says, for every line of a memory file, which change introduced it and which
// change last kept it, computed from the file's versions as `git blame` computes it from
// commits: each version is diffed by lines against the one before (Myers, go-diff's line
// mode), a line that survives keeps its origin, a new line takes the version's change.
//
// A line that a change only moves (deleted at one place and inserted at another with the
// same text, as a consolidation that reorders sections does) keeps its origin: the move is
// a confirmation, not an introduction. A change that leaves the text alone (a flags-only
// version) confirms nothing.
package blame

import (
	"strings"
	"time"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// Change is what produced one version of a file.
type Change struct {
	Version int64     `json:"version"`
	Actor   string    `json:"actor,omitempty"`
	Action  string    `json:"action,omitempty"`
	Ref     string    `json:"ref,omitempty"`
	Time    time.Time `json:"time"`
}

// Revision is one version's content and the change that produced it.
type Revision struct {
	Content string
	Change  Change
}

// Line is one line of the newest version with its provenance.
type Line struct {
	// Number counts from 1.
	Number int    `json:"number"`
	Text   string `json:"text"`
	// Introduced is the change whose version first held the line (as it reads now).
	Introduced Change `json:"introduced"`
	// Confirmed is the newest change whose version still held the line after changing the
	// file's content; it equals Introduced when no later change kept it.
	Confirmed Change `json:"confirmed"`
}

// Annotate blames the last revision's lines; revs are ordered oldest first. It returns nil
// when revs is empty.
func Annotate(revs []Revision) []Line {
	if len(revs) == 0 {
		return nil
	}
	cur := make([]Line, 0)
	for i, l := range splitLines(revs[0].Content) {
		cur = append(cur, Line{Number: i + 1, Text: l, Introduced: revs[0].Change, Confirmed: revs[0].Change})
	}
	prev := revs[0].Content
	dmp := diffmatchpatch.New()
	for _, r := range revs[1:] {
		if r.Content == prev {
			continue
		}
		cur = step(dmp, cur, prev, r)
		prev = r.Content
	}
	return cur
}

// step carries the lines of the previous version over to r's content.
func step(dmp *diffmatchpatch.DiffMatchPatch, old []Line, prev string, r Revision) []Line {
	ca, cb, lines := dmp.DiffLinesToChars(prev, r.Content)
	diffs := dmp.DiffCharsToLines(dmp.DiffMain(ca, cb, false), lines)
	// Lines this change deleted, by text, so that an insertion of the same text is a move.
	moved := map[string][]Line{}
	at := 0
	for _, d := range diffs {
		n := len(splitLines(d.Text))
		if d.Type == diffmatchpatch.DiffDelete {
			for _, l := range old[at : at+n] {
				moved[l.Text] = append(moved[l.Text], l)
			}
		}
		if d.Type != diffmatchpatch.DiffInsert {
			at += n
		}
	}
	out := make([]Line, 0, len(old))
	at = 0
	for _, d := range diffs {
		ls := splitLines(d.Text)
		switch d.Type {
		case diffmatchpatch.DiffEqual:
			for _, l := range old[at : at+len(ls)] {
				l.Confirmed = r.Change
				out = append(out, l)
			}
			at += len(ls)
		case diffmatchpatch.DiffDelete:
			at += len(ls)
		case diffmatchpatch.DiffInsert:
			for _, text := range ls {
				l := Line{Text: text, Introduced: r.Change, Confirmed: r.Change}
				if m := moved[text]; len(m) > 0 {
					l.Introduced = m[0].Introduced
					moved[text] = m[1:]
				}
				out = append(out, l)
			}
		}
	}
	for i := range out {
		out[i].Number = i + 1
	}
	return out
}

// splitLines splits content into lines without their newlines; a final newline does not
// start another line.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
