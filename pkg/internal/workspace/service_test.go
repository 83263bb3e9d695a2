package workspace_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

var (
	api  = workspace.Change{Actor: store.ActorAPI}
	tool = workspace.Change{Actor: store.ActorTool}
)

func names(infos []workspace.Info) []string {
	out := make([]string, len(infos))
	for i, f := range infos {
		out[i] = f.Filename
	}
	return out
}

func mustWrite(t *testing.T, ws *workspace.Service, agent int64, name, content string) workspace.File {
	t.Helper()
	f, _, err := ws.Write(context.Background(), agent, name, content, workspace.AnyVersion, api)
	if err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
	return f
}

func TestSeeding(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		for _, lang := range []string{"zh", "en"} {
			ws := workspace.New(db.DB, workspace.WithDefaults(lang, "UTC"))
			agent := int64(10)
			if lang == "en" {
				agent = 11
			}
			a, err := ws.EnsureAgent(ctx, agent)
			if err != nil {
				t.Fatal(err)
			}
			if a.Language != lang || a.Timezone != "UTC" {
				t.Fatalf("agent %d: language %q timezone %q, want %q UTC", agent, a.Language, a.Timezone, lang)
			}
			infos, err := ws.List(ctx, agent, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(names(infos), ","); got != "AGENTS.md,SOUL.md,PROFILE.md,MEMORY.md" {
				t.Fatalf("%s: seeded files %s", lang, got)
			}
			for i, info := range infos {
				if !info.Enabled || info.SortOrder != i || info.Version != 1 {
					t.Errorf("%s %s: enabled=%v sortOrder=%d version=%d, want true %d 1", lang, info.Filename, info.Enabled, info.SortOrder, info.Version, i)
				}
				f, err := ws.Get(ctx, agent, info.Filename)
				if err != nil {
					t.Fatal(err)
				}
				want := workspace.DefaultContent(lang, info.Filename)
				if f.Content != want || f.FileSize != int64(len(want)) {
					t.Errorf("%s %s: content is not the %s default (%d bytes, want %d)", lang, info.Filename, lang, f.FileSize, len(want))
				}
			}
			// Seeding happens once: a second service (another process) sees the same files.
			again := workspace.New(db.DB, workspace.WithDefaults("en", "Asia/Shanghai"))
			a2, err := again.EnsureAgent(ctx, agent)
			if err != nil {
				t.Fatal(err)
			}
			if a2.Language != lang {
				t.Errorf("re-seen agent language %q, want %q kept", a2.Language, lang)
			}
			if infos2, _ := again.List(ctx, agent, ""); len(infos2) != 4 {
				t.Errorf("re-seen agent has %d files, want 4", len(infos2))
			}
		}
	})
}

func TestDefaultTexts(t *testing.T) {
	zhMarks := map[string]string{"AGENTS.md": "写入原则", "SOUL.md": "隐私与边界", "PROFILE.md": "沟通偏好", "MEMORY.md": "重要决策"}
	enMarks := map[string]string{"AGENTS.md": "How to write", "SOUL.md": "Privacy and boundaries", "PROFILE.md": "Communication preferences", "MEMORY.md": "Key decisions"}
	for _, name := range workspace.CoreFiles {
		for lang, mark := range map[string]string{"zh": zhMarks[name], "en": enMarks[name]} {
			c := workspace.DefaultContent(lang, name)
			if !strings.Contains(c, mark) {
				t.Errorf("%s/%s lacks %q", lang, name, mark)
			}
			if len(c) > 2200 {
				t.Errorf("%s/%s is %d bytes; keep default texts short", lang, name, len(c))
			}
		}
	}
	for _, tl := range []string{"list_workspace_memory_files", "read_workspace_memory_file", "write_workspace_memory_file", "edit_workspace_memory_file"} {
		for _, lang := range []string{"zh", "en"} {
			if !strings.Contains(workspace.DefaultContent(lang, "AGENTS.md"), tl) {
				t.Errorf("%s AGENTS.md does not describe %s", lang, tl)
			}
		}
	}
	if workspace.DefaultContent("fr", "SOUL.md") != workspace.DefaultContent("zh", "SOUL.md") {
		t.Error("an unknown language should fall back to zh")
	}
}

