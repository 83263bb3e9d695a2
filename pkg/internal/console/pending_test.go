package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/bus/bustest"
	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/summarizer"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// The agent page's pending section: what waits (here a conversation behind a held lease,
// its name escaped), refreshed alone for htmx, and, when NATS cannot be read, an error in
// the section while the rest of the page still renders.
func TestPendingSection(t *testing.T) {
	_, dial := bustest.Server(t)
	nc, err := dial.Connect("console-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	leases, err := lease.Bucket(ctx, js, bus.BucketLease, time.Minute, 1, "summarizer@test")
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open("sqlite", "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close(db) })
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	const conv = `c 1<b>`
	if _, err := conversation.New(db).Add(ctx, conversation.Message{AgentID: 1, ConversationID: conv, Role: "user", Content: "hello"},
		conversation.Message{AgentID: 1, ConversationID: conv, Role: "assistant", Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	// Registered, as an event deferred for the held lease leaves it.
	if err := db.Exec("INSERT INTO mate_extraction_watermark (agent_id, conversation_id, last_message_id, update_time) VALUES (1, ?, 0, ?)",
		conv, time.Now().UTC()).Error; err != nil {
		t.Fatal(err)
	}
	l, err := leases.Acquire(ctx, 1, "summarize")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	c, err := New(Deps{Auth: httpapi.NewAuthenticator(nil), Workspace: workspace.New(db), Ledger: ledger.New(db, nil),
		Pending: summarizer.NewPendingReader(leases, conversation.New(db), 0), Language: "en"})
	if err != nil {
		t.Fatal(err)
	}
	get := func(hx bool) string {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, "/console/agents/1", nil)
		r.Host = "127.0.0.1"
		if hx {
			r.Header.Set("HX-Request", "true")
			r.Header.Set("HX-Target", "pending")
		}
		w := httptest.NewRecorder()
		c.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("GET the agent page: %d %.300s", w.Code, w.Body.String())
		}
		return w.Body.String()
	}
	page := get(false)
	for _, want := range []string{`id="pending-state">lease held<`, `summarizer@test</span> (summarize)`, `c 1&lt;b&gt;</a>`, `<td>2</td>`, `id="files"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the agent page lacks %q", want)
		}
	}
	if strings.Contains(page, conv) {
		t.Error("the conversation id is not escaped")
	}
	if part := get(true); strings.Contains(part, "<html") || strings.Contains(part, `id="files"`) || !strings.Contains(part, `id="pending-state"`) {
		t.Errorf("the refresh of the section: %.400s", part)
	}

	nc.Close()
	page = get(false)
	if !strings.Contains(page, `id="pending-error"`) || !strings.Contains(page, `id="files"`) {
		t.Errorf("with NATS closed: %.600s", page)
	}
}
