package workspace

import (
	"embed"
	"path"
	"strings"
)

// CoreFiles are seeded for every agent, enabled, in this sort order.
var CoreFiles = []string{"AGENTS.md", "SOUL.md", "PROFILE.md", "MEMORY.md"}

//go:embed defaults
var defaultFS embed.FS

// DefaultContent is the seeded text of a core file in language ("zh" or "en").
func DefaultContent(language, name string) string {
	if language != "en" {
		language = "zh"
	}
	b, err := defaultFS.ReadFile(path.Join("defaults", language, name))
	if err != nil {
		return ""
	}
	return string(b)
}

// IsSeed reports whether content is still the seeded default text of core file name (in
// either language): replacing it loses no user information.
func IsSeed(name, content string) bool {
	c := strings.TrimSpace(content)
	for _, lang := range []string{"zh", "en"} {
		if d := strings.TrimSpace(DefaultContent(lang, name)); d != "" && c == d {
			return true
		}
	}
	return false
}
