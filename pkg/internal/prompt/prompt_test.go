package prompt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestMateClawTemplates: a prompt file written for MateClaw (<name>.txt, single-brace
// placeholders) renders with MateClaw's names, in one pass, and leaves JSON braces alone.
func TestMateClawTemplates(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "memory/summarize-user.txt", "## 当前日期\n{today}\n## PROFILE\n{profile}\n## MEMORY\n{memory}\n"+
		"## {daily_filename}\n{daily}\n## 对话记录\n{transcript}\n输出 {\"should_update\": true, \"x\": {}} {unknown} {{date}}")
	write(t, dir, "memory/emergence-user.txt", "{day_range} 天\n{daily_notes}\n---\n{memory}")
	l := NewLoader(dir)
	got, err := l.Render(SummarizeUser, "zh", map[string]string{
		"date": "2026-04-03", "profile": "P", "memory": "M", "daily": "D",
		"transcript": "用户: 什么是 {today} 和 {{profile}}？", "conversation_count": "1", "message_count": "2",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "## 当前日期\n2026-04-03\n## PROFILE\nP\n## MEMORY\nM\n## memory/2026-04-03.md\nD\n## 对话记录\n" +
		"用户: 什么是 {today} 和 {{profile}}？\n输出 {\"should_update\": true, \"x\": {}} {unknown} 2026-04-03"
	if got != want {
		t.Fatalf("summarize-user.txt rendered\n%q\nwant\n%q", got, want)
	}
	got, err = l.Render(EmergenceUser, "en", map[string]string{"date": "2026-04-03", "day_range": "7", "note_count": "2",
		"memory_content": "# MEMORY", "daily_notes": "### memory/2026-04-03.md\n- {memory}"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "7 天\n### memory/2026-04-03.md\n- {memory}\n---\n# MEMORY"; got != want {
		t.Fatalf("emergence-user.txt rendered\n%q\nwant\n%q", got, want)
	}

	// A native override wins over a .txt one; without either, the embedded template is used.
	write(t, dir, "memory/summarize-user.zh.md", "native {{date}} {today}")
	if got, err := l.Render(SummarizeUser, "zh", map[string]string{"date": "d"}); err != nil || got != "native d {today}" {
		t.Fatalf("native override: %q %v", got, err)
	}
	if got, err := l.Render(SummarizeSystem, "zh", map[string]string{"date": "d"}); err != nil || !strings.Contains(got, "JSON") {
		t.Fatalf("embedded template: %.80q %v", got, err)
	}
}

// TestEveryTemplateRendersCompletely renders every embedded template in both languages with
// every placeholder it names given a value: none is left over, and none is missing.
func TestEveryTemplateRendersCompletely(t *testing.T) {
	l := NewLoader("")
	for _, name := range Names {
		for _, lang := range []string{"zh", "en"} {
			raw, err := l.Load(name, lang)
			if err != nil {
				t.Fatalf("%s.%s: %v", name, lang, err)
			}
			vars := map[string]string{}
			for _, part := range strings.Split(raw, "{{")[1:] {
				if end := strings.Index(part, "}}"); end > 0 {
					vars[part[:end]] = "<" + part[:end] + ">"
				}
			}
			got, err := l.Render(name, lang, vars)
			if err != nil {
				t.Fatalf("%s.%s: %v", name, lang, err)
			}
			if strings.Contains(got, "{{") {
				t.Errorf("%s.%s: a placeholder is left: %.200q", name, lang, got[strings.Index(got, "{{"):])
			}
		}
	}
	// The consolidation names the budget it asks for.
	got, err := l.Render(ConsolidateSystem, "en", map[string]string{"file": "MEMORY.md", "budget_tokens": "2000",
		"current_tokens": "2400", "target_tokens": "1600"})
	if err != nil || !strings.Contains(got, "under 2000 tokens") || !strings.Contains(got, "about 1600 tokens") {
		t.Errorf("consolidate-system: %v\n%s", err, got)
	}
}
