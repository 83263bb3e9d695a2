package console

import (
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// The file page links its blame, which shows each line's version, date, actor and the run,
// event and conversation behind a pipeline's change, linking the change the run made.
func TestBlameView(t *testing.T) {
	c, l := newTestConsoleLedger(t, nil)
	ctx := t.Context()
	get := func(path string, want int) string {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Host = "127.0.0.1"
		w := httptest.NewRecorder()
		c.ServeHTTP(w, r)
		if w.Code != want {
			t.Fatalf("%s: %d (want %d) %.300s", path, w.Code, want, w.Body.String())
		}
		return html.UnescapeString(w.Body.String())
	}
	ws := c.d.Workspace
	if _, _, err := ws.Write(ctx, 1, "notes.md", "# Notes\n- likes tea\n", workspace.AnyVersion, workspace.Change{Actor: store.ActorAPI, Ref: "req-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Record(ctx, ledger.Run{RunID: "run-42", Kind: ledger.KindSummarize, AgentID: 1, EventID: "ev-42",
		Conversations: []string{"conv-42"}, Status: store.RunCompleted}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ws.Write(ctx, 1, "notes.md", "# Notes\n- likes tea\n- lives in Hangzhou\n", workspace.AnyVersion,
		workspace.Change{Actor: store.ActorSummarizer, Ref: "run-42"}); err != nil {
		t.Fatal(err)
	}
	if page := get("/console/agents/1/file?name=notes.md", http.StatusOK); !strings.Contains(page, `href="/console/agents/1/file/blame?name=notes.md" id="blame-link"`) {
		t.Fatalf("file page without its blame link: %.2000s", page)
	}
	page := get("/console/agents/1/file/blame?name=notes.md", http.StatusOK)
	start := strings.Index(page, `<tr id="line-3">`)
	if start < 0 {
		t.Fatalf("blame without line 3: %s", page)
	}
	row := page[start:]
	row = row[:strings.Index(row, "</tr>")]
	for _, want := range []string{"- lives in Hangzhou", ">v2<", "summarizer", "ev-42", "conv-42",
		`href="/console/agents/1/file/history?name=notes.md&run=run-42"`, `&a=1&b=2`} {
		if !strings.Contains(row, want) {
			t.Errorf("line 3's provenance lacks %q: %s", want, row)
		}
	}
	// Line 1 was created with the file and kept by the summarizer's version.
	first := page[strings.Index(page, `<tr id="line-1">`):]
	first = first[:strings.Index(first, "</tr>")]
	if !strings.Contains(first, ">v1<") || !strings.Contains(first, "create") || !strings.Contains(first, ">v2<") {
		t.Errorf("line 1: %s", first)
	}
	get("/console/agents/1/file/blame?name=missing.md", http.StatusNotFound)
	get("/console/agents/1/file/blame?name=../x.md", http.StatusBadRequest)
}
