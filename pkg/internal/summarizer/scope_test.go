package summarizer

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// Issue 9.2: an event id is unique per agent only. Agent 2 using an id agent 1 already used
// gets its event stored (inside the stream's duplicate window) and its inline messages
// stored (after the window, when only the database remembers the id).
func TestEventIDsAreScopedByAgent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		h := newHarness(t, db)
		ctx := context.Background()
		withMsgs := func(agent int64, text string) *event.ConversationCompletedEvent {
			e := completed(agent, "c1", "shared-id", 2)
			e.Messages = []event.Message{{Role: "user", Content: text}, {Role: "assistant", Content: "ok " + text}}
			return e
		}
		countMsgs := func(agent int64) int64 {
			var n int64
			if err := db.DB.Model(&store.Message{}).Where("agent_id = ?", agent).Count(&n).Error; err != nil {
				t.Fatal(err)
			}
			return n
		}
		// Inside the duplicate window.
		a1 := h.publish(withMsgs(1, "agent one says hello there"))
		a2 := h.publish(withMsgs(2, "agent two says hello there"))
		if a1.Duplicate || a2.Duplicate || a1.Seq == a2.Seq {
			t.Fatalf("agent 2's event was taken for agent 1's: %+v %+v", a1, a2)
		}
		// The same agent retrying is still a duplicate.
		if again := h.publish(withMsgs(1, "agent one says hello there")); !again.Duplicate {
			t.Fatalf("a retry by the same agent was stored again: %+v", again)
		}
		h.worker(h.service("w1"))
		poll.Until(t, 20*time.Second, "both events settled", func() bool {
			return h.settled() && countMsgs(1) == 2 && countMsgs(2) == 2
		})

		// After the window: agent 3's event with the same id reaches the worker (published
		// under a message id the stream has not seen, as once the window has passed).
		e3 := withMsgs(3, "agent three says hello there")
		e3.Complete(time.Now())
		data, _ := json.Marshal(e3)
		if _, err := h.js.PublishMsg(ctx, &nats.Msg{Subject: e3.Subject(), Data: data},
			jetstream.WithMsgID("after-window-3")); err != nil {
			t.Fatal(err)
		}
		// And agent 1's own event replayed after the window stores nothing twice.
		e1 := withMsgs(1, "agent one says hello there")
		e1.Complete(time.Now())
		data, _ = json.Marshal(e1)
		if _, err := h.js.PublishMsg(ctx, &nats.Msg{Subject: e1.Subject(), Data: data},
			jetstream.WithMsgID("after-window-1")); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 20*time.Second, "agent 3's messages stored", func() bool {
			return h.settled() && countMsgs(3) == 2
		})
		if n := countMsgs(1); n != 2 {
			t.Fatalf("agent 1 has %d messages after its event was replayed, want 2", n)
		}
		var keys []store.AppliedEffect
		db.DB.Where("`key` LIKE ?", "event:messages:%").Find(&keys)
		if len(keys) != 3 {
			t.Fatalf("effect keys %+v, want one per agent", keys)
		}
		_ = bus.StreamEvents
	})
}

// Messages stored before the key was scoped by agent ("event:messages:<eventId>") are not
// stored again when that event is replayed; another agent's event with that id still is.
func TestLegacyMessagesKey(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		h := newHarness(t, db)
		s := h.service("w1")
		ctx := context.Background()
		at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		db.DB.Create(&store.AppliedEffect{Key: "event:messages:old", CreateTime: at})
		db.DB.Create(&store.Message{AgentID: 1, ConversationID: "c1", Role: "user", Content: "old", CreateTime: at})
		ev := func(agent int64) *event.ConversationCompletedEvent {
			e := completed(agent, "c1", "old", 1)
			e.Messages = []event.Message{{Role: "user", Content: "old"}}
			return e
		}
		for _, agent := range []int64{1, 2} {
			if err := s.d.Messages.Ingest(ctx, ev(agent), s.d.Now()); err != nil {
				t.Fatal(err)
			}
		}
		var n1, n2 int64
		db.DB.Model(&store.Message{}).Where("agent_id = 1").Count(&n1)
		db.DB.Model(&store.Message{}).Where("agent_id = 2").Count(&n2)
		if n1 != 1 || n2 != 1 {
			t.Fatalf("agent 1 has %d messages (want 1: already stored), agent 2 has %d (want 1)", n1, n2)
		}
	})
}
