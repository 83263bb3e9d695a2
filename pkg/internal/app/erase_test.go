package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// canaryLLM extracts a daily entry quoting each canary of the transcript, and refuses (400,
// a dead letter at once) a transcript that asks it to fail.
func canaryLLM(r llmtest.Received) llmtest.Reply {
	user := ""
	for _, m := range r.Messages {
		if m.Role == "user" {
			user = m.Content
		}
	}
	if strings.Contains(user, "PLEASE-FAIL") {
		return llmtest.Reply{Status: 400, Content: "refused"}
	}
	var lines []string
	for _, w := range strings.Fields(user) {
		if strings.HasPrefix(w, "canary") {
			lines = append(lines, "- noted "+strings.Trim(w, ".,:;\"'"))
		}
	}
	b, _ := json.Marshal(map[string]any{"should_update": true, "reason": "test", "daily_entry": strings.Join(lines, "\n"),
		"memory_update": "", "profile_update": ""})
	return llmtest.Reply{Content: string(b)}
}

// TestEraseAgentLeavesNoByte writes a canary through every path that stores data (an event
// with inline messages, messages over REST, a file over REST, a tool edit, an extraction, a
// dead letter, the recall index), erases the agent, then scans every byte of the data
// directory (SQLite file and WAL, the JetStream file store with its KV buckets) and, on
// MariaDB, every row: no canary is left. A replay of the stream and an old event published
// again bring nothing back, and the other agent's canaries are all still there.
func TestEraseAgentLeavesNoByte(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		a, cfg := startCanaryApp(t, ctx, db, "127.0.0.1:0")
		base := "http://" + a.Addr
		occurred := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339Nano)

		write := func(agent int64, canary string) {
			t.Helper()
			// An event with inline messages, extracted by the model into the daily note.
			ev := fmt.Sprintf(`{"eventId":"e-inline","agentId":%d,"conversationId":"c-inline","occurredAt":%q,"userMessage":"please remember %s-inline for me","assistantReply":"Noted.","messageCount":4,"triggerSource":"web",
				"messages":[{"role":"user","content":"my code word is %s-inline."},{"role":"assistant","content":"Got it."},
				{"role":"user","content":"please remember %s-inline for me"},{"role":"assistant","content":"Noted."}]}`, agent, occurred, canary, canary, canary)
			mustStatus(t, "POST", base+"/api/v1/events/conversation-completed", ev, http.StatusAccepted)
			// Messages over REST, then their event.
			msgs := fmt.Sprintf(`{"agentId":%d,"messages":[{"role":"user","content":"note %s-rest please"},{"role":"assistant","content":"Sure."},
				{"role":"user","content":"thanks, %s-rest it is"},{"role":"assistant","content":"Done."}]}`, agent, canary, canary)
			mustStatus(t, "POST", base+"/api/v1/conversations/c-rest/messages", msgs, http.StatusOK, http.StatusCreated)
			mustStatus(t, "POST", base+"/api/v1/events/conversation-completed", fmt.Sprintf(`{"eventId":"e-rest","agentId":%d,"conversationId":"c-rest","occurredAt":%q,"userMessage":"thanks, %s-rest it is","assistantReply":"Done.","messageCount":4,"triggerSource":"web"}`, agent, occurred, canary), http.StatusAccepted)
			// A file over REST, changed by a tool edit (its history keeps the first version).
			mustStatus(t, "PUT", fmt.Sprintf("%s/api/v1/agents/%d/files/notes.md", base, agent), fmt.Sprintf(`{"content":"# notes\n\n- %s-file\n"}`, canary), http.StatusCreated)
			mustStatus(t, "POST", fmt.Sprintf("%s/api/v1/agents/%d/tools/edit_workspace_memory_file", base, agent),
				fmt.Sprintf(`{"filename":"notes.md","oldText":"%s-file","newText":"%s-file and %s-edit"}`, canary, canary, canary), http.StatusOK)
		}
		// A conversation the model refuses: dead-lettered with its inline messages. Sent once
		// the others are extracted (an extraction takes every pending conversation of the
		// agent, and the refusal would take them along).
		fail := func(agent int64, canary string) {
			t.Helper()
			ev := fmt.Sprintf(`{"eventId":"e-fail","agentId":%d,"conversationId":"c-fail","occurredAt":%q,"userMessage":"PLEASE-FAIL %s-dlq now","assistantReply":"Hm.","messageCount":4,"triggerSource":"web",
				"messages":[{"role":"user","content":"PLEASE-FAIL %s-dlq"},{"role":"assistant","content":"Hm."},{"role":"user","content":"PLEASE-FAIL %s-dlq now"},{"role":"assistant","content":"Hm."}]}`, agent, occurred, canary, canary, canary)
			mustStatus(t, "POST", base+"/api/v1/events/conversation-completed", ev, http.StatusAccepted)
		}
		write(1, "canaryone")
		write(2, "canarytwo")
		poll.UntilReason(t, 60*time.Second, "the extractions", func() (bool, string) {
			for _, agent := range []int64{1, 2} {
				notes, _ := a.Workspace.ListContent(ctx, agent, "memory/", 0)
				if len(notes) != 1 || !strings.Contains(notes[0].Content, "-inline") || !strings.Contains(notes[0].Content, "-rest") {
					var runs []map[string]any
					a.DB.Raw("SELECT event_id, status, reason FROM mate_memory_run WHERE agent_id = ?", agent).Scan(&runs)
					return false, fmt.Sprintf("agent %d's daily notes: %+v; runs %v", agent, notes, runs)
				}
			}
			return true, ""
		})
		fail(1, "canaryone")
		fail(2, "canarytwo")

		// Wait until the extraction wrote the daily notes, the refusal reached the dead
		// letters and search finds the file.
		poll.UntilReason(t, 60*time.Second, "dead letters and the index", func() (bool, string) {
			dl, err := bus.ListDeadLetters(ctx, a.JS, 0, "", 10)
			if err != nil || len(dl) != 2 {
				return false, fmt.Sprintf("dead letters: %d %v", len(dl), err)
			}
			for _, c := range []string{"canaryone", "canarytwo"} {
				st, raw := sendRaw(t, "POST", fmt.Sprintf("%s/api/v1/agents/%s/memory/search", base, map[string]string{"canaryone": "1", "canarytwo": "2"}[c]), `{"query":"`+c+`-edit"}`)
				if st != http.StatusOK || !strings.Contains(raw, c+"-edit") {
					return false, fmt.Sprintf("search %s: %d %.300s", c, st, raw)
				}
			}
			return true, ""
		})
		// The scan sees the canary in the JetStream file store (events, dead letters) and in
		// the database before the erasure.
		if n := countCanary(t, a, storetest.DB{}, filepath.Join(cfg.Mate.DataDir, "nats"), "canaryone"); n == 0 {
			t.Fatal("the canary is not in the JetStream store before the erasure: the scan cannot see it")
		}
		if n := countCanary(t, a, db, cfg.Mate.DataDir, "canaryone"); n == 0 {
			t.Fatal("the canary is nowhere before the erasure: the scan cannot see it")
		}
		// The search snapshot file (every agent gets one here) holds it too.
		poll.Until(t, 30*time.Second, "agent 1's search snapshot file with the canary", func() bool {
			return countCanary(t, a, storetest.DB{}, filepath.Join(cfg.Mate.DataDir, "recall"), "canaryone") > 0
		})

		// An event on its way when the erasure comes: stored on the stream, delivered or
		// waiting for the agent's cooldown; whatever its state, nothing of it may come back.
		held := fmt.Sprintf(`{"eventId":"e-held","agentId":1,"conversationId":"c-held","occurredAt":%q,"userMessage":"canaryone-held again","assistantReply":"x","messageCount":4,"triggerSource":"web",
			"messages":[{"role":"user","content":"canaryone-held"},{"role":"assistant","content":"x"},{"role":"user","content":"canaryone-held again"},{"role":"assistant","content":"x"}]}`, occurred)
		mustStatus(t, "POST", base+"/api/v1/events/conversation-completed", held, http.StatusAccepted)

		// Refused without the confirmation; erased with it.
		mustStatus(t, "DELETE", base+"/api/v1/agents/1", "", http.StatusBadRequest)
		mustStatus(t, "DELETE", base+"/api/v1/agents/1?erase=true&confirm=2", "", http.StatusBadRequest)
		st, raw := sendRaw(t, "DELETE", base+"/api/v1/agents/1?erase=true&confirm=1", "")
		if st != http.StatusOK {
			t.Fatalf("erase: %d %s", st, raw)
		}
		var env struct {
			Data struct {
				Rows     map[string]int64
				Messages map[string]int64
			}
		}
		_ = json.Unmarshal([]byte(raw), &env)
		if env.Data.Rows["mate_workspace_file"] == 0 || env.Data.Rows["mate_message"] == 0 || env.Data.Rows["mate_recall_chunk"] == 0 ||
			env.Data.Messages[bus.StreamEvents] < 3 || env.Data.Messages[bus.StreamDLQ] < 1 {
			t.Fatalf("receipt %s", raw)
		}
		if strings.Contains(raw, "canary") {
			t.Fatalf("the receipt holds content: %s", raw)
		}
		if n := countCanary(t, a, db, cfg.Mate.DataDir, "canaryone"); n != 0 {
			t.Fatalf("%d occurrences of the erased agent's canary remain", n)
		}

		// An event from before the erasure is refused at intake; published to the stream
		// directly (as a chat service with pkg/eventpub can), the worker refuses it.
		old := fmt.Sprintf(`{"eventId":"e-late","agentId":1,"conversationId":"c-late","occurredAt":%q,"userMessage":"canaryone-late","assistantReply":"x","messageCount":2,"triggerSource":"web","messages":[{"role":"user","content":"canaryone-late"},{"role":"assistant","content":"x"}]}`, occurred)
		mustStatus(t, "POST", base+"/api/v1/events/conversation-completed", old, http.StatusConflict)
		js, _ := jetstream.New(a.NC)
		if _, err := js.Publish(ctx, bus.AgentSubject(bus.SubjectCompleted, 1), []byte(old), jetstream.WithMsgID("1:e-late")); err != nil {
			t.Fatal(err)
		}
		// A replay of everything stored: the late event is all there is of agent 1.
		rcfg := cfg
		rcfg.Mate.NATS.URL = a.Embedded.ClientURL()
		var out, errOut bytes.Buffer
		if code := replay(ctx, rcfg, slog.New(slog.DiscardHandler), []string{"-agent", "1"}, &out, &errOut); code != 0 {
			t.Fatalf("replay exit %d: %s", code, errOut.String())
		}
		poll.Until(t, 30*time.Second, "the late event settled", func() bool {
			ci, err := js.Consumer(ctx, bus.StreamEvents, bus.ConsumerSummarizer)
			if err != nil {
				return false
			}
			info, err := ci.Info(ctx)
			return err == nil && info.NumPending == 0 && info.NumAckPending == 0
		})
		var rows int64
		a.DB.Raw("SELECT COUNT(*) FROM mate_message WHERE agent_id = 1").Scan(&rows)
		var files int64
		a.DB.Raw("SELECT COUNT(*) FROM mate_workspace_file WHERE agent_id = 1").Scan(&files)
		var runs int64
		a.DB.Raw("SELECT COUNT(*) FROM mate_memory_run WHERE agent_id = 1").Scan(&runs)
		if rows != 0 || files != 0 || runs != 0 {
			t.Fatalf("after the late event and the replay agent 1 has %d messages, %d files, %d runs; want none", rows, files, runs)
		}
		// The other agent's canaries are all still there.
		for _, c := range []string{"canarytwo-inline", "canarytwo-rest", "canarytwo-dlq", "canarytwo-file", "canarytwo-edit"} {
			if countCanary(t, a, db, cfg.Mate.DataDir, c) == 0 {
				t.Errorf("agent 2's %s is gone", c)
			}
		}
	})
}

