package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// startEraseApp runs one process of a deployment on db with the canary model: targets, its
// own data dir, the embedded NATS listening on a free port when natsURL is empty (else
// connected to natsURL), and the SQLite file sqlitePath when set (the first process's).
func startEraseApp(t *testing.T, ctx context.Context, db storetest.DB, targets []string, natsURL, sqlitePath string) (*App, config.Config) {
	t.Helper()
	fake := llmtest.New(t, canaryLLM)
	cfg := config.Default()
	cfg.Mate.DataDir = t.TempDir()
	cfg.Mate.HTTP.Addr = "127.0.0.1:0"
	cfg.Mate.Timezone = "UTC"
	cfg.Mate.LLM.BaseURL, cfg.Mate.LLM.APIKey, cfg.Mate.LLM.Model = fake.URL+"/v1/", "test-key", "fake-model"
	cfg.Mate.Memory.CooldownMinutes = 0.01
	if natsURL == "" {
		cfg.Mate.NATS.EmbeddedListen = "127.0.0.1:0"
	} else {
		cfg.Mate.NATS.URL = natsURL
	}
	switch {
	case db.Driver == "mysql":
		cfg.Mate.Database = config.Database{Driver: "mysql", DSN: db.DSN}
	case sqlitePath != "":
		cfg.Mate.Database = config.Database{Driver: "sqlite", DSN: sqlitePath}
	}
	a, err := New(ctx, Options{Targets: targets, Config: cfg, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return a, cfg
}

// useAgent writes agent's memory through the process at base the ways a chat service does
// (an event with inline messages, extracted into a daily note; a file; a search; a context
// window; a tool call) and waits for the extraction, so that every cache of that process
// has seen the agent. It returns an open MCP session of the agent on that process.
func useAgent(t *testing.T, ctx context.Context, a *App, agent int64, canary string) *mcp.ClientSession {
	t.Helper()
	base := "http://" + a.Addr
	ev := fmt.Sprintf(`{"eventId":"e-%s","agentId":%d,"conversationId":"c-%s","occurredAt":%q,"userMessage":"please remember %s for me","assistantReply":"Noted.","messageCount":4,"triggerSource":"web",
		"messages":[{"role":"user","content":"my code word is %s."},{"role":"assistant","content":"Got it."},
		{"role":"user","content":"please remember %s for me"},{"role":"assistant","content":"Noted."}]}`,
		canary, agent, canary, time.Now().UTC().Format(time.RFC3339Nano), canary, canary, canary)
	mustStatus(t, "POST", base+"/api/v1/events/conversation-completed", ev, http.StatusAccepted)
	mustStatus(t, "PUT", fmt.Sprintf("%s/api/v1/agents/%d/files/notes.md", base, agent), fmt.Sprintf(`{"content":"# notes\n\n- %s-file\n"}`, canary), http.StatusCreated, http.StatusOK)
	poll.UntilReason(t, 60*time.Second, "the extraction and the index", func() (bool, string) {
		notes, _ := a.Workspace.ListContent(ctx, agent, "memory/", 0)
		if len(notes) != 1 || !strings.Contains(notes[0].Content, canary) {
			return false, fmt.Sprintf("daily notes %+v", notes)
		}
		st, raw := sendRaw(t, "POST", fmt.Sprintf("%s/api/v1/agents/%d/memory/search", base, agent), `{"query":"`+canary+`-file"}`)
		return st == http.StatusOK && strings.Contains(raw, canary+"-file"), fmt.Sprintf("search %d %.300s", st, raw)
	})
	mustStatus(t, "POST", fmt.Sprintf("%s/api/v1/agents/%d/conversations/c-%s/context", base, agent, canary), `{"userMessage":"what was it?"}`, http.StatusOK)
	mustStatus(t, "POST", fmt.Sprintf("%s/api/v1/agents/%d/tools/read_workspace_memory_file", base, agent), `{"filename":"notes.md"}`, http.StatusOK)
	cs := mcpSession(t, ctx, base, agent)
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_workspace_memory_file", Arguments: map[string]any{"filename": "notes.md"}}); err != nil {
		t.Fatal(err)
	}
	return cs
}

func mcpSession(t *testing.T, ctx context.Context, base string, agent int64) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "erase", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: fmt.Sprintf("%s/api/v1/agents/%d/mcp", base, agent), MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// assertStartsAnew checks, through the process a (not the one that erased), that the erased
// agent's id is a new agent: its files are the default core files again (the first
// request, before anything else could seed it), every route answers, nothing of the erased
// memory is found, the MCP session opened before the erasure is closed, and a new event is
// extracted into a new daily note.
func assertStartsAnew(t *testing.T, ctx context.Context, a *App, agent int64, old *mcp.ClientSession, erased, fresh string) {
	t.Helper()
	base := "http://" + a.Addr
	agentURL := fmt.Sprintf("%s/api/v1/agents/%d", base, agent)
	// The list seeds nothing by itself once the process has seen the agent: only the
	// erasure's notice makes it look again.
	poll.UntilReason(t, 20*time.Second, "the erased agent's files seeded again", func() (bool, string) {
		st, raw := sendRaw(t, "GET", agentURL+"/files", "")
		var env struct {
			Data struct {
				Files []struct{ Filename string }
			}
		}
		_ = json.Unmarshal([]byte(raw), &env)
		var names []string
		for _, f := range env.Data.Files {
			names = append(names, f.Filename)
		}
		slices.Sort(names)
		want := slices.Sorted(slices.Values(workspace.CoreFiles))
		return st == http.StatusOK && slices.Equal(names, want), fmt.Sprintf("%d %v", st, names)
	})
	for _, c := range []struct{ method, url, body string }{
		{"GET", agentURL, ""},
		{"PATCH", agentURL, `{"timezone":"Asia/Shanghai"}`},
		{"POST", agentURL + "/memory/search", `{"query":"` + erased + `-file"}`},
		{"POST", agentURL + "/conversations/c-" + erased + "/context", `{"userMessage":"what was it?"}`},
		{"POST", agentURL + "/tools/read_workspace_memory_file", `{"filename":"MEMORY.md"}`},
		{"POST", base + "/api/v1/conversations/c-after/messages", fmt.Sprintf(`{"agentId":%d,"messages":[{"role":"user","content":"hello again"},{"role":"assistant","content":"Hi."}]}`, agent)},
	} {
		st, raw := sendRaw(t, c.method, c.url, c.body)
		if st != http.StatusOK && st != http.StatusCreated {
			t.Errorf("%s %s after the erasure: %d %s", c.method, c.url, st, raw)
		}
		if strings.Contains(raw, erased) && !strings.Contains(c.body, erased) {
			t.Errorf("%s %s after the erasure answers the erased memory: %s", c.method, c.url, raw)
		}
	}
	poll.Until(t, 20*time.Second, "the MCP session from before the erasure closed", func() bool {
		_, err := old.CallTool(ctx, &mcp.CallToolParams{Name: "read_workspace_memory_file", Arguments: map[string]any{"filename": "MEMORY.md"}})
		return err != nil
	})
	res, err := mcpSession(t, ctx, base, agent).CallTool(ctx, &mcp.CallToolParams{Name: "read_workspace_memory_file", Arguments: map[string]any{"filename": "MEMORY.md"}})
	if err != nil || res.IsError {
		b, _ := json.Marshal(res)
		t.Fatalf("MCP tool in a fresh session after the erasure: %v %s", err, b)
	}
	// An event after the erasure is extracted like an agent's first.
	ev := fmt.Sprintf(`{"eventId":"e-%s","agentId":%d,"conversationId":"c-%s","occurredAt":%q,"userMessage":"please remember %s for me","assistantReply":"Noted.","messageCount":4,"triggerSource":"web",
		"messages":[{"role":"user","content":"my code word is %s."},{"role":"assistant","content":"Got it."},
		{"role":"user","content":"please remember %s for me"},{"role":"assistant","content":"Noted."}]}`,
		fresh, agent, fresh, time.Now().UTC().Format(time.RFC3339Nano), fresh, fresh, fresh)
	mustStatus(t, "POST", base+"/api/v1/events/conversation-completed", ev, http.StatusAccepted)
	poll.UntilReason(t, 60*time.Second, "the event after the erasure extracted", func() (bool, string) {
		notes, _ := a.Workspace.ListContent(ctx, agent, "memory/", 0)
		var runs []map[string]any
		a.DB.Raw("SELECT event_id, status, reason FROM mate_memory_run WHERE agent_id = ?", agent).Scan(&runs)
		return len(notes) == 1 && strings.Contains(notes[0].Content, fresh) && !strings.Contains(notes[0].Content, erased),
			fmt.Sprintf("daily notes %+v; runs %v", notes, runs)
	})
	var failed int64
	a.DB.Raw("SELECT COUNT(*) FROM mate_memory_run WHERE agent_id = ? AND status <> 'completed'", agent).Scan(&failed)
	if failed != 0 {
		var runs []map[string]any
		a.DB.Raw("SELECT event_id, status, reason FROM mate_memory_run WHERE agent_id = ?", agent).Scan(&runs)
		t.Errorf("runs after the erasure: %v", runs)
	}
}

// TestErasedAgentStartsAnewInEveryProcess runs two processes of one deployment (an API
// process with the embedded NATS, and an all-in-one process on the same NATS and
// database, whose workers extract every event), uses agent 1 through the second, erases it
// through the first and uses the id again through the second: every route answers, the
// core files are seeded again, the MCP session from before is closed and a new event is
// extracted (issue 34, item 1).
func TestErasedAgentStartsAnewInEveryProcess(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		first, cfg := startEraseApp(t, ctx, db, []string{TargetAPI}, "", "")
		second, _ := startEraseApp(t, ctx, db, []string{TargetAll}, first.Embedded.ClientURL(), filepath.Join(cfg.Mate.DataDir, "matememory.db"))
		old := useAgent(t, ctx, second, 1, "canaryold")
		useAgent(t, ctx, second, 2, "canarykept")

		st, raw := sendRaw(t, "DELETE", "http://"+first.Addr+"/api/v1/agents/1?erase=true&confirm=1", "")
		if st != http.StatusOK {
			t.Fatalf("erase: %d %s", st, raw)
		}
		assertStartsAnew(t, ctx, second, 1, old, "canaryold", "canarynew")
		// The erasing process starts the id anew too, and agent 2 is untouched.
		mustStatus(t, "GET", "http://"+first.Addr+"/api/v1/agents/1", "", http.StatusOK)
		st, raw = sendRaw(t, "POST", "http://"+second.Addr+"/api/v1/agents/2/memory/search", `{"query":"canarykept-file"}`)
		if st != http.StatusOK || !strings.Contains(raw, "canarykept-file") {
			t.Fatalf("agent 2's search after agent 1's erasure: %d %s", st, raw)
		}
	})
}

