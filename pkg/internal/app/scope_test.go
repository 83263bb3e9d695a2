package app_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/apptest"
)

// TestAdminKeyReachesNoAgent holds every agent route of the document to the one rule of
// docs/operations.md#api-keys: a route about an agent ({agentId} in its path: files,
// messages, search, context, tools, MCP, export, import, runs, pending, erasure) answers 403
// to an admin-only key and to another agent's key, whatever its body; a key that may act for
// the agent passes that check ("admin,*" included), and the admin key keeps its operator
// endpoints.
func TestAdminKeyReachesNoAgent(t *testing.T) {
	a := apptest.Start(t, "agent-one-key-0123=1;agent-two-key-0123=2;admin-only-key-012=admin;admin-all-key-0123=admin,*")
	base := "http://" + a.Addr
	if r := do(t, "PUT", base+"/api/v1/agents/1/files/notes/a.md", "agent-one-key-0123", `{"content":"a secret of agent 1"}`); r.status != http.StatusCreated {
		t.Fatalf("seed: %d %s", r.status, r.Msg)
	}
	fill := strings.NewReplacer("{agentId}", "1", "{filename}", "notes/a.md", "{conversationId}", "c1", "{toolName}", "read_workspace_memory_file")
	other := regexp.MustCompile(`\{[^}]+\}`)
	checked := 0
	for path, item := range a.HTTP.API().OpenAPI().Paths {
		if !strings.Contains(path, "{agentId}") {
			continue
		}
		for _, m := range []struct {
			method string
			set    bool
		}{{"GET", item.Get != nil}, {"PUT", item.Put != nil}, {"POST", item.Post != nil}, {"PATCH", item.Patch != nil}, {"DELETE", item.Delete != nil}} {
			if !m.set {
				continue
			}
			url := base + other.ReplaceAllString(fill.Replace(path), "x")
			for _, key := range []string{"admin-only-key-012", "agent-two-key-0123"} {
				r := doRaw(t, m.method, url, key, `{}`)
				if r.status != http.StatusForbidden || !strings.Contains(r.body, "may not act for agent 1") || strings.Contains(r.body, "secret") {
					t.Errorf("%s %s with %s: %d %.300s; want 403", m.method, path, key, r.status, r.body)
				}
			}
			for _, key := range []string{"agent-one-key-0123", "admin-all-key-0123"} {
				if r := doRaw(t, m.method, url, key, `{}`); r.status == http.StatusForbidden {
					t.Errorf("%s %s with %s: 403 %.300s; want the check passed", m.method, path, key, r.body)
				}
			}
			checked++
		}
	}
	if checked < 25 {
		t.Fatalf("only %d agent operations in the document: the walk is broken", checked)
	}
	// The admin-only key keeps the operator endpoints.
	for _, path := range []string{"/api/v1/admin/dlq", "/api/v1/admin/agents/over-budget", "/api/v1/cron-jobs", "/api/v1/agents"} {
		if r := doRaw(t, "GET", base+path, "admin-only-key-012", ""); r.status != http.StatusOK {
			t.Errorf("GET %s with the admin-only key: %d %.300s", path, r.status, r.body)
		}
	}
}

type rawReply struct {
	status int
	body   string
}

// doRaw sends body (as JSON when there is one) with key and reads the answer, whatever it is.
func doRaw(t *testing.T, method, url, key, body string) rawReply {
	t.Helper()
	r, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return rawReply{status: resp.StatusCode, body: string(b)}
}
