package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	mdLink   = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	backtick = regexp.MustCompile("`([^`]+)`")
	// A path into the repository: starts with one of its top-level folders.
	repoPath = regexp.MustCompile(`^(\./)?(pkg|cmd|deploy|docs|prompts|test|clients)/[A-Za-z0-9_./*{}-]*$`)
	heading  = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)
	fence    = regexp.MustCompile("(?s)```.*?```")
)

// files are the documents checked: README.md and everything under docs/.
func files(t *testing.T) []string {
	out := []string{"../README.md"}
	m, err := filepath.Glob("*.md")
	if err != nil || len(m) == 0 {
		t.Fatalf("no docs found: %v", err)
	}
	return append(out, m...)
}

// slug is GitHub's anchor for a heading.
func slug(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ' || r == '-':
			b.WriteRune('-')
		case r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(t *testing.T, path string) map[string]bool {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(string(raw), ""), -1) {
		out[slug(strings.ReplaceAll(m[1], "`", ""))] = true
	}
	return out
}

func exists(pattern string) bool {
	if strings.ContainsAny(pattern, "*{") {
		base := pattern
		if i := strings.IndexAny(base, "*{"); i >= 0 {
			base = base[:i]
		}
		m, _ := filepath.Glob(base + "*")
		return len(m) > 0
	}
	_, err := os.Stat(pattern)
	return err == nil
}

// TestReferencesResolve: every relative link (with its #anchor), and every repository path
// named in backticks, in README.md and docs/*.md exists.
func TestReferencesResolve(t *testing.T) {
	for _, f := range files(t) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(raw)
		dir := filepath.Dir(f)
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := f
			if file != "" {
				path = filepath.Join(dir, file)
				if !exists(path) {
					t.Errorf("%s: link %q: %s does not exist", f, target, path)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchors(t, path)[anchor] {
				t.Errorf("%s: link %q: no heading with anchor #%s in %s", f, target, anchor, path)
			}
		}
		var refs []string
		for _, m := range backtick.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
			refs = append(refs, strings.TrimSpace(m[1]))
		}
		// In code blocks: every word that is a repository file (a command's argument; words
		// without an extension, such as kubectl's deploy/<name>, are not files).
		for _, block := range fence.FindAllString(text, -1) {
			for _, w := range strings.Fields(block) {
				w = strings.TrimRight(strings.TrimLeft(w, "\"'(<"), "\"'),;:>")
				if strings.Contains(filepath.Base(w), ".") {
					refs = append(refs, w)
				}
			}
		}
		for _, ref := range refs {
			if !repoPath.MatchString(ref) {
				continue
			}
			if !exists(filepath.Join("..", ref)) {
				t.Errorf("%s: `%s` does not exist in the repository", f, ref)
			}
		}
		for _, outside := range []string{"DESIGN.md", "../shared"} {
			if strings.Contains(text, outside) {
				t.Errorf("%s: refers to %s, which is not part of the repository", f, outside)
			}
		}
	}
}
