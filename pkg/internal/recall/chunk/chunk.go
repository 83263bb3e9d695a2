// Package chunk splits a Markdown memory file into searchable chunks that follow its
// headings and paragraphs, and dates a file from its name.
package chunk

import (
	"crypto/sha256"
	"encoding/hex"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// Chunk is one piece of a file.
type Chunk struct {
	Ordinal int
	// StartLine and EndLine are 1-based and inclusive.
	StartLine, EndLine int
	// Heading is the nearest heading above (or at) the chunk's start, without the #s.
	Heading string
	// Text is the chunk's lines as in the file.
	Text string
	// Hash is the SHA-256 (hex) of Embeddable().
	Hash string
}

// Embeddable is the text scored and embedded: the heading is prefixed when the chunk does
// not start with it, so a paragraph keeps the context of its section.
func (c Chunk) Embeddable() string {
	if c.Heading == "" || strings.HasPrefix(strings.TrimSpace(c.Text), "#") {
		return c.Text
	}
	return c.Heading + "\n" + c.Text
}

// Options bound the chunks.
type Options struct {
	// MaxTokens is the target size (default 400).
	MaxTokens int
	// OverlapTokens is roughly how much of the end of a chunk starts the next one (default 60).
	OverlapTokens int
	// Count counts tokens (default: an estimate of about 4 bytes per token, 1 per CJK rune).
	Count func(string) int
}

func (o Options) withDefaults() Options {
	if o.MaxTokens <= 0 {
		o.MaxTokens = 400
	}
	if o.OverlapTokens < 0 || o.OverlapTokens >= o.MaxTokens {
		o.OverlapTokens = 0
	} else if o.OverlapTokens == 0 {
		o.OverlapTokens = 60
	}
	if o.Count == nil {
		o.Count = approxTokens
	}
	return o
}

// approxTokens is the fallback count: one token per CJK rune, one per four other bytes.
func approxTokens(s string) int {
	n, other := 0, 0
	for _, r := range s {
		if r >= 0x2E80 {
			n++
		} else {
			other++
		}
	}
	return n + (other+3)/4
}

// line is one source line with its number and heading context.
type line struct {
	no      int
	text    string
	heading string
	tokens  int
	// piece is true for part of a line cut because it was too long.
	piece bool
}

// block is a run of lines that belong together: a heading line, or a paragraph.
type block struct{ lines []line }

func (b block) tokens() int {
	n := 0
	for _, l := range b.lines {
		n += l.tokens
	}
	return n
}

// Split cuts content into chunks. Headings start a new chunk; paragraphs are packed up to
// MaxTokens; a paragraph larger than that is cut at line boundaries, and a line larger than
// that at rune boundaries. Consecutive chunks within a section share about OverlapTokens of
// trailing lines. Blank content gives no chunks.
func Split(content string, o Options) []Chunk {
	o = o.withDefaults()
	content = strings.ToValidUTF8(content, "\uFFFD")
	raw := strings.Split(strings.ReplaceAll(content, "\r\n", "\n"), "\n")
	var blocks []block
	var cur block
	heading := ""
	inFence := false
	flush := func() {
		if len(cur.lines) > 0 {
			blocks = append(blocks, cur)
			cur = block{}
		}
	}
	for i, t := range raw {
		trimmed := strings.TrimSpace(t)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			inFence = !inFence
		}
		isHeading := !inFence && strings.HasPrefix(trimmed, "#") && headingRE.MatchString(trimmed)
		if isHeading {
			flush()
			heading = strings.TrimSpace(strings.TrimLeft(trimmed, "#"))
		}
		if trimmed == "" && !inFence {
			flush()
			continue
		}
		pieces := splitLong(t, o)
		for _, piece := range pieces {
			cur.lines = append(cur.lines, line{no: i + 1, text: piece, heading: heading, tokens: o.Count(piece) + 1, piece: len(pieces) > 1})
		}
		if isHeading {
			// A heading is its own block, so it can lead the chunk of its section.
			cur.lines[len(cur.lines)-1].heading = heading
			flush()
		}
	}
	flush()

	var out []Chunk
	var acc []line
	accTokens := 0
	emit := func() {
		if len(acc) == 0 {
			return
		}
		c := Chunk{Ordinal: len(out), StartLine: acc[0].no, EndLine: acc[len(acc)-1].no, Heading: acc[0].heading}
		if acc[0].piece || acc[len(acc)-1].piece {
			texts := make([]string, len(acc))
			for i, l := range acc {
				texts[i] = l.text
			}
			c.Text = strings.Join(texts, "\n")
		} else {
			// Whole lines: the chunk is exactly lines StartLine..EndLine of the file.
			c.Text = strings.Join(raw[c.StartLine-1:c.EndLine], "\n")
		}
		sum := sha256.Sum256([]byte(c.Embeddable()))
		c.Hash = hex.EncodeToString(sum[:])
		out = append(out, c)
	}
	// overlap keeps the trailing lines of acc worth about OverlapTokens.
	overlap := func() {
		keep := 0
		n := 0
		for i := len(acc) - 1; i > 0; i-- {
			if n+acc[i].tokens > o.OverlapTokens {
				break
			}
			n += acc[i].tokens
			keep++
		}
		acc = append([]line(nil), acc[len(acc)-keep:]...)
		accTokens = n
	}
	for _, b := range blocks {
		if len(b.lines) == 1 && headingRE.MatchString(strings.TrimSpace(b.lines[0].text)) && !onlyHeadings(acc) {
			// A heading starts a chunk; headings directly under one another (a note's date
			// title over its first section) stay together with the section's text: a chunk of
			// headings alone would win one-word queries with nothing to say.
			emit()
			acc, accTokens = nil, 0
		}
		if accTokens > 0 && accTokens+b.tokens() > o.MaxTokens && !onlyHeadings(acc) {
			emit()
			overlap()
		}
		for _, l := range b.lines {
			if accTokens > 0 && accTokens+l.tokens > o.MaxTokens && !onlyHeadings(acc) {
				emit()
				overlap()
			}
			acc = append(acc, l)
			accTokens += l.tokens
		}
	}
	emit()
	return out
}

