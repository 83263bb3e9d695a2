package rest_test

import (
	"context"
	"testing"

	"github.com/matememory/matememory/pkg/api"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// TestBlame blames a file written over REST, by a summarizer run recorded in the ledger,
// with a flags-only change between and a person's edit last, on SQLite and MariaDB: each
// line names the version, actor, ref and time that introduced it and last kept it, and the
// summarizer's line its run's event and conversations. Refusals are the history route's.
func TestBlame(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		s := start(t, db, "k1=1;k2=2")
		k1 := []string{"Authorization", "Bearer k1"}
		ctx := context.Background()
		const path = "/api/v1/agents/1/files/notes/ideas.md"
		expect(t, s.req(t, "PUT", path, `{"content":"# Notes\n- likes tea\n"}`, append(k1, "X-Request-Id", "req-1")...), 201, "")
		if _, err := s.led.Record(ctx, ledger.Run{RunID: "run-s", Kind: ledger.KindSummarize, AgentID: 1, EventID: "ev-9",
			Conversations: []string{"conv-7"}, Status: store.RunCompleted}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.ws.Write(ctx, 1, "notes/ideas.md", "# Notes\n- likes tea\n- lives in Hangzhou\n", 1,
			workspace.Change{Actor: store.ActorSummarizer, Ref: "run-s"}); err != nil {
			t.Fatal(err)
		}
		expect(t, s.req(t, "PATCH", path, `{"enabled":true}`, k1...), 200, "")
		expect(t, s.req(t, "PUT", path, `{"content":"# Notes\n- likes green tea\n- lives in Hangzhou\n"}`,
			append(k1, "If-Match", `"3"`, "X-Request-Id", "req-2")...), 200, "")

		r := s.req(t, "GET", path+"/blame", "", k1...)
		expect(t, r, 200, "")
		var b api.Blame
		r.into(t, &b)
		if b.AgentID != 1 || b.Filename != "notes/ideas.md" || b.Version != 4 || b.Count != 3 || len(b.Lines) != 3 {
			t.Fatalf("blame: %s", r)
		}
		head, tea, city := b.Lines[0], b.Lines[1], b.Lines[2]
		if head.Number != 1 || head.Text != "# Notes" || head.Introduced.Version != 1 || head.Introduced.Action != "create" ||
			head.Confirmed.Version != 4 || head.Confirmed.Actor != store.ActorAPI || head.Confirmed.Ref != "req-2" {
			t.Errorf("heading: %+v", head)
		}
		if tea.Text != "- likes green tea" || tea.Introduced.Version != 4 || tea.Introduced.Actor != store.ActorAPI ||
			tea.Introduced.Action != "write" || tea.Introduced.Ref != "req-2" || tea.Introduced.EventID != "" || tea.Introduced.Time.IsZero() ||
			tea.Confirmed.Version != 4 || tea.Confirmed.Ref != "req-2" {
			t.Errorf("edited line: %+v", tea)
		}
		// The flags-only version 3 confirmed nothing: the city was introduced by the summarizer's
		// version 2 and kept by the person's version 4.
		in := city.Introduced
		if city.Number != 3 || in.Version != 2 || in.Actor != store.ActorSummarizer || in.Ref != "run-s" || in.RunKind != ledger.KindSummarize ||
			in.EventID != "ev-9" || len(in.Conversations) != 1 || in.Conversations[0] != "conv-7" || in.Time.IsZero() ||
			city.Confirmed.Version != 4 || city.Confirmed.Actor != store.ActorAPI {
			t.Errorf("summarizer's line: %+v", city)
		}

		// The file's versions were made as the test meant: the summarizer's write, the flags
		// change, the person's write.
		hist, err := s.ws.History(ctx, 1, "notes/ideas.md")
		if err != nil || len(hist) != 3 || hist[0].Action != "write" || hist[1].Action != "flags" {
			t.Fatalf("history: %+v %v", hist, err)
		}

		expect(t, s.req(t, "GET", "/api/v1/agents/1/files/nope.md/blame", "", k1...), 404, "")
		expect(t, s.req(t, "GET", "/api/v1/agents/1/files/a.txt/blame", "", k1...), 400, "")
		expect(t, s.req(t, "GET", "/api/v1/agents/1/files/memory/../../x.md/blame", "", k1...), 400, "")
		expect(t, s.req(t, "GET", path+"/blame", "", "Authorization", "Bearer k2"), 403, "agent 1")
		expect(t, s.req(t, "GET", path+"/blame", ""), 401, "missing API key")
		expect(t, s.req(t, "PUT", path+"/blame", `{"content":"x"}`, k1...), 405, "blame")
	})
}
