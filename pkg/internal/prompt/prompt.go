// Package prompt renders the prompt templates (memory/summarize-system, ...) in Chinese or
// English. Rendering is one pass: a value that contains "{{transcript}}" or any other
// placeholder is inserted as text and never expanded. Templates written for MateClaw
// (<name>.txt with {today}, {profile}, {transcript}, ... placeholders) are accepted in the
// override folder too.
package prompt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/matememory/matememory/pkg/internal/promptsafe"
	"github.com/matememory/matememory/prompts"
)

// Template names used by MateMemory: the spec's six, and the consolidation of a core file
// that outgrew its budget.
const (
	SummarizeSystem           = "memory/summarize-system"
	SummarizeUser             = "memory/summarize-user"
	EmergenceSystem           = "memory/emergence-system"
	EmergenceUser             = "memory/emergence-user"
	ConversationSummarySystem = "context/conversation-summary-system"
	ConversationSummaryUser   = "context/conversation-summary-user"
	ConsolidateSystem         = "memory/consolidate-system"
	ConsolidateUser           = "memory/consolidate-user"
)

// Names lists every template.
var Names = []string{SummarizeSystem, SummarizeUser, EmergenceSystem, EmergenceUser,
	ConversationSummarySystem, ConversationSummaryUser, ConsolidateSystem, ConsolidateUser}

// Loader finds templates in an override folder first, then in the embedded set.
type Loader struct {
	dir string
}

// NewLoader builds a loader; dir may be empty (embedded templates only).
func NewLoader(dir string) *Loader { return &Loader{dir: dir} }

// Load returns the raw template text of name in language ("zh" or "en").
func (l *Loader) Load(name, language string) (string, error) {
	t, _, err := l.load(name, language)
	return t, err
}

// load finds name's template: in the override folder <name>.<lang>.md, then MateClaw's
// <name>.<lang>.txt or <name>.txt (single-brace placeholders, mateClaw true), then the
// embedded <name>.<lang>.md.
func (l *Loader) load(name, language string) (text string, mateClaw bool, err error) {
	if language != "en" {
		language = "zh"
	}
	file := name + "." + language + ".md"
	if l.dir != "" {
		for _, f := range []string{file, name + "." + language + ".txt", name + ".txt"} {
			b, err := os.ReadFile(filepath.Join(l.dir, filepath.FromSlash(f)))
			if err == nil {
				return string(b), strings.HasSuffix(f, ".txt"), nil
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return "", false, fmt.Errorf("prompt %s: %w", f, err)
			}
		}
	}
	b, err := fs.ReadFile(prompts.FS, file)
	if err != nil {
		return "", false, fmt.Errorf("prompt %s: %w", file, err)
	}
	return string(b), false, nil
}

// Render loads name and substitutes vars in one pass. A MateClaw .txt template gets
// MateClaw's placeholders too (RenderMateClaw).
func (l *Loader) Render(name, language string, vars map[string]string) (string, error) {
	t, mateClaw, err := l.load(name, language)
	if err != nil {
		return "", err
	}
	var out string
	if mateClaw {
		out = RenderMateClaw(t, vars)
	} else {
		out, err = Render(t, vars)
	}
	if err != nil {
		return "", fmt.Errorf("prompt %s.%s: %w", name, language, err)
	}
	return out, nil
}

// Render replaces each {{name}} in t with vars[name], scanning t once; the inserted values
// are not scanned again, and in them the template's own tags are escaped (promptsafe.Tags), so a
// value cannot close or open a section such as </transcript>. An unknown placeholder is an
// error.
func Render(t string, vars map[string]string) (string, error) {
	tags := promptsafe.TagNames(t)
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
		b.WriteString(promptsafe.Tags(v, tags))
		t = t[i+2+j+2:]
	}
}

// mateClawVars adds MateClaw's placeholder names for the values MateMemory passes under its
// own: {today} (the date), {daily_filename} (memory/<date>.md), and, for emergence,
// {memory} (MEMORY.md's content).
func mateClawVars(vars map[string]string) map[string]string {
	out := make(map[string]string, len(vars)+3)
	for k, v := range vars {
		out[k] = v
	}
	if d, ok := vars["date"]; ok {
		if _, set := out["today"]; !set {
			out["today"] = d
		}
		if _, set := out["daily_filename"]; !set {
			out["daily_filename"] = "memory/" + d + ".md"
		}
	}
	if m, ok := vars["memory_content"]; ok {
		if _, set := out["memory"]; !set {
			out["memory"] = m
		}
	}
	return out
}

// RenderMateClaw renders a template written for MateClaw: {name} (and {{name}}) placeholders
// of the values given, plus MateClaw's names for them ({today}, {profile}, {memory},
// {daily_filename}, {daily}, {transcript}, {daily_notes}, {day_range}). Like Render it scans t
// once, so inserted values are never expanded. Braces that are not a known placeholder (the
// JSON examples such templates contain) stay as they are.
func RenderMateClaw(t string, vars map[string]string) string {
	vars = mateClawVars(vars)
	tags := promptsafe.TagNames(t)
	var b strings.Builder
	b.Grow(len(t))
	for {
		i := strings.IndexByte(t, '{')
		if i < 0 {
			b.WriteString(t)
			return b.String()
		}
		b.WriteString(t[:i])
		t = t[i:]
		open, close := "{", "}"
		if strings.HasPrefix(t, "{{") {
			open, close = "{{", "}}"
		}
		if j := strings.Index(t[len(open):], close); j >= 0 {
			key := t[len(open) : len(open)+j]
			if v, ok := vars[strings.TrimSpace(key)]; ok && isIdent(strings.TrimSpace(key)) {
				b.WriteString(promptsafe.Tags(v, tags))
				t = t[len(open)+j+len(close):]
				continue
			}
		}
		b.WriteByte('{')
		t = t[1:]
	}
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
