package workspace

import (
	"embed"
	"path"
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
