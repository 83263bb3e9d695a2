package workspace

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameBytes is the longest filename accepted (the column is VARCHAR(256)).
const MaxNameBytes = 256

// ValidateName checks a workspace filename: a relative path ending in .md, no absolute path,
// no "..", no backslash, no control characters, at most 256 bytes.
func ValidateName(name string) error {
	switch {
	case name == "":
		return invalidf("filename is empty")
	case len(name) > MaxNameBytes:
		return invalidf("filename is %d bytes; at most %d allowed", len(name), MaxNameBytes)
	case !utf8.ValidString(name):
		return invalidf("filename is not valid UTF-8")
	case strings.HasPrefix(name, "/") || strings.HasPrefix(name, "\\"):
		return invalidf("filename %q is an absolute path; use a relative path such as MEMORY.md or memory/2026-04-01.md", name)
	case strings.Contains(name, "\\"):
		return invalidf("filename %q contains a backslash; use / between folders", name)
	}
	for _, r := range name {
		if r == 0 || unicode.IsControl(r) {
			return invalidf("filename %q contains a control character", name)
		}
	}
	for _, seg := range strings.Split(name, "/") {
		switch seg {
		case "..":
			return invalidf("filename %q contains '..'; directory traversal is not allowed", name)
		case "", ".":
			return invalidf("filename %q has an empty or '.' path segment", name)
		}
		if strings.TrimSpace(seg) != seg {
			return invalidf("filename %q has a path segment with leading or trailing spaces", name)
		}
	}
	if !strings.HasSuffix(name, ".md") || len(name) == len(".md") || strings.HasSuffix(name, "/.md") {
		return invalidf("filename %q must end in .md (only Markdown files are supported)", name)
	}
	return nil
}

func invalidf(format string, args ...any) error {
	return &InvalidError{Msg: fmt.Sprintf(format, args...)}
}