// startCanaryApp runs the all-in-one process on db with the canary model, a cooldown of
// 0.6 s and, when listen is set, the embedded NATS listener there.
func startCanaryApp(t *testing.T, ctx context.Context, db storetest.DB, listen string) (*App, config.Config) {
	t.Helper()
	fake := llmtest.New(t, canaryLLM)
	cfg := config.Default()
	cfg.Mate.DataDir = t.TempDir()
	cfg.Mate.Memory.Search.SnapshotMinChunks = 1 // every agent's search snapshot in a file, for the scan
	cfg.Mate.HTTP.Addr = "127.0.0.1:0"
	cfg.Mate.NATS.EmbeddedListen = listen
	cfg.Mate.Timezone = "UTC"
	cfg.Mate.LLM.BaseURL, cfg.Mate.LLM.APIKey, cfg.Mate.LLM.Model = fake.URL+"/v1/", "test-key", "fake-model"
	cfg.Mate.Memory.CooldownMinutes = 0.01
	if db.Driver == "mysql" {
		cfg.Mate.Database = config.Database{Driver: "mysql", DSN: db.DSN}
	}
	a, err := New(ctx, Options{Config: cfg, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return a, cfg
}

// countCanary counts the canary in every file of the data directory (the SQLite database and
// its WAL, the JetStream store) and, on MariaDB, in every row of every table.
func countCanary(t *testing.T, a *App, db storetest.DB, dir, canary string) int {
	t.Helper()
	n := 0
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err == nil {
			n += bytes.Count(b, []byte(canary))
		}
		return nil
	})
	if db.Driver == "mysql" {
		n += countRows(t, a.DB, canary)
	}
	return n
}