func TestListPrefixAndSort(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		ws := workspace.New(db.DB)
		const a = 1
		for _, n := range []string{"memory/2026-04-02.md", "memory/2026-04-01.md", "Memory/upper.md", "memoryXnotes.md", "memory_x.md", "notes/a.md", "50%.md"} {
			mustWrite(t, ws, a, n, "x")
		}
		cases := []struct {
			prefix string
			want   string
		}{
			{"memory/", "memory/2026-04-01.md,memory/2026-04-02.md"},
			{"Memory/", "Memory/upper.md"},
			{"memory_", "memory_x.md"}, // '_' is not a LIKE wildcard here
			{"50%", "50%.md"},
			{"nothing/", ""},
		}
		for _, c := range cases {
			infos, err := ws.List(ctx, a, c.prefix)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(names(infos), ","); got != c.want {
				t.Errorf("prefix %q: %s, want %s", c.prefix, got, c.want)
			}
		}
		// Reorder: a daily note moved between SOUL.md and PROFILE.md; ties sort by name.
		one := 1
		if _, err := ws.SetFlags(ctx, a, "memory/2026-04-02.md", nil, &one, workspace.AnyVersion, api); err != nil {
			t.Fatal(err)
		}
		infos, err := ws.List(ctx, a, "")
		if err != nil {
			t.Fatal(err)
		}
		want := "AGENTS.md,SOUL.md,memory/2026-04-02.md,PROFILE.md,MEMORY.md,50%.md,Memory/upper.md,memory/2026-04-01.md,memoryXnotes.md,memory_x.md,notes/a.md"
		if got := strings.Join(names(infos), ","); got != want {
			t.Errorf("order:\n got %s\nwant %s", got, want)
		}
	})
}

