package bundle

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/cronjob"
	"github.com/matememory/matememory/pkg/internal/fault"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

var all = Includes{History: true, Messages: true, Ledger: true}

// fixture fills agent id with everything a bundle carries: seeded core files, files
// written, edited, flagged and deleted (history), a cron job of its own besides the seeded
// consolidation job, messages with tool calls, and ledger rows.
func fixture(t *testing.T, db *gorm.DB, id int64) {
	t.Helper()
	ctx := context.Background()
	ws := workspace.New(db, workspace.WithDefaults("en", "UTC"), workspace.WithAgentHook(cronjob.ConsolidationHook("0 2 * * *", time.Now)))
	api := workspace.Change{Actor: store.ActorAPI, Ref: "req-1"}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ws.UpdateAgent(ctx, id, "en", "Asia/Shanghai"); err != nil {
		t.Fatal(err)
	}
	for i, c := range []string{"# Notes\n", "# Notes\n- likes green tea\n", "# Notes\n- likes green tea\n- 名字: 李雷\n"} {
		_, _, err := ws.Write(ctx, id, "notes/person.md", c, workspace.AnyVersion, workspace.Change{Actor: store.ActorTool, Ref: fmt.Sprint("call-", i)})
		must(nil, err)
	}
	_, _, err := ws.Write(ctx, id, "memory/2026-04-01.md", "walked <the> \"dog\" & \\ \u0001", workspace.AnyVersion, api)
	must(nil, err)
	no, five := false, 5
	must(ws.SetFlags(ctx, id, "memory/2026-04-01.md", &no, &five, workspace.AnyVersion, api))
	_, _, err = ws.Write(ctx, id, "gone.md", "to be deleted", workspace.AnyVersion, api)
	must(nil, err)
	must(nil, ws.Delete(ctx, id, "gone.md", workspace.AnyVersion, api))
	cron, err := cronjob.New(db, ws)
	must(nil, err)
	name, expr, msg := "daily", "30 8 * * *", "good morning"
	must(cron.Create(ctx, cronjob.Input{AgentID: &id, Name: &name, CronExpression: &expr, TriggerMessage: &msg}))
	msgs := conversation.New(db)
	must(msgs.Add(ctx,
		conversation.Message{AgentID: id, ConversationID: "c1", Role: "user", Content: "I am Li Lei"},
		conversation.Message{AgentID: id, ConversationID: "c1", Role: "assistant", ToolCalls: json.RawMessage(`[{"id":"t1","type":"function","function":{"name":"x","arguments":"{}"}}]`)},
		conversation.Message{AgentID: id, ConversationID: "c1", Role: "tool", ToolCallID: "t1", Content: "ok"},
		conversation.Message{AgentID: id, ConversationID: "c2", Role: "user", Content: "hello"}))
	l := ledger.New(db, nil)
	must(l.Record(ctx, ledger.Run{Kind: ledger.KindSummarize, AgentID: id, EventID: "e1", Conversations: []string{"c1"}, Status: store.RunCompleted,
		Reason: "extracted", Model: "m", Provider: "llm", TokensIn: 10, TokensOut: 5, LatencyMs: 12, FilesChanged: []string{"notes/person.md"}, Attempt: 1}))
}

func export(t *testing.T, s *Service, id int64, inc Includes) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := s.Export(context.Background(), &b, id, inc); err != nil {
		t.Fatalf("export agent %d: %v", id, err)
	}
	return b.Bytes()
}

// trailer is a bundle's checksums line.
func trailer(t *testing.T, b []byte) Checksums {
	t.Helper()
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	var c Checksums
	if err := json.Unmarshal(lines[len(lines)-1], &c); err != nil || c.Kind != KindChecksums {
		t.Fatalf("last line is no checksums line: %s", lines[len(lines)-1])
	}
	return c
}

