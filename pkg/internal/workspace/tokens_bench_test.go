package workspace_test

import (
	"context"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/tokens"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// BenchmarkCoreFileTokens is what an extraction's consolidation check costs for MEMORY.md
// and PROFILE.md near their default budgets (2,000 and 800 tokens), read with GetMany: the
// counts read with the files (stored with their versions) against tokenizing both (as before
// issue 32), with the exact o200k encoding and with the estimate.
//
//	go test ./pkg/internal/workspace -run '^$' -bench CoreFileTokens
func BenchmarkCoreFileTokens(b *testing.B) {
	ctx := context.Background()
	db := storetest.SQLite(b)
	for _, enc := range []string{tokens.O200K, tokens.Estimate} {
		tk, err := tokens.NewCounter().ByEncoding(enc)
		if err != nil {
			b.Fatal(err)
		}
		ws := workspace.New(db.DB, workspace.WithBudgets(workspace.Budgets{Memory: 2000, Profile: 800, Tokenizer: tk}))
		ch := workspace.Change{Actor: store.ActorAPI}
		memory := strings.Repeat("- 用户喜欢在周末去山里徒步，偏好清淡的饮食 (likes weekend hikes, light food)\n", 70)
		profile := strings.Repeat("- Works as a backend engineer in Hangzhou; 说话简洁\n", 40)
		for name, content := range map[string]string{"MEMORY.md": memory, "PROFILE.md": profile} {
			if _, _, err := ws.Write(ctx, 1, name, content, workspace.AnyVersion, ch); err != nil {
				b.Fatal(err)
			}
		}
		files, err := ws.GetMany(ctx, 1, []string{"MEMORY.md", "PROFILE.md"})
		if err != nil {
			b.Fatal(err)
		}
		b.Run("encoding="+enc+"/stored", func(b *testing.B) {
			for b.Loop() {
				for _, f := range files {
					ws.FileTokens(ctx, &f)
				}
			}
		})
		b.Run("encoding="+enc+"/tokenized", func(b *testing.B) {
			for b.Loop() {
				for _, f := range files {
					ws.CountTokens(f.Content)
				}
			}
		})
	}
}