func TestFileLifecycle(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		ws := workspace.New(db.DB, workspace.WithMaxBytes(1000))
		const a, name = 2, "memory/2026-04-01.md"

		f, created, err := ws.Write(ctx, a, name, "# 2026-04-01\n\nfirst", workspace.CreateOnly, tool)
		if err != nil || !created || f.Version != 1 || f.Enabled || f.FileSize != int64(len("# 2026-04-01\n\nfirst")) {
			t.Fatalf("create: %+v created=%v err=%v; want version 1, disabled", f, created, err)
		}
		if _, _, err := ws.Write(ctx, a, name, "again", workspace.CreateOnly, tool); !errors.Is(err, workspace.ErrConflict) {
			t.Fatalf("create-only on an existing file: %v, want ErrConflict", err)
		}
		f, created, err = ws.Write(ctx, a, name, "# 2026-04-01\n\nsecond", 1, api)
		if err != nil || created || f.Version != 2 {
			t.Fatalf("overwrite: %+v %v %v", f, created, err)
		}
		f, n, err := ws.Edit(ctx, a, name, "second", "third", false, workspace.AnyVersion, tool)
		if err != nil || n != 1 || f.Content != "# 2026-04-01\n\nthird" || f.Version != 3 {
			t.Fatalf("edit: %+v n=%d err=%v", f, n, err)
		}
		for _, c := range []struct{ old, new, why string }{
			{"", "x", "empty oldText"},
			{"third", "third", "unchanged"},
			{"absent", "x", "not found"},
		} {
			if _, _, err := ws.Edit(ctx, a, name, c.old, c.new, false, workspace.AnyVersion, tool); !errors.Is(err, workspace.ErrInvalid) {
				t.Errorf("edit %s: %v, want ErrInvalid", c.why, err)
			}
		}
		if _, _, err := ws.Edit(ctx, a, "missing.md", "a", "b", false, workspace.AnyVersion, tool); !errors.Is(err, workspace.ErrNotFound) {
			t.Errorf("edit of a missing file: %v, want ErrNotFound", err)
		}
		if _, _, err := ws.Write(ctx, a, "big.md", strings.Repeat("x", 1001), workspace.AnyVersion, tool); !errors.Is(err, workspace.ErrInvalid) {
			t.Errorf("oversized write: %v, want ErrInvalid", err)
		}
		if _, _, err := ws.Write(ctx, a, "bad.md", "\xff\xfe", workspace.AnyVersion, tool); !errors.Is(err, workspace.ErrInvalid) {
			t.Errorf("invalid UTF-8 content: %v, want ErrInvalid", err)
		}

		on, seven := true, 7
		f, err = ws.SetFlags(ctx, a, name, &on, &seven, 3, api)
		if err != nil || !f.Enabled || f.SortOrder != 7 || f.Version != 4 || f.Content != "# 2026-04-01\n\nthird" {
			t.Fatalf("flags: %+v %v", f, err)
		}
		if _, err := ws.SetFlags(ctx, a, name, &on, nil, 3, api); !errors.Is(err, workspace.ErrConflict) {
			t.Fatalf("flags with a stale version: %v, want ErrConflict", err)
		}

		hist, err := ws.History(ctx, a, name)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range hist {
			got = append(got, fmt.Sprintf("%d:%s:%s", h.Version, h.Action, h.Actor))
		}
		if want := "3:flags:api 2:edit:tool 1:write:api"; strings.Join(got, " ") != want {
			t.Fatalf("history %v, want %s", got, want)
		}
		if hist[2].Content != "# 2026-04-01\n\nfirst" || hist[1].Content != "# 2026-04-01\n\nsecond" {
			t.Fatalf("history content: %q %q", hist[2].Content, hist[1].Content)
		}

		f, err = ws.Rollback(ctx, a, name, 1, workspace.AnyVersion, api)
		if err != nil || f.Content != "# 2026-04-01\n\nfirst" || f.Version != 5 || !f.Enabled || f.SortOrder != 7 {
			t.Fatalf("rollback to 1: %+v %v", f, err)
		}
		// The rollback is itself a version that can be undone.
		f, err = ws.Rollback(ctx, a, name, 4, 5, api)
		if err != nil || f.Content != "# 2026-04-01\n\nthird" || f.Version != 6 {
			t.Fatalf("rollback of the rollback: %+v %v", f, err)
		}
		for _, v := range []int64{0, 6, 99} {
			if _, err := ws.Rollback(ctx, a, name, v, workspace.AnyVersion, api); !errors.Is(err, workspace.ErrInvalid) {
				t.Errorf("rollback to %d: %v, want ErrInvalid", v, err)
			}
		}

		if err := ws.Delete(ctx, a, name, 5, api); !errors.Is(err, workspace.ErrConflict) {
			t.Fatalf("delete with a stale version: %v", err)
		}
		if err := ws.Delete(ctx, a, name, 6, api); err != nil {
			t.Fatal(err)
		}
		if _, err := ws.Get(ctx, a, name); !errors.Is(err, workspace.ErrNotFound) {
			t.Fatalf("get after delete: %v", err)
		}
		if err := ws.Delete(ctx, a, name, workspace.AnyVersion, api); !errors.Is(err, workspace.ErrNotFound) {
			t.Fatalf("second delete: %v", err)
		}
		if infos, _ := ws.List(ctx, a, "memory/"); len(infos) != 0 {
			t.Fatalf("deleted file still listed: %v", names(infos))
		}
	})
}

