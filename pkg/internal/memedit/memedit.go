// Package memedit applies a model's edits to a core memory file (MEMORY.md, PROFILE.md)
// instead of taking the whole new file from it, so that an extraction's or an emergence's
// output grows with the change, not with the file (issue 22).
//
// An edit is one of three operations, each anchored on text the file holds exactly once:
//
//	{"op":"add","under":"## Preferences","text":"- likes tea"}   a line at the end of a section
//	{"op":"add","text":"## Travel\n- moved to Berlin"}            (no under) at the end of the file
//	{"op":"replace","old":"- lives in Paris","new":"- lives in Berlin"}
//	{"op":"delete","old":"- the beta ships in May"}
//
// A file's edits apply in order, each to the result of the ones before, and all or nothing:
// the first one whose anchor is missing or ambiguous refuses them all (an *AnchorError).
package memedit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The operations.
const (
	OpAdd     = "add"
	OpReplace = "replace"
	OpDelete  = "delete"
)

// MaxEdits bounds one file's edits in one answer: more than that is a rewrite in disguise.
const MaxEdits = 200

// Edit is one operation on a file.
type Edit struct {
	// Op is add, replace or delete.
	Op string `json:"op"`
	// Under (add only) is the heading the text goes under, e.g. "## Preferences" (or just
	// "Preferences"); empty adds at the end of the file.
	Under string `json:"under,omitempty"`
	// Text (add only) is the line or lines to add.
	Text string `json:"text,omitempty"`
	// Old (replace, delete) is the exact text to change, found exactly once in the file.
	Old string `json:"old,omitempty"`
	// New (replace only) is the text that takes Old's place.
	New string `json:"new,omitempty"`
}

// ErrAnchor is matched by every *AnchorError.
var ErrAnchor = errors.New("edit anchor not found exactly once")

// AnchorError says which edit could not be placed and why.
type AnchorError struct {
	// Index is the edit's position in the list, from 0.
	Index int
	Edit  Edit
	// Count is how often the anchor occurs (0: missing, 2 or more: ambiguous).
	Count int
}

func (e *AnchorError) Error() string {
	what, anchor := "text", e.Edit.Old
	if e.Edit.Op == OpAdd {
		what, anchor = "heading", e.Edit.Under
	}
	if e.Count == 0 {
		return fmt.Sprintf("edit %d (%s): %s %q not found", e.Index+1, e.Edit.Op, what, clip(anchor, 80))
	}
	return fmt.Sprintf("edit %d (%s): %s %q is ambiguous: it occurs %d times", e.Index+1, e.Edit.Op, what, clip(anchor, 80), e.Count)
}

// Is makes errors.Is(err, ErrAnchor) true.
func (e *AnchorError) Is(target error) bool { return target == ErrAnchor }

// Parse reads a JSON list of edits strictly: every element an object with a known op and
// exactly the fields that op takes, none of them blank where required, no unknown fields.
// field names the list in errors (e.g. "memory_edits"). null is an empty list.
func Parse(field string, raw json.RawMessage) ([]Edit, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("%s must be a list of edit objects, got %s", field, clip(string(raw), 60))
	}
	if len(items) > MaxEdits {
		return nil, fmt.Errorf("%s holds %d edits, at most %d are accepted (send the whole file instead)", field, len(items), MaxEdits)
	}
	edits := make([]Edit, 0, len(items))
	for i, item := range items {
		e, err := parseOne(item)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		edits = append(edits, e)
	}
	return edits, nil
}

func parseOne(item json.RawMessage) (Edit, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(item, &fields); err != nil || fields == nil {
		return Edit{}, fmt.Errorf("must be an object like {\"op\":\"add\",\"under\":\"## Heading\",\"text\":\"- line\"}, got %s", clip(string(item), 60))
	}
	str := func(name string) (string, bool, error) {
		v, ok := fields[name]
		if !ok || string(bytes.TrimSpace(v)) == "null" {
			return "", false, nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", true, fmt.Errorf("%s must be a string, got %s", name, clip(string(v), 40))
		}
		return s, true, nil
	}
	var e Edit
	var err error
	if e.Op, _, err = str("op"); err != nil {
		return Edit{}, err
	}
	allowed := map[string][]string{
		OpAdd:     {"op", "under", "text"},
		OpReplace: {"op", "old", "new"},
		OpDelete:  {"op", "old"},
	}
	names, ok := allowed[e.Op]
	if !ok {
		return Edit{}, fmt.Errorf("op must be add, replace or delete, got %q", clip(e.Op, 20))
	}
	for name := range fields {
		if !slices.Contains(names, name) {
			return Edit{}, fmt.Errorf("%s takes only %s; unexpected field %q", e.Op, strings.Join(names[1:], " and "), name)
		}
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"under", &e.Under}, {"text", &e.Text}, {"old", &e.Old}, {"new", &e.New}} {
		if *f.dst, _, err = str(f.name); err != nil {
			return Edit{}, err
		}
	}
	switch e.Op {
	case OpAdd:
		if strings.TrimSpace(e.Text) == "" {
			return Edit{}, errors.New("add needs a non-empty text")
		}
	case OpReplace:
		if e.Old == "" || strings.TrimSpace(e.New) == "" {
			return Edit{}, errors.New("replace needs a non-empty old and a non-empty new (to remove text, use delete)")
		}
		if e.Old == e.New {
			return Edit{}, errors.New("replace's old and new are the same text")
		}
	case OpDelete:
		if strings.TrimSpace(e.Old) == "" {
			return Edit{}, errors.New("delete needs a non-empty old")
		}
	}
	return e, nil
}

