package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

type convHit struct {
	Source, Filename, Snippet string
}

// Issue 11.1: with mate.memory.search.sources = files,conversations, stored conversations are
// searchable: messages posted to the REST route at once, an event's inline messages (stored by
// the summarizer, no index message) by the reconciler; never across agents; with the default
// sources they are not indexed.
func TestConversationsAsASearchSource(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		for _, sources := range [][]string{{"files", "conversations"}, {"files"}} {
			cfg := config.Default()
			cfg.Mate.DataDir = t.TempDir()
			cfg.Mate.HTTP.Addr = "127.0.0.1:0"
			cfg.Mate.NATS.SyncAlways = false
			cfg.Mate.Timezone = "UTC"
			cfg.Mate.Memory.CooldownMinutes = 0
			cfg.Mate.Memory.Search.Sources = sources
			cfg.Mate.Memory.Search.ReconcileSeconds = 0.2
			if db.Driver == "mysql" {
				cfg.Mate.Database = config.Database{Driver: "mysql", DSN: db.DSN}
			}
			ctx := context.Background()
			a, err := app.New(ctx, app.Options{Config: cfg, Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Start(ctx); err != nil {
				t.Fatal(err)
			}
			// Closed at the end of the iteration: the next one shares the database, and this
			// app's indexer must not index the next one's conversations.
			stop := a.Close
			base := "http://" + a.Addr
			conv := "c-" + strings.Join(sources, "-")
			if r := do(t, "POST", base+"/api/v1/conversations/"+conv+"/messages", "",
				`{"agentId":3,"messages":[{"role":"user","content":"My favourite trail is Tiger Leaping Gorge"},{"role":"assistant","content":"Noted, a classic hike."}]}`); r.status != 201 {
				t.Fatalf("store messages: %d %s", r.status, r.Msg)
			}
			if r := do(t, "POST", base+"/api/v1/events/conversation-completed", "",
				`{"eventId":"inline-`+conv+`","agentId":3,"conversationId":"`+conv+`-ev","userMessage":"my laptop serial is SN-77K2Q9, keep it","assistantReply":"Kept.","messageCount":4,"triggerSource":"web",`+
					`"messages":[{"role":"user","content":"hello there, a question about my laptop"},{"role":"assistant","content":"sure"},{"role":"user","content":"my laptop serial is SN-77K2Q9, keep it"},{"role":"assistant","content":"Kept."}]}`); r.status != 202 {
				t.Fatalf("event: %d %s", r.status, r.Msg)
			}
			search := func(agent, q string) []convHit {
				b, _ := json.Marshal(map[string]any{"query": q})
				r := do(t, "POST", base+"/api/v1/agents/"+agent+"/memory/search", "", string(b))
				if r.status != 200 {
					t.Fatalf("search: %d %s", r.status, r.Msg)
				}
				var out struct{ Hits []convHit }
				_ = json.Unmarshal(r.Data, &out)
				return out.Hits
			}
			found := func(agent, q, file string) bool {
				for _, h := range search(agent, q) {
					if h.Filename == file && h.Source == "conversation" {
						return true
					}
				}
				return false
			}
			if len(sources) == 1 {
				// Nothing may index them: search once the event's messages are stored and a
				// whole reconciler sweep ran after that (the one that would index them were
				// conversations a source).
				waitMessages(t, a, 3, conv+"-ev", 4)
				for i := 0; i < 2; i++ {
					// The sweep that passes a file written now started after the messages were
					// stored; the sweep after that starts once that one is over.
					waitSwept(t, a, base, 3, fmt.Sprintf("sweep-%s-%d.md", conv, i))
				}
				if found("3", "Tiger Leaping Gorge", "conversation:"+conv) {
					t.Fatal("a conversation was indexed although conversations are not a source")
				}
				stop()
				continue
			}
			deadline := time.Now().Add(15 * time.Second)
			for !found("3", "Tiger Leaping Gorge", "conversation:"+conv) || !found("3", "SN-77K2Q9", "conversation:"+conv+"-ev") {
				if time.Now().After(deadline) {
					t.Fatalf("conversations not found: %+v / %+v", search("3", "Tiger Leaping Gorge"), search("3", "SN-77K2Q9"))
				}
				time.Sleep(100 * time.Millisecond)
			}
			if hits := search("4", "Tiger Leaping Gorge"); len(hits) != 0 {
				t.Fatalf("agent 4 sees agent 3's conversation: %+v", hits)
			}
			stop()
		}
	})
}

// waitMessages waits until conversation conv of agent holds n stored messages.
func waitMessages(t *testing.T, a *app.App, agent int64, conv string, n int64) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var got int64
		if err := a.DB.Model(&store.Message{}).Where("agent_id = ? AND conversation_id = ?", agent, conv).Count(&got).Error; err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("conversation %s: %d messages stored after 15 s, want %d", conv, got, n)
		}
	}
}

// waitSwept writes file name of agent through REST and waits until the recall reconciler's
// sweep has passed it (its watermark over the workspace files' update time, which only a
// sweep moves, reaches the file's).
func waitSwept(t *testing.T, a *app.App, base string, agent int64, name string) {
	t.Helper()
	if r := do(t, "PUT", fmt.Sprintf("%s/api/v1/agents/%d/files/%s", base, agent, name), "", `{"content":"a marker for the reconciler's sweep"}`); r.status >= 300 {
		t.Fatalf("write %s: %d %s", name, r.status, r.Msg)
	}
	var f store.WorkspaceFile
	if err := a.DB.Where("agent_id = ? AND filename = ? AND deleted = 0", agent, name).Take(&f).Error; err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var cur store.RecallCursor
		err := a.DB.Where("name = ?", "workspace").Take(&cur).Error
		if err == nil && !cur.UpdateTime.Before(f.UpdateTime) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reconciler did not sweep past %s (updated %s) within 15 s: its watermark is %s (%v)", name, f.UpdateTime, cur.UpdateTime, err)
		}
	}
}
