package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

func transfer(t *testing.T, method, url, key string, body []byte) (int, []byte) {
	t.Helper()
	r, _ := http.NewRequest(method, url, bytes.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		r.Header.Set("Content-Type", "application/x-ndjson")
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// An agent exported over REST and imported into another agent of the running service is
// searchable there: the import tells the recall indexer, as any write does.
func TestImportedFilesAreSearchable(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		base := startApp(t, db, "k1=1;k2=2")
		body, _ := json.Marshal(map[string]string{"content": "The user keeps bees on the roof in Lisbon.\n"})
		if r := do(t, "PUT", base+"/api/v1/agents/1/files/notes/bees.md", "k1", string(body)); r.status != 201 {
			t.Fatalf("write: %d %s", r.status, r.Msg)
		}
		st, b := transfer(t, "GET", base+"/api/v1/agents/1/export?history=true&messages=true&ledger=true", "k1", nil)
		if st != 200 {
			t.Fatalf("export: %d %s", st, b)
		}
		imported := time.Now()
		if st, rep := transfer(t, "POST", base+"/api/v1/agents/2/import", "k2", b); st != 200 || !strings.Contains(string(rep), `"conflictCount":0`) {
			t.Fatalf("import: %d %s", st, rep)
		}
		q, _ := json.Marshal(map[string]any{"query": "bees Lisbon"})
		for {
			r := do(t, "POST", base+"/api/v1/agents/2/memory/search", "k2", string(q))
			if r.status != 200 {
				t.Fatalf("search: %d %s", r.status, r.Msg)
			}
			if strings.Contains(string(r.Data), "notes/bees.md") {
				break
			}
			if time.Since(imported) > 10*time.Second {
				t.Fatalf("the imported note is not searchable within 10 s: %s", r.Data)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// api export and api import work on the database, like reindex: an agent seeded in one
// data directory moves to another, the import indexes
// what it wrote, and a second import changes nothing.
func TestExportImportCommands(t *testing.T) {
	from, to := t.TempDir(), t.TempDir()
	run := func(dataDir string, stdin string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := app.Run("api", args, strings.NewReader(stdin), &out, &errOut, []string{"MATE_DATA_DIR=" + dataDir, "PATH=/bin"})
		return code, out.String(), errOut.String()
	}
	if code, _, errOut := run(from, "", "export", "-agent", "1"); code != 1 || !strings.Contains(errOut, "agent 1 not found") {
		t.Fatalf("export of an unknown agent: %d %s", code, errOut)
	}
	db, err := store.Open("sqlite", "", from)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	ws := workspace.New(db, workspace.WithDefaults("en", "UTC"))
	for _, c := range []string{"bees", "bees on the roof"} {
		if _, _, err := ws.Write(context.Background(), 1, "notes/bees.md", c, workspace.AnyVersion, workspace.Change{Actor: store.ActorAPI}); err != nil {
			t.Fatal(err)
		}
	}
	_ = store.Close(db)
	file := filepath.Join(to, "agent-1.ndjson")
	if code, _, errOut := run(from, "", "export", "-agent", "1", "-history", "-o", file); code != 0 || !strings.Contains(errOut, "export: agent 1: 5 files, 1 history versions") {
		t.Fatalf("export: %d %s", code, errOut)
	}
	code, stdout, errOut := run(to, "", "import", "-agent", "5", file)
	if code != 0 || !strings.Contains(stdout, `"changes": 7`) || !strings.Contains(errOut, "search index: 5 files: 5 indexed") {
		t.Fatalf("import: %d\n%s\n%s", code, stdout, errOut)
	}
	if code, stdout, _ := run(to, "", "import", "-agent", "5", "-mode", "merge", file); code != 0 || !strings.Contains(stdout, `"changes": 0`) {
		t.Fatalf("second import: %d %s", code, stdout)
	}
	if code, _, errOut := run(to, "", "import", "-agent", "5"); code != 2 || !strings.Contains(errOut, "one bundle file") {
		t.Fatalf("import without a file: %d %s", code, errOut)
	}
	if left, _ := filepath.Glob(filepath.Join(to, ".export-*")); len(left) != 0 {
		t.Fatalf("export left its temporary file: %v", left)
	}
}