// Apply applies edits to content in order, all or nothing: it returns the new content, or
// an *AnchorError for the first edit whose anchor is missing or occurs more than once (the
// content is then not to be changed at all).
func Apply(content string, edits []Edit) (string, error) {
	for i, e := range edits {
		var n int
		switch e.Op {
		case OpAdd:
			content, n = add(content, e.Under, e.Text)
		case OpReplace:
			content, n = replace(content, e.Old, e.New)
		case OpDelete:
			content, n = del(content, e.Old)
		default:
			return "", fmt.Errorf("edit %d: unknown op %q", i+1, e.Op)
		}
		if n != 1 {
			return "", &AnchorError{Index: i, Edit: e, Count: n}
		}
	}
	return content, nil
}

// occurrences counts where s occurs in content, overlapping occurrences included (so that
// "aa" in "aaa" is ambiguous), and returns the first one's offset.
func occurrences(content, s string) (first, n int) {
	first = -1
	for off := 0; off <= len(content); {
		i := strings.Index(content[off:], s)
		if i < 0 {
			break
		}
		if first < 0 {
			first = off + i
		}
		n++
		off += i + 1
	}
	return first, n
}

func replace(content, old, new string) (string, int) {
	i, n := occurrences(content, old)
	if n != 1 {
		return content, n
	}
	return content[:i] + new + content[i+len(old):], 1
}

// del removes old; when old spans whole lines, their line break goes too, so that no blank
// line is left where they were.
func del(content, old string) (string, int) {
	i, n := occurrences(content, old)
	if n != 1 {
		return content, n
	}
	end := i + len(old)
	if (i == 0 || content[i-1] == '\n') && end < len(content) && content[end] == '\n' && !strings.HasSuffix(old, "\n") {
		end++
	}
	return content[:i] + content[end:], 1
}

// add puts text at the end of the section under the heading (before the next heading of the
// same or a higher level, after the section's last non-blank line), or at the end of the
// file when under is empty.
func add(content, under, text string) (string, int) {
	text = strings.Trim(text, "\n")
	lines := strings.Split(strings.TrimRight(content, "\n"), "\n")
	if strings.TrimSpace(content) == "" {
		lines = nil
	}
	levels := headingLevels(lines)
	at := len(lines)
	if strings.TrimSpace(under) != "" {
		h, n := findHeading(lines, levels, under)
		if n != 1 {
			return content, n
		}
		for j := h + 1; j < len(lines); j++ {
			if l := levels[j]; l > 0 && l <= levels[h] {
				at = j
				break
			}
		}
		for at > h+1 && strings.TrimSpace(lines[at-1]) == "" {
			at--
		}
	} else {
		for at > 0 && strings.TrimSpace(lines[at-1]) == "" {
			at--
		}
	}
	ins := strings.Split(text, "\n")
	if strings.TrimSpace(under) == "" && at > 0 && headingLevel(ins[0]) > 0 {
		// A new section at the end is set off by a blank line, as Markdown headings are.
		ins = append([]string{""}, ins...)
	}
	out := make([]string, 0, len(lines)+len(ins))
	out = append(out, lines[:at]...)
	out = append(out, ins...)
	out = append(out, lines[at:]...)
	return strings.Join(out, "\n") + "\n", 1
}

// findHeading returns the line of the heading matching under, and how many match: a
// heading line equal to under (trimmed), or, when under has no leading #, a heading whose
// title is under.
func findHeading(lines []string, levels []int, under string) (int, int) {
	under = strings.TrimSpace(under)
	at, n := -1, 0
	for i, l := range lines {
		if levels[i] == 0 {
			continue
		}
		t := strings.TrimSpace(l)
		if t == under || (!strings.HasPrefix(under, "#") && strings.TrimSpace(strings.TrimLeft(t, "#")) == under) {
			if at < 0 {
				at = i
			}
			n++
		}
	}
	return at, n
}

// headingLevels is each line's heading level (0: no heading); a "#" line inside a fenced
// code block (``` or ~~~) is code, not a heading.
func headingLevels(lines []string) []int {
	levels := make([]int, len(lines))
	fence := ""
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if fence != "" {
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fence = t[:3]
			continue
		}
		levels[i] = headingLevel(l)
	}
	return levels
}

// headingLevel is the ATX heading level of a line (1 to 6), 0 when it is no heading.
func headingLevel(line string) int {
	l := strings.TrimLeft(line, " ")
	if len(line)-len(l) > 3 {
		return 0
	}
	n := 0
	for n < len(l) && l[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || (n < len(l) && l[n] != ' ' && l[n] != '\t') {
		return 0
	}
	return n
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
