package httpapi

import (
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxRefBytes is the size of the history's ref column.
const maxRefBytes = 128

// HeaderRef reads the first of the named headers that is set (X-Request-Id,
// X-Tool-Call-Id) and makes it fit for the history's ref column with CleanRef. REST and MCP
// both read request ids through it.
func HeaderRef(h http.Header, names ...string) string {
	for _, n := range names {
		if ref := CleanRef(h.Get(n)); ref != "" {
			return ref
		}
	}
	return ""
}

// CleanRef makes a caller-chosen reference safe to store and log: valid UTF-8, no control
// characters, trimmed, at most maxRefBytes bytes (cut on a rune boundary).
func CleanRef(s string) string {
	s = strings.ToValidUTF8(s, "")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	for len(s) > maxRefBytes {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return strings.TrimSpace(s)
}
