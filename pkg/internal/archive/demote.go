package archive

import (
	"sort"
	"strings"

	"github.com/matememory/matememory/pkg/internal/blame"
)

// Limits is what Demote fits a content to.
type Limits struct {
	// Count counts a text's tokens.
	Count func(string) int
	// Tokens is what the content kept must be within.
	Tokens int
	// Big: an entry of more tokens than this is demoted before any other (0: none is).
	Big int
}

// BigShare is the share of a budget past which one entry is demoted before any other: an
// oversized entry goes, not the many small ones it would push out.
const BigShare = 0.25

// people are the actors whose lines are a person's own (blame's actor of the line's
// introduction): demoted last.
func person(actor string) bool { return actor == "api" || actor == "tool" }

// Demote removes whole entries from content until it is within l.Tokens, in this order:
//
//  1. entries bigger than l.Big, the biggest first;
//  2. entries a pipeline wrote (the model's) before those a person wrote (through REST, the
//     tools or the console);
//  3. the least recently confirmed first, then the least recently introduced (per the file's
//     blame: lines, in content's order; nil when unknown);
//  4. the longest first (the most tokens for one fact), then the first in the file.
//
// A heading goes with the last entry of its section (a heading whose section holds no entry
// at all ranks as an entry of its own), so the bound counts every line; when only headings
// are left and the content is still over, they go too. The cost is n log n in the number of
// entries: each entry's tokens are counted once, the content is counted again only to
// check the estimate. It returns the content kept and the entries demoted, in the file's
// order.
func Demote(content string, lines []blame.Line, l Limits) (string, []Entry) {
	total := l.Count(content)
	if total <= l.Tokens {
		return content, nil
	}
	text, blocks := parse(content)
	n := len(blocks)
	cost := make([]int, n)
	// live counts the entries left in a heading's section (its sub-sections' included).
	live := make([]int, n)
	for k, b := range blocks {
		cost[k] = l.Count(strings.Join(text[b.first:b.last+1], "\n") + "\n")
		if b.kind == kindEntry {
			for p := b.parent; p >= 0; p = blocks[p].parent {
				live[p]++
			}
		}
	}
	type rank struct {
		big, person           bool
		confirmed, introduced int64
	}
	ranks := make([]rank, n)
	var order []int
	for k, b := range blocks {
		r := rank{big: l.Big > 0 && cost[k] > l.Big}
		for i := b.first; i <= b.last && i < len(lines); i++ {
			r.confirmed = max(r.confirmed, lines[i].Confirmed.Version)
			r.introduced = max(r.introduced, lines[i].Introduced.Version)
		}
		if b.first < len(lines) {
			r.person = person(lines[b.first].Introduced.Actor)
		}
		ranks[k] = r
		if b.kind == kindEntry || live[k] == 0 {
			order = append(order, k)
		}
	}
	sort.SliceStable(order, func(a, b int) bool {
		ra, rb := ranks[order[a]], ranks[order[b]]
		switch {
		case ra.big != rb.big:
			return ra.big
		case ra.big && cost[order[a]] != cost[order[b]]:
			return cost[order[a]] > cost[order[b]]
		case ra.person != rb.person:
			return !ra.person
		case ra.confirmed != rb.confirmed:
			return ra.confirmed < rb.confirmed
		case ra.introduced != rb.introduced:
			return ra.introduced < rb.introduced
		case cost[order[a]] != cost[order[b]]:
			return cost[order[a]] > cost[order[b]]
		}
		return order[a] < order[b]
	})
	gone := make([]bool, n)
	est := total
	drop := func(k int) {
		if gone[k] {
			return
		}
		gone[k] = true
		est -= cost[k]
		if blocks[k].kind != kindEntry {
			return
		}
		for p := blocks[k].parent; p >= 0; p = blocks[p].parent {
			if live[p]--; live[p] == 0 {
				gone[p] = true
				est -= cost[p]
			}
		}
	}
	// Headings last, the innermost (the last in the file) first.
	for k := n - 1; k >= 0; k-- {
		if blocks[k].kind == kindHeading && live[k] > 0 {
			order = append(order, k)
		}
	}
	var kept string
	next := 0
	for try := 0; ; try++ {
		goal := l.Tokens
		for next < len(order) && est > goal {
			drop(order[next])
			next++
		}
		kept = join(text, blocks, gone, strings.HasSuffix(content, "\n"))
		got := l.Count(kept)
		if got <= l.Tokens || next >= len(order) {
			break
		}
		// Tokens are not quite additive (merges at the seams): go on from the real count,
		// aiming lower each time the estimate falls short, so that the checks stay few.
		est = got + (got-l.Tokens)*try
	}
	var demoted []Entry
	for k, b := range blocks {
		if !gone[k] {
			continue
		}
		e := Entry{Text: strings.Join(text[b.first:b.last+1], "\n"), Heading: headingOf(text, blocks, k)}
		if b.first < len(lines) {
			e.Origin = lines[b.first].Introduced
		}
		demoted = append(demoted, e)
	}
	return kept, demoted
}

// join is text without the lines of the blocks gone. A blank line is left out only where a
// removal made it meet another blank line (or the start or end of the file): blank lines the
// removal did not touch, in a code block say, stay.
func join(text []string, blocks []block, gone []bool, finalNewline bool) string {
	dropped := make([]bool, len(text))
	for k, b := range blocks {
		if gone[k] {
			for i := b.first; i <= b.last; i++ {
				dropped[i] = true
			}
		}
	}
	out := make([]string, 0, len(text))
	lastBlank, cut, cutAtEnd := false, false, false
	for i, l := range text {
		if dropped[i] {
			cut, cutAtEnd = true, true
			continue
		}
		blank := strings.TrimSpace(l) == ""
		if blank && cut && (lastBlank || len(out) == 0) {
			continue
		}
		if !blank {
			cut, cutAtEnd = false, false
		}
		out = append(out, l)
		lastBlank = blank
	}
	if cutAtEnd { // the file's end was removed: no blank lines left trailing
		for len(out) > 0 && strings.TrimSpace(out[len(out)-1]) == "" {
			out = out[:len(out)-1]
		}
	}
	s := strings.Join(out, "\n")
	if finalNewline && s != "" {
		s += "\n"
	}
	return s
}