// TestLiveNameUnique checks (agent, filename) is unique among live rows only: a deleted name
// can be created again, any number of times, and names differ by case on both databases.
func TestLiveNameUnique(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		ws := workspace.New(db.DB)
		const a = 3
		for round := 1; round <= 3; round++ {
			content := fmt.Sprintf("round %d", round)
			f, created, err := ws.Write(ctx, a, "notes.md", content, workspace.CreateOnly, api)
			if err != nil || !created || f.Version != 1 || f.Content != content {
				t.Fatalf("round %d create: %+v %v %v", round, f, created, err)
			}
			if h, err := ws.History(ctx, a, "notes.md"); err != nil || len(h) != 0 {
				t.Fatalf("round %d: a recreated file has history %v (%v)", round, h, err)
			}
			if err := ws.Delete(ctx, a, "notes.md", 1, api); err != nil {
				t.Fatalf("round %d delete: %v", round, err)
			}
		}
		var rows int64
		db.DB.Model(&store.WorkspaceFile{}).Where("agent_id = ? AND filename = ?", a, "notes.md").Count(&rows)
		if rows != 3 {
			t.Fatalf("%d rows for notes.md, want 3 deleted ones", rows)
		}
		// The database itself refuses a second live row.
		dup := store.WorkspaceFile{AgentID: a, Filename: "MEMORY.md", Version: 1, CreateTime: ws.Now(), UpdateTime: ws.Now()}
		if err := db.DB.Create(&dup).Error; !store.IsDuplicate(err) {
			t.Fatalf("second live MEMORY.md row: %v, want a duplicate-key error", err)
		}
		// Case matters, as on a file system: memory.md is not MEMORY.md.
		f, created, err := ws.Write(ctx, a, "memory.md", "lower", workspace.CreateOnly, api)
		if err != nil || !created {
			t.Fatalf("memory.md beside MEMORY.md: %+v %v %v", f, created, err)
		}
		up, err := ws.Get(ctx, a, "MEMORY.md")
		if err != nil || up.Content == "lower" {
			t.Fatalf("MEMORY.md after writing memory.md: %q %v", up.Content, err)
		}
	})
}

func TestSystemPrompt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		ws := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"))
		const a = 4
		got, err := ws.SystemPrompt(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		var blocks []string
		for _, n := range workspace.CoreFiles {
			blocks = append(blocks, "--- "+n+" ---\n"+strings.TrimSpace(workspace.DefaultContent("en", n)))
		}
		if want := strings.Join(blocks, "\n\n"); got != want {
			t.Fatalf("fresh agent's system prompt:\n%s\n---- want ----\n%s", got, want)
		}

		// New files start disabled and stay out; enabled ones join by sort_order.
		mustWrite(t, ws, a, "memory/2026-04-01.md", "# 2026-04-01\n\n- daily\n")
		mustWrite(t, ws, a, "extra.md", "extra\n\n\n")
		if p, _ := ws.SystemPrompt(ctx, a); strings.Contains(p, "2026-04-01") || strings.Contains(p, "extra") {
			t.Fatalf("disabled files injected:\n%s", p)
		}
		on, off, one := true, false, 1
		if _, err := ws.SetFlags(ctx, a, "extra.md", &on, &one, workspace.AnyVersion, api); err != nil {
			t.Fatal(err)
		}
		if _, err := ws.SetFlags(ctx, a, "PROFILE.md", &off, nil, workspace.AnyVersion, api); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, ws, a, "MEMORY.md", "core memory")
		got, err = ws.SystemPrompt(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Join([]string{blocks[0], "--- SOUL.md ---\n" + strings.TrimSpace(workspace.DefaultContent("en", "SOUL.md")),
			"--- extra.md ---\nextra", "--- MEMORY.md ---\ncore memory"}, "\n\n")
		// SOUL.md (1) and extra.md (1) tie on sort_order: name order puts SOUL.md first.
		if got != want {
			t.Fatalf("system prompt:\n%s\n---- want ----\n%s", got, want)
		}

		// As in MateClaw: content is trimmed (both ends), and a blank enabled file is left out
		// rather than injected as an empty block.
		mustWrite(t, ws, a, "MEMORY.md", "\n\n  core memory  \n")
		mustWrite(t, ws, a, "extra.md", " \n\t\n")
		got, err = ws.SystemPrompt(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		want = strings.Join([]string{blocks[0], "--- SOUL.md ---\n" + strings.TrimSpace(workspace.DefaultContent("en", "SOUL.md")),
			"--- MEMORY.md ---\ncore memory"}, "\n\n")
		if got != want {
			t.Fatalf("system prompt with a blank file and untrimmed content:\n%q\n---- want ----\n%q", got, want)
		}
		mustWrite(t, ws, a, "AGENTS.md", "")
		mustWrite(t, ws, a, "SOUL.md", "")
		mustWrite(t, ws, a, "MEMORY.md", "\n")
		if got, err = ws.SystemPrompt(ctx, a); err != nil || got != "" {
			t.Fatalf("only blank files enabled: got %q, %v; want an empty injection", got, err)
		}
	})
}

