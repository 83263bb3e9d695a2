package workspace_test

import (
	"context"
	"errors"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// FuzzValidateName checks that every accepted name is a plain relative Markdown path.
// The seed corpus runs in plain `go test`; `go test -fuzz=FuzzValidateName` explores more.
func FuzzValidateName(f *testing.F) {
	for _, s := range []string{
		"MEMORY.md", "memory/2026-04-01.md", "a/b/c.md", "记忆/笔记.md", "x.md",
		"../x.md", "/etc/a.md", "a.txt", "memory/../../x.md", "..", ".md", "a/.md", "a..b.md",
		"\\x.md", "a\\b.md", "C:/x.md", "c:x.md", "a\x00.md", "a\n.md", "a\u202e.md", "a\u200b.md",
		"./a.md", "a/./b.md", "a//b.md", "a/", " a.md", "a /b.md", "a.MD", "a.md ", "\xff.md",
		strings.Repeat("a", 253) + ".md", strings.Repeat("a", 254) + ".md", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := workspace.ValidateName(name)
		if err != nil {
			if !errors.Is(err, workspace.ErrInvalid) {
				t.Fatalf("%q: error %v is not ErrInvalid", name, err)
			}
			if err.Error() == "" {
				t.Fatalf("%q: empty error message", name)
			}
			return
		}
		switch {
		case strings.Contains(name, ".."):
			t.Fatalf("accepted %q containing '..'", name)
		case strings.HasPrefix(name, "/"), path.IsAbs(name):
			t.Fatalf("accepted absolute %q", name)
		case !strings.HasSuffix(name, ".md") || len(name) <= len(".md"):
			t.Fatalf("accepted %q not ending in .md", name)
		case len(name) > workspace.MaxNameBytes:
			t.Fatalf("accepted %d-byte name", len(name))
		case strings.ContainsRune(name, '\\'):
			t.Fatalf("accepted %q with a backslash", name)
		case !utf8.ValidString(name):
			t.Fatalf("accepted invalid UTF-8 %q", name)
		case path.Clean(name) != name:
			t.Fatalf("accepted non-canonical %q (clean: %q)", name, path.Clean(name))
		case !filepath.IsLocal(name):
			t.Fatalf("accepted %q that is not local", name)
		}
		for _, r := range name {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
				t.Fatalf("accepted %q with control or format character %U", name, r)
			}
		}
	})
}

// FuzzEdit checks Edit against a reference: the result is exactly strings.Replace of the
// stored content, the count is right, the version moves by one on success and not at all on
// refusal, and a refused edit changes nothing.
func FuzzEdit(f *testing.F) {
	for _, s := range []struct {
		content, old, new string
		all               bool
	}{
		{"hello world", "world", "there", false},
		{"a a a", "a", "b", true},
		{"a a a", "a", "b", false}, // ambiguous without replaceAll
		{"aaa", "aa", "a", true},   // overlapping occurrences
		{"abab", "ab", "", true},   // deletion
		{"x", "", "y", false},      // empty oldText
		{"same", "same", "same", false},
		{"missing", "nope", "x", false},
		{"多语言 内容 内容", "内容", "content", true},
		{"line1\nline2\n", "line1\n", "", false},
		{"aab", "ab", "b", true}, // replacing can leave a new occurrence behind
		{"ok", "ok", "\xff", false},
	} {
		f.Add(s.content, s.old, s.new, s.all)
	}
	db := storetest.SQLite(f)
	const maxBytes = 1 << 16
	ws := workspace.New(db.DB, workspace.WithMaxBytes(maxBytes))
	ctx := context.Background()
	var agent atomic.Int64
	f.Fuzz(func(t *testing.T, content, oldText, newText string, replaceAll bool) {
		if !utf8.ValidString(content) || len(content) > 1<<14 || len(oldText) > 1<<10 || len(newText) > 1<<10 {
			t.Skip("content must be valid UTF-8 and of a sane size to be stored at all")
		}
		a := agent.Add(1)
		before, _, err := ws.Write(ctx, a, "f.md", content, workspace.AnyVersion, tool)
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		after, n, err := ws.Edit(ctx, a, "f.md", oldText, newText, replaceAll, workspace.AnyVersion, tool)

		// The reference: what the edit must do, or that it must be refused.
		want, wantN, refuse := "", 0, false
		switch count := strings.Count(content, oldText); {
		case oldText == "", oldText == newText, count == 0, count > 1 && !replaceAll:
			refuse = true
		case replaceAll:
			want, wantN = strings.ReplaceAll(content, oldText, newText), count
		default:
			want, wantN = strings.Replace(content, oldText, newText, 1), 1
		}
		// Note: "no oldText is left after replaceAll" does not hold in general: "aab" with
		// "ab" → "b" leaves "ab". The reference above is the real invariant.
		refuse = refuse || !utf8.ValidString(want) || len(want) > maxBytes
		if refuse {
			if !errors.Is(err, workspace.ErrInvalid) {
				t.Fatalf("edit(%q → %q, all=%v) on %q: err %v, want ErrInvalid", oldText, newText, replaceAll, content, err)
			}
			cur, gerr := ws.Get(ctx, a, "f.md")
			if gerr != nil || cur.Content != content || cur.Version != before.Version {
				t.Fatalf("a refused edit changed the file: %q v%d (%v)", cur.Content, cur.Version, gerr)
			}
			return
		}
		if err != nil {
			t.Fatalf("edit(%q → %q, all=%v) on %q: %v", oldText, newText, replaceAll, content, err)
		}
		if after.Content != want || n != wantN {
			t.Fatalf("edit(%q → %q, all=%v) on %q: %q with %d replacements, want %q with %d", oldText, newText, replaceAll, content, after.Content, n, want, wantN)
		}
		if after.Version != before.Version+1 || after.FileSize != int64(len(want)) {
			t.Fatalf("version %d→%d, size %d for %d bytes", before.Version, after.Version, after.FileSize, len(want))
		}
		stored, err := ws.Get(ctx, a, "f.md")
		if err != nil || stored.Content != after.Content {
			t.Fatalf("stored %q, returned %q (%v)", stored.Content, after.Content, err)
		}
	})
}
