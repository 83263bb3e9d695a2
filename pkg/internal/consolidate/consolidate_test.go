package consolidate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/blame"
	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/prompt"
)

type scripted struct {
	answer    string
	truncated bool
	got       llm.Request
}

func (s *scripted) Complete(_ context.Context, r llm.Request) (llm.Response, error) {
	s.got = r
	return llm.Response{Content: s.answer, Truncated: s.truncated, TokensIn: 10, TokensOut: 5}, nil
}
func (s *scripted) Model() string { return "scripted" }

const file = "# MEMORY\n## Facts\n- F-1: a\n- F-2: b\n- F-3: c\n"

func TestAsk(t *testing.T) {
	ctx := context.Background()
	r := Request{File: "MEMORY.md", Content: file, Tokens: 900, Budget: 1000, Language: "en", Date: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	m := &scripted{answer: `{"reason": "merged", "edits": [{"op": "delete", "old": "- F-1: a\n"}]}`}
	a, err := Ask(ctx, m, prompt.NewLoader(""), r)
	if err != nil || a.Content != "# MEMORY\n## Facts\n- F-2: b\n- F-3: c\n" || a.Edits != 1 || a.TokensOut != 5 {
		t.Fatalf("edits answer: %+v %v", a, err)
	}
	if !strings.Contains(m.got.Messages[0].Content, "under 1000 tokens") || !strings.Contains(m.got.Messages[1].Content, "- F-3: c") {
		t.Errorf("prompt: %+v", m.got.Messages)
	}
	m.answer = `{"reason": "rewrote", "content": "# MEMORY\n- F-3: c\n"}`
	if a, err := Ask(ctx, m, prompt.NewLoader(""), r); err != nil || a.Content != "# MEMORY\n- F-3: c\n" || a.Edits != 0 {
		t.Fatalf("whole answer: %+v %v", a, err)
	}
	for name, bad := range map[string]scripted{
		"empty":     {answer: `{"reason": "x", "content": "  "}`},
		"cut off":   {answer: `{"reason": "x", "content": "# MEM`, truncated: true},
		"not json":  {answer: `I made it shorter.`},
		"both":      {answer: `{"content": "x", "edits": [{"op": "delete", "old": "- F-1: a"}]}`},
		"no anchor": {answer: `{"edits": [{"op": "delete", "old": "- F-9: z"}]}`},
	} {
		if _, err := Ask(ctx, &bad, prompt.NewLoader(""), r); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want ErrRefused", name, err)
		}
	}
}

func TestFit(t *testing.T) {
	day := func(v int64) blame.Change {
		return blame.Change{Version: v, Actor: "summarizer", Ref: "run-" + string(rune('a'+v)), Time: time.Date(2026, 11, int(v), 0, 0, 0, 0, time.UTC)}
	}
	revs := []blame.Revision{
		{Content: "# MEMORY\n## Facts\n- F-1: a\n", Change: day(1)},
		{Content: "# MEMORY\n## Facts\n- F-1: a\n- F-2: b\n", Change: day(2)},
		{Content: file, Change: day(3)},
	}
	reads := 0
	history := func() []blame.Revision { reads++; return revs }
	// A budget of 50 bytes: after (54) is over, and demotion goes down to Target (35).
	count := func(s string) int { return len(s) }
	after := file + "- F-4: d\n"
	f := Fit(file, after, count, 50, history, day(4))
	if f.Content != "# MEMORY\n## Facts\n- F-4: d\n" || len(f.Removed) != 0 || len(f.Demoted) != 3 || f.Demoted[0].Text != "- F-1: a" ||
		f.Demoted[0].Origin.Version != 1 || f.Demoted[2].Text != "- F-3: c" {
		t.Fatalf("fit: %+v", f)
	}
	block := f.Archive("MEMORY.md", "rewrite", "run-z", time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))
	if !strings.HasPrefix(block, "## 2026-12-01 08:00 +00:00 · MEMORY.md · demotion · run run-z\n\n- F-1: a\n<!-- under Facts, MEMORY.md v1") {
		t.Errorf("archive block:\n%s", block)
	}
	// A correction within the budget: the replaced line is archived with its origin, nothing demoted.
	reads = 0
	f = Fit(file, strings.Replace(file, "- F-2: b", "- F-2: B", 1), count, 0, history, day(4))
	if len(f.Removed) != 1 || f.Removed[0].Text != "- F-2: b" || f.Removed[0].Origin.Version != 2 || len(f.Demoted) != 0 || reads != 1 {
		t.Errorf("correction: %+v (history read %d times)", f, reads)
	}
	// An addition within the budget reads no history.
	reads = 0
	if f := Fit(file, after, count, 0, history, day(4)); f.Content != after || reads != 0 || f.Archive("MEMORY.md", "edit", "", time.Now()) != "" {
		t.Errorf("addition: %+v, history read %d times", f, reads)
	}
	if !Over(901, 1000) || Over(900, 1000) || Over(5000, 0) {
		t.Error("high-water mark")
	}
}