// TestCompareAndSwapOneWinner has many writers race with the same expected version: exactly
// one wins per version, every other one gets ErrConflict naming the new version.
func TestCompareAndSwapOneWinner(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		ws := workspace.New(db.DB)
		const a, name, writers = 5, "race.md", 12
		mustWrite(t, ws, a, name, "v1")
		for version := int64(1); version <= 3; version++ {
			var wg sync.WaitGroup
			var mu sync.Mutex
			wins, conflicts := 0, 0
			var others []error
			start := make(chan struct{})
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, _, err := ws.Write(ctx, a, name, fmt.Sprintf("writer %d over v%d", w, version), version, api)
					mu.Lock()
					defer mu.Unlock()
					var ce *workspace.ConflictError
					switch {
					case err == nil:
						wins++
					case errors.As(err, &ce) && ce.Expected == version && ce.Actual == version+1:
						conflicts++
					default:
						others = append(others, err)
					}
				}()
			}
			close(start)
			wg.Wait()
			if wins != 1 || conflicts != writers-1 || len(others) > 0 {
				t.Fatalf("version %d: %d wins, %d conflicts, other errors %v; want 1 and %d", version, wins, conflicts, others, writers-1)
			}
			f, err := ws.Get(ctx, a, name)
			if err != nil || f.Version != version+1 {
				t.Fatalf("after round %d: version %d (%v)", version, f.Version, err)
			}
		}
		if h, _ := ws.History(ctx, a, name); len(h) != 3 {
			t.Fatalf("%d history rows, want 3 (losers must leave none)", len(h))
		}
	})
}

