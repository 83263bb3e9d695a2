// Package promptsafe keeps stored text from forging the structure of the prompts it is put in:
// a message that closes </transcript>, a line "Assistant: ..." that reads as another turn,
// a MEMORY.md line "--- SOUL.md ---" that reads as another file. Each function changes only
// the few characters that would be read as structure, so the text stays readable.
package promptsafe

import (
	"regexp"
	"strings"
)

var tagName = regexp.MustCompile(`</?([A-Za-z_][A-Za-z0-9_\-]*)[^<>]*>`)

// TagNames lists the names of the XML-like tags a prompt template uses (<transcript>,
// </memory>, <daily_note date="...">), in order of first use.
func TagNames(template string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range tagName.FindAllStringSubmatch(template, -1) {
		n := strings.ToLower(m[1])
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// Tags escapes, in text inserted into a prompt, the opening "<" of every tag named in names
// ("</transcript>" becomes "&lt;/transcript>"), so the text cannot close or open the
// template's sections. Other angle brackets are left alone.
func Tags(text string, names []string) string {
	if len(names) == 0 || !strings.Contains(text, "<") {
		return text
	}
	var b strings.Builder
	rest := text
	for {
		i := strings.IndexByte(rest, '<')
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		b.WriteString(rest[:i])
		rest = rest[i:]
		if isTag(rest, names) {
			b.WriteString("&lt;")
		} else {
			b.WriteByte('<')
		}
		rest = rest[1:]
	}
}

func isTag(s string, names []string) bool {
	s = strings.TrimLeft(s[1:], " \t")
	s = strings.TrimPrefix(s, "/")
	s = strings.TrimLeft(s, " \t")
	for _, n := range names {
		if len(s) >= len(n) && strings.EqualFold(s[:len(n)], n) {
			if len(s) == len(n) {
				return true
			}
			switch c := s[len(n)]; {
			case c == '>' || c == ' ' || c == '/' || c == '\t' || c == '\n':
				return true
			}
		}
	}
	return false
}

// Indent puts pad before every line of s after the first, so that no line of a multi-line
// entry starts at the margin where entry labels ("用户: ", "Assistant: ", "### ") are.
func Indent(s, pad string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	return strings.ReplaceAll(s, "\n", "\n"+pad)
}

// EscapeLines prefixes with a backslash every line of s for which isDelimiter is true, so a
// stored line that looks like one of the prompt's delimiters is not read as one.
func EscapeLines(s string, isDelimiter func(line string) bool) string {
	if s == "" {
		return s
	}
	lines := strings.Split(s, "\n")
	changed := false
	for i, l := range lines {
		if isDelimiter(l) {
			lines[i] = `\` + l
			changed = true
		}
	}
	if !changed {
		return s
	}
	return strings.Join(lines, "\n")
}

// FileDelimiter reports whether line reads as the system prompt's "--- NAME ---" header.
func FileDelimiter(line string) bool {
	t := strings.TrimSpace(line)
	return len(t) > 7 && strings.HasPrefix(t, "---") && strings.HasSuffix(t, "---") &&
		strings.TrimSpace(strings.Trim(t, "-")) != ""
}