var headingRE = regexp.MustCompile(`^#{1,6}\s+\S`)

// onlyHeadings reports whether acc has lines and all of them are headings.
func onlyHeadings(acc []line) bool {
	for _, l := range acc {
		if !headingRE.MatchString(strings.TrimSpace(l.text)) {
			return false
		}
	}
	return len(acc) > 0
}

// splitLong cuts a line longer than MaxTokens into pieces at rune boundaries.
func splitLong(t string, o Options) []string {
	if o.Count(t) <= o.MaxTokens {
		return []string{t}
	}
	var out []string
	for len(t) > 0 {
		// Grow a piece rune by rune in steps; pieces are at most MaxTokens.
		end := 0
		for end < len(t) {
			_, size := utf8.DecodeRuneInString(t[end:])
			if o.Count(t[:end+size]) > o.MaxTokens && end > 0 {
				break
			}
			end += size
			// Counting from the start each time is quadratic; step in larger strides first.
			if end+256 < len(t) && o.Count(t[:end+256]) <= o.MaxTokens {
				end += 256
				for end < len(t) && !utf8.RuneStart(t[end]) {
					end++
				}
			}
		}
		out = append(out, t[:end])
		t = t[end:]
	}
	return out
}

var dateRE = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2})`)

// NoteDate finds the date of a dated note: a path component under memory/ (at any depth)
// starting with YYYY-MM-DD, the deepest one winning (memory/2026/04/2026-04-03.md,
// memory/projects/2026-04-03-launch.md, memory/2026-04-03/notes.md). MEMORY.md, PROFILE.md and
// other files are not dated.
func NoteDate(filename string, loc *time.Location) (time.Time, bool) {
	if !strings.HasPrefix(filename, "memory/") {
		return time.Time{}, false
	}
	parts := strings.Split(strings.TrimPrefix(filename, "memory/"), "/")
	for i := len(parts) - 1; i >= 0; i-- {
		p := parts[i]
		if i == len(parts)-1 {
			p = strings.TrimSuffix(p, path.Ext(p))
		}
		if m := dateRE.FindString(p); m != "" {
			if loc == nil {
				loc = time.UTC
			}
			if d, err := time.ParseInLocation("2006-01-02", m, loc); err == nil {
				return d, true
			}
		}
	}
	return time.Time{}, false
}
