package workspace_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/tokens"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// countingTokenizer counts the texts it tokenizes.
type countingTokenizer struct {
	tokens.Tokenizer
	name  string
	calls atomic.Int64
}

func (c *countingTokenizer) Count(text string) int { c.calls.Add(1); return c.Tokenizer.Count(text) }
func (c *countingTokenizer) Name() string          { return c.name }

// A core file is tokenized once per version: the count is stored in the write of the
// version and read back by every later read; a version written without one (before the
// counts were stored, or by a process that does not store them) is counted once, lazily,
// and a count of another tokenizer is not taken for this one's (issue 32).
func TestTokensCountedOncePerVersion(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		tk := &countingTokenizer{Tokenizer: tokens.NewCounter().Estimator(), name: "estimate"}
		ws := workspace.New(db.DB, workspace.WithBudgets(workspace.Budgets{Memory: 2000, Profile: 800, Tokenizer: tk}))
		ch := workspace.Change{Actor: store.ActorAPI}
		const agent = 3
		if _, err := ws.EnsureAgent(ctx, agent); err != nil {
			t.Fatal(err)
		}
		calls := func(what string, want int64, do func()) {
			t.Helper()
			before := tk.calls.Load()
			do()
			if got := tk.calls.Load() - before; got != want {
				t.Errorf("%s: tokenized %d times, want %d", what, got, want)
			}
		}
		read := func() workspace.File {
			t.Helper()
			files, err := ws.GetMany(ctx, agent, []string{"MEMORY.md"})
			if err != nil {
				t.Fatal(err)
			}
			return files["MEMORY.md"]
		}
		tokensOf := func(f workspace.File) int { return ws.FileTokens(ctx, &f) }

		calls("reading the seeded file", 0, func() { tokensOf(read()) })
		content := strings.Repeat("- the user likes green tea and long walks\n", 20)
		var f workspace.File
		calls("a write", 1, func() {
			var err error
			if f, _, err = ws.Write(ctx, agent, "MEMORY.md", content, workspace.AnyVersion, ch); err != nil {
				t.Fatal(err)
			}
		})
		if f.Tokens == nil || *f.Tokens != tk.Tokenizer.Count(content) {
			t.Fatalf("written file's tokens %v, want %d", f.Tokens, tk.Tokenizer.Count(content))
		}
		calls("ten reads of the written version", 0, func() {
			for range 10 {
				if n := tokensOf(read()); n != *f.Tokens {
					t.Fatalf("read count %d, want %d", n, *f.Tokens)
				}
				if g, err := ws.Get(ctx, agent, "MEMORY.md"); err != nil || *g.Tokens != *f.Tokens {
					t.Fatalf("Get: %v, %v", g.Tokens, err)
				}
			}
		})
		off := false
		calls("a change of flags only", 0, func() {
			if _, err := ws.SetFlags(ctx, agent, "MEMORY.md", &off, nil, workspace.AnyVersion, ch); err != nil {
				t.Fatal(err)
			}
			tokensOf(read())
		})
		// Another process writes a version without a count (one of the release before).
		other := content + "- and rainy days\n"
		if err := db.DB.Exec("UPDATE mate_workspace_file SET content = ?, version = version + 1 WHERE agent_id = ? AND filename = 'MEMORY.md' AND deleted = 0",
			other, agent).Error; err != nil {
			t.Fatal(err)
		}
		calls("the first read of a version without a count", 1, func() {
			if n := tokensOf(read()); n != tk.Tokenizer.Count(other) {
				t.Fatalf("count %d, want %d: the previous version's count was taken", n, tk.Tokenizer.Count(other))
			}
		})
		calls("the reads after it", 0, func() { tokensOf(read()); tokensOf(read()) })
		// Another tokenizer (mate.llm.model changed) counts the version again, once.
		tk2 := &countingTokenizer{Tokenizer: tk.Tokenizer, name: "other"}
		ws2 := workspace.New(db.DB, workspace.WithBudgets(workspace.Budgets{Memory: 2000, Profile: 800, Tokenizer: tk2}))
		for range 3 {
			files, err := ws2.GetMany(ctx, agent, []string{"MEMORY.md"})
			if err != nil {
				t.Fatal(err)
			}
			f := files["MEMORY.md"]
			ws2.FileTokens(ctx, &f)
		}
		if n := tk2.calls.Load(); n != 1 {
			t.Errorf("another tokenizer counted the version %d times, want 1", n)
		}
		// Not budgeted: not counted at its writes.
		calls("a daily note's append", 0, func() {
			if _, err := ws.Append(ctx, agent, "memory/2026-01-01.md", "- a note", "# 2026-01-01\n\n", ch); err != nil {
				t.Fatal(err)
			}
		})
	})
}