// TestErasedByCommandStartsAnew erases through `api erase` (its own process, on the running
// process's NATS and database): the running process starts the id anew as after an
// erasure it served itself.
func TestErasedByCommandStartsAnew(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, cfg := startEraseApp(t, ctx, storetest.DB{}, []string{TargetAll}, "", "")
	old := useAgent(t, ctx, a, 1, "canaryold")
	ccfg := cfg
	ccfg.Mate.DataDir = t.TempDir()
	ccfg.Mate.NATS.URL, ccfg.Mate.NATS.EmbeddedListen = a.Embedded.ClientURL(), ""
	ccfg.Mate.Database = config.Database{Driver: "sqlite", DSN: filepath.Join(cfg.Mate.DataDir, "matememory.db")}
	var out, errOut bytes.Buffer
	if code := eraseAgent(ctx, ccfg, slog.New(slog.DiscardHandler), []string{"--agent", "1", "--confirm", "1"}, &out, &errOut); code != 0 {
		t.Fatalf("api erase: exit %d: %s", code, errOut.String())
	}
	assertStartsAnew(t, ctx, a, 1, old, "canaryold", "canarynew")
}

// TestOldEventAfterErasureMakesNothing: after an erasure, a conversation gets new messages
// (stored over REST), and an event dated before the erasure (no inline messages, published
// to the stream directly, as a chat service with pkg/eventpub can) names it. The summarizer
// acknowledges it with no run and no daily note; the same conversation's event dated after
// the erasure is extracted (so it was the tombstone that refused the first).
func TestOldEventAfterErasureMakesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, _ := startCanaryApp(t, ctx, storetest.DB{}, "")
	base := "http://" + a.Addr
	before := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339Nano)
	mustStatus(t, "GET", base+"/api/v1/agents/1", "", http.StatusOK)
	mustStatus(t, "DELETE", base+"/api/v1/agents/1?erase=true&confirm=1", "", http.StatusOK)
	mustStatus(t, "POST", base+"/api/v1/conversations/c-late/messages", `{"agentId":1,"messages":[{"role":"user","content":"my word is canarylate."},{"role":"assistant","content":"Got it."},
		{"role":"user","content":"please remember canarylate"},{"role":"assistant","content":"Noted."}]}`, http.StatusOK, http.StatusCreated)
	old := fmt.Sprintf(`{"eventId":"e-old","agentId":1,"conversationId":"c-late","occurredAt":%q,"userMessage":"please remember canarylate","assistantReply":"Noted.","messageCount":4,"triggerSource":"web"}`, before)
	mustStatus(t, "POST", base+"/api/v1/events/conversation-completed", old, http.StatusConflict)
	js, err := jetstream.New(a.NC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, bus.AgentSubject(bus.SubjectCompleted, 1), []byte(old), jetstream.WithMsgID("1:e-old")); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "the old event settled", func() bool {
		c, err := js.Consumer(ctx, bus.StreamEvents, bus.ConsumerSummarizer)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	})
	notes, err := a.Workspace.ListContent(ctx, 1, "memory/", 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, a, "SELECT COUNT(*) FROM mate_memory_run WHERE agent_id = 1"); n != 0 || len(notes) != 0 {
		t.Fatalf("the event from before the erasure made %d runs and %d daily notes", n, len(notes))
	}
	fresh := fmt.Sprintf(`{"eventId":"e-new","agentId":1,"conversationId":"c-late","occurredAt":%q,"userMessage":"please remember canarylate","assistantReply":"Noted.","messageCount":4,"triggerSource":"web"}`, time.Now().UTC().Format(time.RFC3339Nano))
	mustStatus(t, "POST", base+"/api/v1/events/conversation-completed", fresh, http.StatusAccepted)
	poll.Until(t, 60*time.Second, "the event after the erasure extracted", func() bool {
		notes, _ := a.Workspace.ListContent(ctx, 1, "memory/", 0)
		return len(notes) == 1 && strings.Contains(notes[0].Content, "canarylate")
	})
}

func count(t *testing.T, a *App, sql string) int64 {
	t.Helper()
	var n int64
	if err := a.DB.Raw(sql).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}
