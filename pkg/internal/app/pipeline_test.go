package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

var pipelineTag = regexp.MustCompile(`\bconv-tag-[0-9]+\b`)

// pipelineLLM answers memory extraction prompts with a daily entry naming each
// conversation tag of the transcript (and anything else with a plain summary).
func pipelineLLM(r llmtest.Received) llmtest.Reply {
	transcript, ok := r.Transcript()
	if !ok {
		return llmtest.Reply{Content: "summary"}
	}
	seen := map[string]bool{}
	var lines []string
	for _, tg := range pipelineTag.FindAllString(transcript, -1) {
		if !seen[tg] {
			seen[tg] = true
			lines = append(lines, "- "+tg)
		}
	}
	b, _ := json.Marshal(map[string]any{"should_update": true, "reason": "test", "daily_entry": strings.Join(lines, "\n"),
		"memory_update": "", "profile_update": ""})
	return llmtest.Reply{Content: string(b)}
}

func postBody(t *testing.T, url, body string) (int, string, json.RawMessage) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env struct {
		Msg  string          `json:"msg"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("POST %s: %d %q", url, resp.StatusCode, raw)
	}
	return resp.StatusCode, env.Msg, env.Data
}

// TestPipelineDoneWhen is issue 3's acceptance check against the all-in-one process:
// messages and completion events for 20 conversations of one agent inside the cooldown all
// reach the daily note, each once; the manual summarize path answers truthfully; a replay
// changes nothing.
func TestPipelineDoneWhen(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		fake := llmtest.New(t, pipelineLLM)
		cfg := config.Default()
		cfg.Mate.DataDir = t.TempDir()
		cfg.Mate.HTTP.Addr = "127.0.0.1:0"
		cfg.Mate.NATS.EmbeddedListen = "127.0.0.1:0"
		cfg.Mate.LLM.BaseURL, cfg.Mate.LLM.APIKey, cfg.Mate.LLM.Model = fake.URL+"/v1/", "test-key", "fake-model"
		cfg.Mate.Memory.CooldownMinutes = 0.05
		if db.Driver == "mysql" {
			cfg.Mate.Database = config.Database{Driver: "mysql", DSN: db.DSN}
		}
		ctx := context.Background()
		a, err := New(ctx, Options{Config: cfg, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Close)
		if err := a.Start(ctx); err != nil {
			t.Fatal(err)
		}
		base := "http://" + a.Addr

		const n = 20
		for i := 1; i <= n; i++ {
			conv := fmt.Sprintf("c%d", i)
			msgs := fmt.Sprintf(`{"agentId":1,"messages":[
				{"role":"user","content":"conv-tag-%d: what should we cook tonight?"},
				{"role":"assistant","content":"How about noodles?"},
				{"role":"user","content":"good, with vegetables please."},
				{"role":"assistant","content":"Noodles with vegetables it is."}]}`, i)
			if st, msg, _ := postBody(t, base+"/api/v1/conversations/"+conv+"/messages", msgs); st != 200 && st != 201 {
				t.Fatalf("store messages: %d %s", st, msg)
			}
			ev := fmt.Sprintf(`{"eventId":"evt-%d","agentId":1,"conversationId":"%s","userMessage":"good, with vegetables please.","assistantReply":"Noodles with vegetables it is.","messageCount":4,"triggerSource":"web"}`, i, conv)
			st, msg, data := postBody(t, base+"/api/v1/events/conversation-completed", ev)
			if st != 202 || !strings.Contains(string(data), `"stream":"MATE_EVENTS"`) {
				t.Fatalf("publish: %d %s %s", st, msg, data)
			}
		}
		daily := func() string {
			notes, _ := a.Workspace.ListContent(ctx, 1, "memory/", 0)
			if len(notes) != 1 {
				return ""
			}
			return notes[0].Content
		}
		// The tag is in each conversation's first message only: a conversation split between
		// two extractions (the transcript holds 30 messages) must still show it once.
		deadline := time.Now().Add(60 * time.Second)
		for {
			d := daily()
			done := true
			for i := 1; i <= n; i++ {
				done = done && strings.Count(d, fmt.Sprintf("- conv-tag-%d\n", i)) == 1
			}
			if done {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("not every conversation reached the daily note once:\n%s", d)
			}
			time.Sleep(20 * time.Millisecond)
		}

		// Manual summarize: a conversation already extracted is skipped and says why; a new
		// one is extracted now, though the agent is in its cooldown.
		st, msg, data := postBody(t, base+"/api/v1/memory/1/summarize/c1", "")
		if st != 200 || !strings.Contains(string(data), `"status":"skipped"`) || !strings.Contains(string(data), "already extracted") {
			t.Fatalf("manual summarize of c1: %d %s %s", st, msg, data)
		}
		postBody(t, base+"/api/v1/conversations/c21/messages", `{"agentId":1,"messages":[
			{"role":"user","content":"conv-tag-21: remind me about the dentist."},{"role":"assistant","content":"Noted."},
			{"role":"user","content":"on Friday at nine."},{"role":"assistant","content":"Friday, 9:00."}]}`)
		st, msg, data = postBody(t, base+"/api/v1/memory/1/summarize/c21", "")
		if st != 200 || !strings.Contains(string(data), `"status":"completed"`) || strings.Count(daily(), "- conv-tag-21\n") != 1 {
			t.Fatalf("manual summarize of c21: %d %s %s", st, msg, data)
		}

		// Replay everything through the replay command, against the running process.
		before := pipelineSnapshot(t, a)
		rcfg := cfg
		rcfg.Mate.NATS.URL = a.Embedded.ClientURL()
		rcfg.Mate.HTTP.Addr = "127.0.0.1:0"
		var out, errOut bytes.Buffer
		if code := replay(ctx, rcfg, slog.New(slog.DiscardHandler), []string{"-agent", "1"}, &out, &errOut); code != 0 {
			t.Fatalf("replay exit %d: %s", code, errOut.String())
		}
		if !strings.Contains(out.String(), "replayed: 22 events: completed 20, skipped 2") {
			t.Fatalf("replay output:\n%s", out.String())
		}
		if after := pipelineSnapshot(t, a); after != before {
			t.Fatalf("replay changed memory:\nbefore %s\nafter %s", before, after)
		}
		out.Reset()
		if code := replay(ctx, rcfg, slog.New(slog.DiscardHandler), []string{"-from-seq", "3", "-to-seq", "4", "-dry-run"}, &out, &errOut); code != 0 ||
			!strings.Contains(out.String(), "dry run: 2 events: completed 2") {
			t.Fatalf("dry run exit %d:\n%s%s", code, out.String(), errOut.String())
		}
		if code := replay(ctx, rcfg, slog.New(slog.DiscardHandler), []string{"-since", "yesterday"}, &out, &errOut); code != 2 {
			t.Fatalf("bad -since accepted: %d", code)
		}
	})
}

func pipelineSnapshot(t *testing.T, a *App) string {
	t.Helper()
	var files []store.WorkspaceFile
	if err := a.DB.Order("agent_id, filename").Find(&files).Error; err != nil {
		t.Fatal(err)
	}
	var wms []store.ExtractionWatermark
	a.DB.Order("agent_id, conversation_id").Find(&wms)
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "%s v%d %q\n", f.Filename, f.Version, f.Content)
	}
	for _, w := range wms {
		fmt.Fprintf(&b, "%s %d\n", w.ConversationID, w.LastMessageID)
	}
	return b.String()
}