// sameRecords checks two agents' bundles hold the same records, field by field: every
// kind's checksum covers every exported field of every record, in order.
func sameRecords(t *testing.T, a, b []byte) {
	t.Helper()
	ca, cb := trailer(t, a), trailer(t, b)
	if ca.Counts != cb.Counts {
		t.Fatalf("counts differ: %+v vs %+v", ca.Counts, cb.Counts)
	}
	for _, k := range recordKinds {
		if ca.SHA256[k] != cb.SHA256[k] {
			t.Errorf("%s records differ:\n%s\n---\n%s", k, kindLines(a, k), kindLines(b, k))
		}
	}
}

func kindLines(b []byte, kind string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, `{"kind":"`+kind+`"`) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func importB(t *testing.T, s *Service, id int64, b []byte, mode string) ImportReport {
	t.Helper()
	rep, err := s.Import(context.Background(), id, bytes.NewReader(b), ImportOptions{Mode: mode})
	if err != nil {
		t.Fatalf("import into agent %d (%s): %v", id, mode, err)
	}
	return rep
}

// freshDB is another database of the same kind, for a move between deployments.
func freshDB(t *testing.T, db storetest.DB) *gorm.DB {
	if db.Driver == "sqlite" {
		return storetest.SQLite(t).DB
	}
	other, _ := storetest.MySQL(t)
	return other.DB
}

func TestRoundTrip(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		fixture(t, db.DB, 1)
		src := New(db.DB)
		orig := export(t, src, 1, all)
		c := trailer(t, orig)
		if want := (Counts{Agent: 1, File: 6, History: 3, Cron: 2, Message: 4, Run: 1}); c.Counts != want {
			t.Fatalf("bundle counts %+v, want %+v", c.Counts, want)
		}

		t.Run("another deployment, same id", func(t *testing.T) {
			dst := New(freshDB(t, db))
			rep := importB(t, dst, 1, orig, ModeEmpty)
			if rep.Changes != total(c.Counts) || rep.ConflictCount != 0 {
				t.Fatalf("first import: %d changes, %d conflicts (%v); want %d, 0", rep.Changes, rep.ConflictCount, rep.Conflicts, total(c.Counts))
			}
			sameRecords(t, orig, export(t, dst, 1, all))
			for _, mode := range []string{ModeEmpty, ModeMerge} {
				again := importB(t, dst, 1, orig, mode)
				if again.Changes != 0 || again.ConflictCount != 0 || total(again.Unchanged) != total(c.Counts) {
					t.Fatalf("second import (%s): %+v; want 0 changes, all unchanged", mode, again)
				}
			}
			sameRecords(t, orig, export(t, dst, 1, all))
		})

		t.Run("another agent, same deployment", func(t *testing.T) {
			rep := importB(t, src, 2, orig, ModeEmpty)
			// Run ids are unique in a deployment: agent 1's run stays agent 1's.
			if rep.ConflictCount != 1 || rep.Conflicts[0].Kind != KindRun {
				t.Fatalf("conflicts %+v; want the one run", rep.Conflicts)
			}
			// The refusal does not say whose run it is: the importer may act for agent 2 only.
			if reason := rep.Conflicts[0].Reason; regexp.MustCompile(`(?i)agent\s*\d|\d+'s`).MatchString(reason) || !strings.Contains(reason, "already taken") {
				t.Fatalf("conflict reason %q names another agent (or does not say the id is taken)", reason)
			}
			noRuns := Includes{History: true, Messages: true}
			sameRecords(t, export(t, src, 1, noRuns), export(t, src, 2, noRuns))
			// A repeat meets the same run again, and changes nothing.
			if again := importB(t, src, 2, orig, ModeEmpty); again.Changes != 0 || again.ConflictCount != 1 {
				t.Fatalf("second import: %+v", again)
			}
		})
	})
}

