package workspace

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameBytes is the longest filename accepted (the column is VARCHAR(256)).
const MaxNameBytes = 256

// ValidateName checks a workspace filename: a relative path ending in .md, no absolute path
// (nor a Windows drive prefix), no ".." anywhere, no backslash, no control or invisible format
// characters (NUL, bidi overrides, zero-width spaces: they make look-alike names), at most
// 256 bytes.
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
	case strings.Contains(name, ".."):
		// The spec refuses ".." anywhere, not only as a whole segment: simpler to trust.
		return invalidf("filename %q contains '..'; directory traversal is not allowed", name)
	case len(name) >= 2 && name[1] == ':' && (name[0]|0x20) >= 'a' && (name[0]|0x20) <= 'z':
		return invalidf("filename %q starts with a drive letter; use a relative path such as MEMORY.md", name)
	}
	for _, r := range name {
		if r == 0 || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return invalidf("filename %q contains a control or invisible formatting character", name)
		}
	}
	for _, seg := range strings.Split(name, "/") {
		switch seg {
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
