package archive

import (
	"sort"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// A core file's blocks, as a Markdown parser (goldmark, CommonMark) reads them: what a line
// starting with "#" is (an ATX heading needs a space after its marks; a "#" line inside a
// code block is code), where a list item ends (its nested items and lazy continuation lines
// are part of it), what a code block or a quote holds. Every non-blank line belongs to
// exactly one block, so whatever leaves the file is found in one.

type kind int

const (
	kindEntry   kind = iota // a list item with what it holds, a paragraph, a code block, a quote, …
	kindHeading             // an ATX or setext heading
)

// block is lines first..last (from 0) of a file, blank lines at its end left out.
type block struct {
	first, last int
	kind        kind
	// level is a heading's level (1-6); parent is the index of the heading whose section
	// holds the block (-1: none).
	level, parent int
}

// parser is goldmark's CommonMark block parser (no extensions: the structure a core file's
// entries need is CommonMark's).
var mdParser = goldmark.New().Parser()

// parse splits content into its lines and its blocks, in the file's order.
func parse(content string) ([]string, []block) {
	lines := splitLines(content)
	if len(lines) == 0 {
		return nil, nil
	}
	// starts[i] is the byte offset of line i.
	starts := make([]int, len(lines))
	off := 0
	for i, l := range lines {
		starts[i] = off
		off += len(l) + 1
	}
	lineOf := func(pos int) int { return sort.SearchInts(starts, pos+1) - 1 }
	src := []byte(content)
	doc := mdParser.Parse(text.NewReader(src), parser.WithContext(parser.NewContext()))
	type at struct {
		line  int
		kind  kind
		level int
	}
	var opens []at
	add := func(n ast.Node, k kind, level int) {
		p := n.Pos()
		if p < 0 {
			if l := n.Lines(); l != nil && l.Len() > 0 {
				p = l.At(0).Start
			}
		}
		if p < 0 {
			return
		}
		ln := lineOf(p)
		if len(opens) > 0 && opens[len(opens)-1].line >= ln {
			return // two nodes on one line: one block
		}
		opens = append(opens, at{line: ln, kind: k, level: level})
	}
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		switch n := n.(type) {
		case *ast.Heading:
			add(n, kindHeading, n.Level)
		case *ast.List:
			for item := n.FirstChild(); item != nil; item = item.NextSibling() {
				add(item, kindEntry, 0)
			}
		default:
			add(n, kindEntry, 0)
		}
	}
	// Non-blank lines before the first block the parser saw are a block of their own.
	if first := firstNonBlank(lines); first >= 0 && (len(opens) == 0 || opens[0].line > first) {
		opens = append([]at{{line: first, kind: kindEntry}}, opens...)
	}
	blocks := make([]block, 0, len(opens))
	var stack []int // the headings whose sections are open
	for k, o := range opens {
		end := len(lines) - 1
		if k+1 < len(opens) {
			end = opens[k+1].line - 1
		}
		for end > o.line && strings.TrimSpace(lines[end]) == "" {
			end--
		}
		b := block{first: o.line, last: end, kind: o.kind, level: o.level, parent: -1}
		if o.kind == kindHeading {
			for len(stack) > 0 && blocks[stack[len(stack)-1]].level >= o.level {
				stack = stack[:len(stack)-1]
			}
		}
		if len(stack) > 0 {
			b.parent = stack[len(stack)-1]
		}
		blocks = append(blocks, b)
		if o.kind == kindHeading {
			stack = append(stack, len(blocks)-1)
		}
	}
	return lines, blocks
}

func firstNonBlank(lines []string) int {
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			return i
		}
	}
	return -1
}

// headingOf is the text of the heading whose section holds block k ("" when none).
func headingOf(lines []string, blocks []block, k int) string {
	if p := blocks[k].parent; p >= 0 {
		return strings.TrimSpace(lines[blocks[p].first])
	}
	return ""
}