func TestImportRefusesBadBundlesAndWritesNothing(t *testing.T) {
	db := storetest.SQLite(t).DB
	fixture(t, db, 1)
	s := New(db, WithMaxFileBytes(1<<20))
	good := string(export(t, s, 1, all))
	lines := strings.Split(strings.TrimRight(good, "\n"), "\n")
	join := func(ls []string) string { return strings.Join(ls, "\n") + "\n" }
	replace := func(i int, old, new string) string {
		ls := append([]string(nil), lines...)
		if i < 0 { // the first line holding old
			for i = range ls {
				if strings.Contains(ls[i], old) {
					break
				}
			}
		}
		if !strings.Contains(ls[i], old) {
			t.Fatalf("line %d has no %q", i, old)
		}
		ls[i] = strings.Replace(ls[i], old, new, 1)
		return join(ls)
	}
	last := len(lines) - 1
	// The two history lines of notes/person.md, swapped; a file line repeated.
	var hist []int
	file := -1
	for i, l := range lines {
		if strings.HasPrefix(l, `{"kind":"history","filename":"notes/person.md"`) {
			hist = append(hist, i)
		}
		if file < 0 && strings.HasPrefix(l, `{"kind":"file"`) {
			file = i
		}
	}
	swapped := append([]string(nil), lines...)
	swapped[hist[0]], swapped[hist[1]] = swapped[hist[1]], swapped[hist[0]]
	repeated := append(append(append([]string(nil), lines[:file+1]...), lines[file]), lines[file+1:]...)
	cases := []struct {
		name, body, want string
		status           error // the kind: every refusal here is invalid input (400)
	}{
		{"empty body", "", "the body is empty", fault.ErrInvalid},
		// What JSON.stringify of the bundle sends (a client's default JSON body serializer).
		{"bundle JSON-encoded", quoted(good), "line 1 is not a bundle record: it is a JSON string, not an object: the bundle was sent JSON-encoded; send the export's bytes unchanged, Content-Type: application/x-ndjson", fault.ErrInvalid},
		{"not an object", "[1,2]\n", `line 1 is not a bundle record: not a JSON object (it starts with "[1,2]")`, fault.ErrInvalid},
		{"kind not a string", replace(0, `"kind":"manifest"`, `"kind":7`), `line 1 is not a bundle record: "kind" must be a string, got 7`, fault.ErrInvalid},
		{"newer format", replace(0, `"version":1`, `"version":2`), "bundle format version 2 is newer than this server reads: it supports version 1", fault.ErrInvalid},
		{"not a bundle", replace(0, Format, "other"), "is not a MateMemory agent bundle", fault.ErrInvalid},
		{"manifest not first", join(append(lines[1:2:2], lines...)), "a bundle starts with its manifest", fault.ErrInvalid},
		{"truncated", join(lines[:last-1]), "without its checksums line: it is truncated", fault.ErrInvalid},
		{"tampered content", replace(-1, "likes green tea", "likes black tea"), "the SHA-256 of the file records", fault.ErrInvalid},
		// Only the overall digest covers the manifest: an edited date there must be refused too.
		{"tampered manifest", replace(0, `"createdAt":"20`, `"createdAt":"19`), "the overall SHA-256", fault.ErrInvalid},
		{"unknown field", replace(1, `"language"`, `"colour":1,"language"`), `unknown field "colour"`, fault.ErrInvalid},
		{"bad record after good ones", join(append(append(lines[:last:last], `{"kind":"run","runId":"","runKind":"x","status":"completed","createTime":"2026-01-01T00:00:00Z"}`), lines[last])), "runId \"\": 1 to 64 bytes", fault.ErrInvalid},
		{"out of order", join(append(append([]string{lines[0]}, lines[2], lines[1]), lines[3:]...)), "the agent record must come right after the manifest", fault.ErrInvalid},
		{"unknown kind", join(append(append(lines[:last:last], `{"kind":"secret"}`), lines[last])), `unknown record kind "secret"`, fault.ErrInvalid},
		{"data after checksums", good + lines[1] + "\n", "data after the checksums line", fault.ErrInvalid},
		{"history out of order", join(swapped), "notes/person.md: history version 1 after version 2", fault.ErrInvalid},
		{"a file twice", join(repeated), "a second file of that name", fault.ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Import(context.Background(), 9, strings.NewReader(c.body), ImportOptions{Mode: ModeMerge})
			var be *Error
			if !errors.As(err, &be) || !errors.Is(err, c.status) || !strings.Contains(be.Msg, c.want) {
				t.Fatalf("error %v; want %v with %q", err, c.status, c.want)
			}
			if ok, err := empty(db, 9); err != nil || !ok {
				t.Fatalf("agent 9 got data from a refused bundle (%v)", err)
			}
		})
	}
	if _, err := s.Import(context.Background(), 9, strings.NewReader(good), ImportOptions{Mode: "replace"}); err == nil || !strings.Contains(err.Error(), "accepted: empty") {
		t.Fatalf("bad mode: %v", err)
	}
}