// TestConcurrentAppendsAndEdits races appends with edits, all with AnyVersion: nothing is
// lost and nothing is applied twice.
func TestConcurrentAppendsAndEdits(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		ws := workspace.New(db.DB)
		const a, name, workers, perWorker = 6, "memory/2026-04-03.md", 8, 5
		var slots []string
		for w := 0; w < workers; w++ {
			slots = append(slots, fmt.Sprintf("[slot %d: open]", w))
		}
		mustWrite(t, ws, a, name, strings.Join(slots, "\n"))
		var wg sync.WaitGroup
		errs := make(chan error, workers*(perWorker+1))
		start := make(chan struct{})
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := 0; i < perWorker; i++ {
					if _, err := ws.Append(ctx, a, name, fmt.Sprintf("- entry %d.%d", w, i), "", tool); err != nil {
						errs <- fmt.Errorf("append %d.%d: %w", w, i, err)
					}
					if i == perWorker/2 {
						old := fmt.Sprintf("[slot %d: open]", w)
						if _, _, err := ws.Edit(ctx, a, name, old, fmt.Sprintf("[slot %d: done]", w), false, workspace.AnyVersion, tool); err != nil {
							errs <- fmt.Errorf("edit slot %d: %w", w, err)
						}
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		f, err := ws.Get(ctx, a, name)
		if err != nil {
			t.Fatal(err)
		}
		for w := 0; w < workers; w++ {
			if strings.Count(f.Content, fmt.Sprintf("[slot %d: done]", w)) != 1 {
				t.Errorf("slot %d edit lost", w)
			}
			for i := 0; i < perWorker; i++ {
				if c := strings.Count(f.Content, fmt.Sprintf("- entry %d.%d\n", w, i)) + boolInt(strings.HasSuffix(f.Content, fmt.Sprintf("- entry %d.%d", w, i))); c != 1 {
					t.Errorf("entry %d.%d present %d times", w, i, c)
				}
			}
		}
		if want := int64(1 + workers*perWorker + workers); f.Version != want {
			t.Errorf("version %d, want %d (one per change)", f.Version, want)
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestEffectKeyOnce checks a keyed append lands once, even when raced.
func TestEffectKeyOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		ws := workspace.New(db.DB)
		const a, name = 7, "memory/2026-04-04.md"
		ch := workspace.Change{Actor: store.ActorSummarizer, Ref: "evt-1", EffectKey: "daily:7:evt-1"}
		f, err := ws.Append(ctx, a, name, "- from evt-1", "# 2026-04-04\n\n", ch)
		if err != nil || f.Content != "# 2026-04-04\n\n- from evt-1" || f.Enabled {
			t.Fatalf("first append: %+v %v", f, err)
		}
		if _, err := ws.Append(ctx, a, name, "- from evt-1", "# 2026-04-04\n\n", ch); !errors.Is(err, workspace.ErrAlreadyApplied) {
			t.Fatalf("replayed append: %v, want ErrAlreadyApplied", err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		applied, skipped := 0, 0
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := ws.Append(ctx, a, name, "- from evt-2", "", workspace.Change{Actor: store.ActorSummarizer, EffectKey: "daily:7:evt-2"})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					applied++
				case errors.Is(err, workspace.ErrAlreadyApplied):
					skipped++
				default:
					t.Errorf("raced append: %v", err)
				}
			}()
		}
		wg.Wait()
		if applied != 1 || skipped != 7 {
			t.Fatalf("raced keyed appends: %d applied, %d skipped; want 1 and 7", applied, skipped)
		}
		f, err = ws.Get(ctx, a, name)
		if err != nil {
			t.Fatal(err)
		}
		if want := "# 2026-04-04\n\n- from evt-1\n\n- from evt-2"; f.Content != want {
			t.Fatalf("content %q, want %q", f.Content, want)
		}
	})
}

func TestAgentSettings(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		ws := workspace.New(db.DB)
		a, err := ws.UpdateAgent(ctx, 8, "en", "Asia/Shanghai")
		if err != nil || a.Language != "en" || a.Timezone != "Asia/Shanghai" {
			t.Fatalf("update: %+v %v", a, err)
		}
		if loc, err := ws.Location(ctx, 8); err != nil || loc.String() != "Asia/Shanghai" {
			t.Fatalf("location %v %v", loc, err)
		}
		for _, c := range [][2]string{{"fr", ""}, {"", "Mars/Base"}} {
			if _, err := ws.UpdateAgent(ctx, 8, c[0], c[1]); !errors.Is(err, workspace.ErrInvalid) {
				t.Errorf("update %v: %v, want ErrInvalid", c, err)
			}
		}
		// A fresh service (another replica) reads the stored settings.
		a, err = workspace.New(db.DB).EnsureAgent(ctx, 8)
		if err != nil || a.Language != "en" || a.Timezone != "Asia/Shanghai" {
			t.Fatalf("stored settings: %+v %v", a, err)
		}
		if _, err := ws.EnsureAgent(ctx, 0); !errors.Is(err, workspace.ErrInvalid) {
			t.Errorf("agent 0: %v, want ErrInvalid", err)
		}
	})
}

