package tool_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/tool"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// fakeSearcher records the query the tool built.
type fakeSearcher struct{ got recall.Query }

func (f *fakeSearcher) Search(_ context.Context, agentID int64, q recall.Query) (recall.Result, error) {
	f.got = q
	return recall.Result{AgentID: agentID, Query: q.Text, Mode: recall.ModeLexical, Hits: []recall.Hit{}}, nil
}

func TestRecallToolsArgumentsAndLines(t *testing.T) {
	db := storetest.SQLite(t)
	ws := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"))
	tools := tool.New(ws)
	ctx := context.Background()
	if _, err := tools.Call(ctx, 1, tool.SearchMemory, []byte(`{"query":"x"}`)); err == nil {
		t.Fatal("without recall the search tool must not exist")
	}
	if len(tools.Definitions("en")) != 4 {
		t.Fatalf("without recall: %d definitions", len(tools.Definitions("en")))
	}
	fs := &fakeSearcher{}
	tools.EnableRecall(fs)
	if n := len(tools.Definitions("zh")); n != 6 {
		t.Fatalf("with recall: %d definitions, want 6", n)
	}
	if _, err := call(t, tools, ctx, 1, tool.SearchMemory, `{"query":"deploy","maxResults":3,"filenamePrefix":"memory/","since":"2026-01-01","until":"2026-02-01"}`); err != nil {
		t.Fatal(err)
	}
	want := recall.Query{Text: "deploy", MaxResults: 3, MaxResultsGiven: true, FilenamePrefix: "memory/",
		Since: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)}
	if fs.got != want {
		t.Fatalf("query = %+v, want %+v", fs.got, want)
	}
	if _, _, err := ws.Write(ctx, 1, "notes.md", "one\ntwo\nthree\n", workspace.AnyVersion, workspace.Change{Actor: "tool"}); err != nil {
		t.Fatal(err)
	}
	m, err := call(t, tools, ctx, 1, tool.ReadLines, `{"filename":"notes.md","startLine":2}`)
	if err != nil || m["content"] != "two\nthree" || m["endLine"] != float64(3) || m["totalLines"] != float64(3) {
		t.Fatalf("lines 2..: %v %v", m, err)
	}
	for args, msg := range map[string]string{
		`{"query":"x","since":"last week"}`:                    "since must be a day as YYYY-MM-DD",
		`{"maxResults":3}`:                                     "argument query is required",
		`{"query":"x","maxResults":"3"}`:                       "must be a whole number",
		`{"query":"x","agentId":2}`:                            "agentId is not an argument",
		`{"query":"x","limit":2}`:                              "accepted: query, maxResults, filenamePrefix, since, until",
		`{"filename":"notes.md","startLine":0}`:                "startLine must be 1 or more",
		`{"filename":"notes.md","startLine":3,"endLine":2}`:    "before startLine",
		`{"filename":"notes.md","startLine":9}`:                "past the end",
		`{"filename":"notes.md","startLine":1,"endLine":1000}`: "at most 400 lines",
	} {
		name := tool.SearchMemory
		if strings.Contains(args, "filename") {
			name = tool.ReadLines
		}
		_, err := tools.Call(ctx, 1, name, []byte(args))
		status, text := httpapi.Classify(err)
		if status != 400 || !strings.Contains(text, msg) {
			t.Errorf("%s %s: %d %q; want 400 containing %q", name, args, status, text, msg)
		}
	}
}