func TestMergeReportsConflictsAndNeverOverwrites(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		fixture(t, db.DB, 1)
		s := New(db.DB)
		b := export(t, s, 1, all)
		ws := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"))
		api := workspace.Change{Actor: store.ActorAPI}

		// Agent 2 holds notes/person.md at version 1 as agent 1 had it (same lineage: the
		// bundle's history proves it), a newer MEMORY.md and its own take on the dog walk.
		if _, err := ws.UpdateAgent(ctx, 2, "en", "Asia/Shanghai"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ws.Write(ctx, 2, "notes/person.md", "# Notes\n", workspace.CreateOnly, api); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := ws.Append(ctx, 2, "MEMORY.md", "- mine", "", api); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := ws.Write(ctx, 2, "memory/2026-04-01.md", "a different day", workspace.CreateOnly, api); err != nil {
			t.Fatal(err)
		}
		mem, _ := ws.Get(ctx, 2, "MEMORY.md")
		day, _ := ws.Get(ctx, 2, "memory/2026-04-01.md")

		if _, err := s.Import(ctx, 2, bytes.NewReader(b), ImportOptions{}); err == nil || !strings.Contains(err.Error(), "is not empty") {
			t.Fatalf("mode empty into a used agent: %v", err)
		}
		dry, err := s.Import(ctx, 2, bytes.NewReader(b), ImportOptions{Mode: ModeMerge, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		rep := importB(t, s, 2, b, ModeMerge)
		dry.DryRun = false
		if fmt.Sprint(dry) != fmt.Sprint(rep) {
			t.Fatalf("dry run said %+v, the import did %+v", dry, rep)
		}
		conflicts := map[string]string{}
		for _, c := range rep.Conflicts {
			conflicts[c.Kind+" "+c.Name] = c.Reason
		}
		for _, want := range []string{"file MEMORY.md", "file memory/2026-04-01.md", "run "} {
			found := false
			for k := range conflicts {
				found = found || strings.HasPrefix(k, want)
			}
			if !found {
				t.Errorf("no conflict for %s in %v", want, conflicts)
			}
		}
		if rep.Updated.File != 1 {
			t.Errorf("updated %d files; want notes/person.md fast-forwarded", rep.Updated.File)
		}
		if got, _ := ws.Get(ctx, 2, "MEMORY.md"); got.Content != mem.Content || got.Version != mem.Version {
			t.Errorf("MEMORY.md overwritten: %+v", got)
		}
		if got, _ := ws.Get(ctx, 2, "memory/2026-04-01.md"); got.Content != day.Content || got.Version != day.Version {
			t.Errorf("the dog walk overwritten: %+v", got)
		}
		if got, _ := ws.Get(ctx, 2, "notes/person.md"); got.Version != 3 || !strings.Contains(got.Content, "李雷") {
			t.Errorf("notes/person.md not fast-forwarded: %+v", got)
		}
		if h, _ := ws.History(ctx, 2, "notes/person.md"); len(h) != 2 {
			t.Errorf("notes/person.md history %d versions; want 2 (1 and 2 from the bundle)", len(h))
		}
		again := importB(t, s, 2, b, ModeMerge)
		if again.Changes != 0 || again.ConflictCount != rep.ConflictCount {
			t.Fatalf("second merge: %d changes, %d conflicts; want 0 changes, the same %d conflicts", again.Changes, again.ConflictCount, rep.ConflictCount)
		}
	})
}

func TestImportTellsTheHooks(t *testing.T) {
	db := storetest.SQLite(t).DB
	fixture(t, db, 1)
	var files, convs []string
	s := New(db,
		WithFileHook(func(_ context.Context, agentID int64, name string, version int64) {
			files = append(files, fmt.Sprintf("%d %s %d", agentID, name, version))
		}),
		WithConversationHook(func(_ context.Context, agentID int64, conv string, _ int64) {
			convs = append(convs, fmt.Sprintf("%d %s", agentID, conv))
		}))
	b := export(t, s, 1, all)
	if _, err := s.Import(context.Background(), 3, bytes.NewReader(b), ImportOptions{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if len(files)+len(convs) != 0 {
		t.Fatalf("a dry run told the hooks: %v %v", files, convs)
	}
	importB(t, s, 3, b, ModeEmpty)
	if len(files) != 6 || !strings.Contains(strings.Join(files, ","), "3 notes/person.md 3") || len(convs) != 2 {
		t.Fatalf("hooks told %v and %v; want the 6 files and 2 conversations of agent 3", files, convs)
	}
	files = nil
	importB(t, s, 3, b, ModeMerge)
	if len(files) != 0 {
		t.Fatalf("a repeated import told the hooks of %v", files)
	}
}

func TestExportOfAnUnknownAgent(t *testing.T) {
	s := New(storetest.SQLite(t).DB)
	var b bytes.Buffer
	_, err := s.Export(context.Background(), &b, 42, all)
	var be *Error
	if !errors.As(err, &be) || !errors.Is(err, fault.ErrNotFound) || b.Len() != 0 {
		t.Fatalf("export of an unknown agent: %v, %d bytes written", err, b.Len())
	}
}

// The manifest is the first line and documents itself.
func TestManifest(t *testing.T) {
	db := storetest.SQLite(t).DB
	fixture(t, db, 1)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	b := export(t, New(db, WithClock(func() time.Time { return at }), WithGenerator("matememory test")), 1, Includes{History: true})
	first, _, _ := bufio.NewReader(bytes.NewReader(b)).ReadLine()
	var m Manifest
	if err := json.Unmarshal(first, &m); err != nil {
		t.Fatal(err)
	}
	want := Manifest{Kind: KindManifest, Format: Format, Version: Version, AgentID: 1, CreatedAt: at, Generator: "matememory test",
		Includes: Includes{History: true}, Counts: Counts{Agent: 1, File: 6, History: 3, Cron: 2}}
	if m != want {
		t.Fatalf("manifest %+v; want %+v", m, want)
	}
}

// History rows stored out of version order (a merge adds a file's older versions after its
// newer ones) are exported oldest first, so the bundle imports.
func TestHistoryExportedInVersionOrder(t *testing.T) {
	db := storetest.SQLite(t).DB
	now := time.Now().UTC()
	if err := db.Create(&store.Agent{ID: 1, Language: "en", Timezone: "UTC", CreateTime: now}).Error; err != nil {
		t.Fatal(err)
	}
	f := store.WorkspaceFile{AgentID: 1, Filename: "a.md", Content: "v3", FileSize: 2, Enabled: true, Version: 3, CreateTime: now, UpdateTime: now}
	if err := db.Create(&f).Error; err != nil {
		t.Fatal(err)
	}
	for _, v := range []int64{2, 1} {
		if err := db.Create(&store.WorkspaceFileHistory{FileID: f.ID, AgentID: 1, Filename: "a.md", Version: v, Content: fmt.Sprint("v", v),
			Enabled: true, Action: "write", Actor: store.ActorAPI, CreateTime: now}).Error; err != nil {
			t.Fatal(err)
		}
	}
	s := New(db)
	b := export(t, s, 1, Includes{History: true})
	if h := kindLines(b, KindHistory); strings.Index(h, `"version":1`) > strings.Index(h, `"version":2`) {
		t.Fatalf("history not oldest first:\n%s", h)
	}
	importB(t, s, 2, b, ModeEmpty)
}

// quoted is s as a JSON string.
func quoted(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