// TestConcurrentFirstSight has several replicas see a new agent at once: it is seeded once,
// and every caller gets its files.
func TestConcurrentFirstSight(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		const a, replicas = 9, 8
		var wg sync.WaitGroup
		errs := make(chan error, replicas)
		for i := 0; i < replicas; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ws := workspace.New(db.DB) // a replica of its own, with an empty cache
				if _, err := ws.Get(ctx, a, "MEMORY.md"); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		var files, agents int64
		db.DB.Model(&store.WorkspaceFile{}).Where("agent_id = ?", a).Count(&files)
		db.DB.Model(&store.Agent{}).Where("id = ?", a).Count(&agents)
		if files != 4 || agents != 1 {
			t.Fatalf("%d files and %d agent rows after concurrent first sight; want 4 and 1", files, agents)
		}
	})
}

// TestSettingsSeenAcrossReplicas: a setting changed through one process is what another
// process, which has seen the agent before, uses next (daily note dates depend on it).
func TestSettingsSeenAcrossReplicas(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		apiSide := workspace.New(db.DB, workspace.WithDefaults("zh", "UTC"))
		worker := workspace.New(db.DB, workspace.WithDefaults("zh", "UTC"))
		if loc, err := worker.Location(ctx, 12); err != nil || loc.String() != "UTC" {
			t.Fatalf("worker location %v %v", loc, err)
		}
		if _, err := apiSide.UpdateAgent(ctx, 12, "", "Asia/Tokyo"); err != nil {
			t.Fatal(err)
		}
		if _, err := apiSide.UpdateAgent(ctx, 12, "en", ""); err != nil {
			t.Fatal(err)
		}
		if loc, err := worker.Location(ctx, 12); err != nil || loc.String() != "Asia/Tokyo" {
			t.Fatalf("worker still dates in %v (%v) after the API changed the zone", loc, err)
		}
		a, err := worker.EnsureAgent(ctx, 12)
		if err != nil || a.Language != "en" || a.Timezone != "Asia/Tokyo" {
			t.Fatalf("worker sees %+v (%v); the second update must not undo the first", a, err)
		}
	})
}

// TestAppendFromBase: a change that starts from the caller's own read (Change.Base) writes
// the same as one that reads the file in its transaction, and a stale read loses nothing:
// the compare-and-swap sends it back to a fresh read.
func TestAppendFromBase(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		ws := workspace.New(db.DB)
		const a, name = 7, "memory/2026-04-04.md"
		read := func() workspace.File {
			t.Helper()
			m, err := ws.GetMany(ctx, a, []string{name})
			if err != nil {
				t.Fatal(err)
			}
			return m[name] // version 0 when there is none
		}
		withBase := func(f workspace.File) workspace.Change {
			ch := tool
			ch.Base = &f
			return ch
		}
		// No note yet, and the read says so.
		absent := read()
		if _, err := ws.Append(ctx, a, name, "- one", "# head\n\n", withBase(absent)); err != nil {
			t.Fatal(err)
		}
		// A current read.
		if _, err := ws.Append(ctx, a, name, "- two", "# head\n\n", withBase(read())); err != nil {
			t.Fatal(err)
		}
		// A stale read: another writer appended since.
		stale := read()
		if _, err := ws.Append(ctx, a, name, "- three", "", tool); err != nil {
			t.Fatal(err)
		}
		if _, err := ws.Append(ctx, a, name, "- four", "", withBase(stale)); err != nil {
			t.Fatal(err)
		}
		// A stale "absent": the note was created since (by the appends above).
		f, err := ws.Append(ctx, a, name, "- five", "# head\n\n", withBase(absent))
		if err != nil {
			t.Fatal(err)
		}
		want := "# head\n\n- one\n\n- two\n\n- three\n\n- four\n\n- five"
		if f.Content != want || f.Version != 5 {
			t.Fatalf("note is version %d:\n%q\nwant version 5:\n%q", f.Version, f.Content, want)
		}
		hist, err := ws.History(ctx, a, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(hist) != 4 {
			t.Fatalf("%d history rows, want 4 (one per append after the first)", len(hist))
		}
	})
}
