package rest_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/bundle"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/erasure"
	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/httpapi/apitest"
	"github.com/matememory/matememory/pkg/internal/rest"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// recordingEraser records the erasures asked of it and erases nothing.
type recordingEraser struct {
	mu    sync.Mutex
	calls []string
}

func (e *recordingEraser) EraseAgent(_ context.Context, agentID int64, _ string) (erasure.Receipt, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, "agent")
	return erasure.Receipt{AgentID: agentID, Rows: map[string]int64{}, Messages: map[string]int64{}, Kept: []string{}}, nil
}

func (e *recordingEraser) EraseConversation(_ context.Context, agentID int64, conv, _ string) (erasure.ConversationReceipt, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, "conversation "+conv)
	return erasure.ConversationReceipt{AgentID: agentID, ConversationID: conv, Rows: map[string]int64{}, Messages: map[string]int64{},
		Derived: []erasure.DerivedVersion{}}, nil
}

func (e *recordingEraser) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.calls)
}

// A query parameter given twice with different values is refused (400) before the
// operation runs: huma would take the first and drop the other, so a confirmation the
// caller contradicted would erase. The same value twice is the caller's one answer.
func TestRepeatedQueryParameterIsRefused(t *testing.T) {
	db := storetest.SQLite(t)
	parsed, err := config.ParseKeys("agent-one-key-0123=1")
	if err != nil {
		t.Fatal(err)
	}
	ws := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"))
	s := httpapi.New(httpapi.NewAuthenticator(parsed), prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	er := &recordingEraser{}
	rest.RegisterWorkspace(s, ws)
	rest.RegisterErasure(s, er)
	rest.RegisterBundle(s, bundle.New(db.DB), slog.New(slog.DiscardHandler))
	srv := apitest.Serve(t, s)
	key := []string{"Authorization", "Bearer agent-one-key-0123"}
	sv := &server{base: srv.URL, client: srv.Client()}

	for _, c := range []struct{ method, path, param string }{
		{"DELETE", "/api/v1/agents/1?erase=true&confirm=1&confirm=2", "confirm"},
		{"DELETE", "/api/v1/agents/1?erase=true&erase=false&confirm=1", "erase"},
		{"DELETE", "/api/v1/agents/1?confirm=1&erase=true&erase=false", "erase"},
		{"DELETE", "/api/v1/agents/1/conversations/c1?erase=true&confirm=c1&confirm=other", "confirm"},
		{"GET", "/api/v1/agents/1/files?prefix=a&prefix=b", "prefix"},
		{"GET", "/api/v1/agents/1/export?history=true&history=false", "history"},
	} {
		r := sv.req(t, c.method, c.path, "", key...)
		if r.status != http.StatusBadRequest || !strings.Contains(r.Msg, "query parameter "+c.param+" is given 2 times with different values") {
			t.Errorf("%s %s: %s; want 400 naming %s", c.method, c.path, r, c.param)
		}
	}
	if n := er.count(); n != 0 {
		t.Fatalf("%d erasures ran on refused requests: %v", n, er.calls)
	}
	// A declared parameter left out is no repetition.
	if r := sv.req(t, "DELETE", "/api/v1/agents/1?confirm=1", "", key...); r.status != http.StatusBadRequest || !strings.Contains(r.Msg, "pass erase=true") {
		t.Fatalf("erase without erase=true: %s", r)
	}
	// The same value twice is one answer.
	r := sv.req(t, "DELETE", "/api/v1/agents/1?erase=true&confirm=1&confirm=1", "", key...)
	if r.status != http.StatusOK || er.count() != 1 {
		t.Fatalf("erase with confirm repeated identically: %s, %d erasures", r, er.count())
	}
}
