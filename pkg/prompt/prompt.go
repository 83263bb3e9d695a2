// Package prompt renders the prompt templates (memory/summarize-system, ...) in Chinese or
// English. Rendering is one pass: a value that contains "{{transcript}}" or any other
// placeholder is inserted as text and never expanded.
package prompt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/matememory/matememory/pkg/fence"
	"github.com/matememory/matememory/prompts"
)

// Template names used by MateMemory (the spec's six).
const (
	SummarizeSystem           = "memory/summarize-system"
	SummarizeUser             = "memory/summarize-user"
	EmergenceSystem           = "memory/emergence-system"
	EmergenceUser             = "memory/emergence-user"
	ConversationSummarySystem = "context/conversation-summary-system"
	ConversationSummaryUser   = "context/conversation-summary-user"
)

// Names lists every template.
var Names = []string{SummarizeSystem, SummarizeUser, EmergenceSystem, EmergenceUser,
	ConversationSummarySystem, ConversationSummaryUser}

// Loader finds templates in an override folder first, then in the embedded set.
type Loader struct {
	dir string
}

// NewLoader builds a loader; dir may be empty (embedded templates only).
func NewLoader(dir string) *Loader { return &Loader{dir: dir} }

// Load returns the raw template text of name in language ("zh" or "en").
func (l *Loader) Load(name, language string) (string, error) {
	if language != "en" {
		language = "zh"
	}
	file := name + "." + language + ".md"
	if l.dir != "" {
		b, err := os.ReadFile(filepath.Join(l.dir, filepath.FromSlash(file)))
		if err == nil {
			return string(b), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("prompt %s: %w", file, err)
		}
	}
	b, err := fs.ReadFile(prompts.FS, file)
	if err != nil {
		return "", fmt.Errorf("prompt %s: %w", file, err)
	}
	return string(b), nil
}

// Render loads name and substitutes vars in one pass.
func (l *Loader) Render(name, language string, vars map[string]string) (string, error) {
	t, err := l.Load(name, language)
	if err != nil {
		return "", err
	}
	out, err := Render(t, vars)
	if err != nil {
		return "", fmt.Errorf("prompt %s.%s: %w", name, language, err)
	}
	return out, nil
}

// Render replaces each {{name}} in t with vars[name], scanning t once; the inserted values
// are not scanned again, and in them the template's own tags are escaped (fence.Tags), so a
// value cannot close or open a section such as </transcript>. An unknown placeholder is an
// error.
func Render(t string, vars map[string]string) (string, error) {
	tags := fence.TagNames(t)
	var b strings.Builder
	b.Grow(len(t))
	for {
		i := strings.Index(t, "{{")
		if i < 0 {
			b.WriteString(t)
			return b.String(), nil
		}
		j := strings.Index(t[i+2:], "}}")
		if j < 0 {
			b.WriteString(t)
			return b.String(), nil
		}
		key := strings.TrimSpace(t[i+2 : i+2+j])
		v, ok := vars[key]
		if !ok {
			return "", fmt.Errorf("template uses {{%s}} but no value was given", key)
		}
		b.WriteString(t[:i])
		b.WriteString(fence.Tags(v, tags))
		t = t[i+2+j+2:]
	}
}
