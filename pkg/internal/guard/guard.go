// Package guard protects memory files from destructive rewrites and keeps secrets out of
// them. The summarizer and the emergence worker call CheckRewrite before replacing
// PROFILE.md or MEMORY.md with model output, and Redact on every text they write.
package guard

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// ErrRefused is matched by every *RefusedError (errors.Is(err, guard.ErrRefused)).
var ErrRefused = errors.New("rewrite refused")

// RefusedError says why a rewrite was refused. The file must be left as it is and the
// reason recorded (run ledger).
type RefusedError struct {
	Reason string
}

func (e *RefusedError) Error() string { return "rewrite refused: " + e.Reason }

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Thresholds of the rewrite rule (see CheckRewrite).
const (
	// TrivialSize: an existing file smaller than this (after trimming, in the units of size)
	// may be replaced by anything non-empty; seeded placeholders and near-empty files are
	// not worth guarding.
	TrivialSize = 200
	// MinKeptLength: a rewrite of a non-trivial file must keep at least 40% of its length.
	MinKeptLength = 0.4
	// MinLinesForLineRule: the line rule applies once the old file has this many distinct
	// non-empty lines.
	MinLinesForLineRule = 4
	// MinKeptLines: at least half of the old file's distinct lines must survive, a line
	// surviving when at least half of its words (or, for Chinese, character pairs) still
	// occur somewhere in the new text.
	MinKeptLines = 0.5
)

// CheckRewrite decides whether new may fully replace old. It refuses when
//
//   - new is empty or only whitespace;
//   - truncated is true (the model stopped at its token limit, so new is cut off);
//   - old is non-trivial (size at least TrivialSize) and new is smaller than MinKeptLength
//     (40%) of old. Size counts characters, a Han/Hangul/kana character counting two: one
//     such character carries about as much as two Latin letters, so Chinese and English
//     memories reach the thresholds at similar amounts of content; or
//   - old is non-trivial with at least MinLinesForLineRule distinct non-empty lines and fewer
//     than MinKeptLines (half) of them survive in new. A line survives when at least half of
//     its tokens (lower-cased words of letters and digits; for Han script, overlapping pairs
//     of characters) occur anywhere in new. The comparison is by tokens, not exact lines, so
//     that a model may reword, merge and reorder lines; what it may not do is replace the
//     file with something about other things, or keep only the newest fact.
//
// A refusal is a *RefusedError whose Reason says which rule fired with the figures.
func CheckRewrite(old, new string, truncated bool) error {
	if strings.TrimSpace(new) == "" {
		return &RefusedError{Reason: "the new content is empty"}
	}
	if truncated {
		return &RefusedError{Reason: "the model stopped at its output token limit, so the new content is cut off"}
	}
	oldT, newT := strings.TrimSpace(old), strings.TrimSpace(new)
	oldN, newN := size(oldT), size(newT)
	if oldN < TrivialSize {
		return nil
	}
	if float64(newN) < MinKeptLength*float64(oldN) {
		return &RefusedError{Reason: fmt.Sprintf(
			"the new content (size %d) is shorter than %.0f%% of the existing file (size %d; a CJK character counts two)",
			newN, MinKeptLength*100, oldN)}
	}
	lines := distinctLines(oldT)
	if len(lines) < MinLinesForLineRule {
		return nil
	}
	have := tokenSet(newT)
	kept := 0
	for _, l := range lines {
		toks := tokens(l)
		hit := 0
		for _, t := range toks {
			if have[t] {
				hit++
			}
		}
		if 2*hit >= len(toks) {
			kept++
		}
	}
	if float64(kept) < MinKeptLines*float64(len(lines)) {
		return &RefusedError{Reason: fmt.Sprintf(
			"the new content keeps only %d of the existing file's %d distinct lines (at least %.0f%% must survive)",
			kept, len(lines), MinKeptLines*100)}
	}
	return nil
}

// size counts characters, wide (CJK) ones twice.
func size(s string) int {
	n := 0
	for _, r := range s {
		n++
		if unicode.In(r, unicode.Han, unicode.Hangul, unicode.Hiragana, unicode.Katakana) {
			n++
		}
	}
	return n
}

// distinctLines returns the non-empty lines of s that carry at least one token, each once.
func distinctLines(s string) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range strings.Split(s, "\n") {
		key := strings.Join(tokens(l), " ")
		if key == "" || seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, l)
	}
	return out
}

func tokenSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, t := range tokens(s) {
		m[t] = true
	}
	return m
}

// tokens splits s into lower-cased words of letters and digits; a run of Han characters
// becomes its overlapping character pairs (a single Han character stands alone).
func tokens(s string) []string {
	var out []string
	var word []rune
	var han []rune
	flushWord := func() {
		if len(word) > 0 {
			out = append(out, strings.ToLower(string(word)))
			word = word[:0]
		}
	}
	flushHan := func() {
		switch {
		case len(han) == 1:
			out = append(out, string(han))
		case len(han) > 1:
			for i := 0; i+1 < len(han); i++ {
				out = append(out, string(han[i:i+2]))
			}
		}
		han = han[:0]
	}
	for _, r := range s {
		switch {
		case unicode.Is(unicode.Han, r):
			flushWord()
			han = append(han, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			flushHan()
			word = append(word, r)
		default:
			flushWord()
			flushHan()
		}
	}
	flushWord()
	flushHan()
	return out
}