func countRows(t *testing.T, gdb *gorm.DB, canary string) int {
	t.Helper()
	tables, err := gdb.Migrator().GetTables()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, table := range tables {
		var rows []map[string]any
		if err := gdb.Table(table).Find(&rows).Error; err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		for _, r := range rows {
			for _, v := range r {
				n += strings.Count(fmt.Sprint(v), canary)
				if b, ok := v.([]byte); ok {
					n += bytes.Count(b, []byte(canary))
				}
			}
		}
	}
	return n
}

func mustStatus(t *testing.T, method, url, body string, want ...int) {
	t.Helper()
	st, raw := sendRaw(t, method, url, body)
	for _, w := range want {
		if st == w {
			return
		}
	}
	t.Fatalf("%s %s: %d %s, want %v", method, url, st, raw, want)
}

func sendRaw(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	r, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// TestEraseConversation erases one conversation: its messages, its events and its ledger
// rows are gone from the database and the JetStream store, the daily note versions its
// extraction wrote are listed for review, and the agent's other conversation stays whole.
func TestEraseConversation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		a, cfg := startCanaryApp(t, ctx, db, "")
		base := "http://" + a.Addr
		for _, c := range []string{"gone", "keep"} {
			ev := fmt.Sprintf(`{"eventId":"e-%s","agentId":1,"conversationId":"c-%s","userMessage":"please remember canary%s for me","assistantReply":"Noted.","messageCount":4,"triggerSource":"web",
				"messages":[{"role":"user","content":"my word is canary%s."},{"role":"assistant","content":"Got it."},
				{"role":"user","content":"please remember canary%s for me"},{"role":"assistant","content":"Noted."}]}`, c, c, c, c, c)
			mustStatus(t, "POST", base+"/api/v1/events/conversation-completed", ev, http.StatusAccepted)
			poll.Until(t, 60*time.Second, "the extraction of c-"+c, func() bool {
				notes, _ := a.Workspace.ListContent(ctx, 1, "memory/", 0)
				return len(notes) == 1 && strings.Contains(notes[0].Content, "canary"+c)
			})
		}
		mustStatus(t, "DELETE", base+"/api/v1/agents/1/conversations/c-gone?erase=true&confirm=c-keep", "", http.StatusBadRequest)
		st, raw := sendRaw(t, "DELETE", base+"/api/v1/agents/1/conversations/c-gone?erase=true&confirm=c-gone", "")
		if st != http.StatusOK {
			t.Fatalf("erase conversation: %d %s", st, raw)
		}
		var env struct {
			Data struct {
				Rows     map[string]int64
				Messages map[string]int64
				Derived  []struct {
					Filename string
					RunID    string
				}
			}
		}
		_ = json.Unmarshal([]byte(raw), &env)
		d := env.Data
		if d.Rows["mate_message"] != 4 || d.Rows["mate_memory_run"] != 1 || d.Messages[bus.StreamEvents] != 1 ||
			len(d.Derived) == 0 || !strings.HasPrefix(d.Derived[0].Filename, "memory/") {
			t.Fatalf("receipt %s", raw)
		}
		var n int64
		a.DB.Raw("SELECT COUNT(*) FROM mate_message WHERE conversation_id = 'c-gone'").Scan(&n)
		if n != 0 {
			t.Fatalf("%d messages of c-gone remain", n)
		}
		if got := countCanary(t, a, storetest.DB{}, filepath.Join(cfg.Mate.DataDir, "nats"), "canarygone"); got != 0 {
			t.Fatalf("%d occurrences of c-gone in the JetStream store", got)
		}
		if got := countCanary(t, a, storetest.DB{}, filepath.Join(cfg.Mate.DataDir, "nats"), "canarykeep"); got == 0 {
			t.Fatal("c-keep's event went too")
		}
		a.DB.Raw("SELECT COUNT(*) FROM mate_message WHERE conversation_id = 'c-keep'").Scan(&n)
		if n != 4 {
			t.Fatalf("c-keep has %d messages, want 4", n)
		}
	})
}
