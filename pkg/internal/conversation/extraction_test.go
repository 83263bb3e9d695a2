package conversation_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// The extraction's progress: a conversation is counted with its watermark, registered once,
// and its watermark moves only from where a batch started, in the caller's unit of work.
func TestWatermarksMoveFromWhereTheBatchStarted(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		msgs := conversation.New(db.DB)
		units := store.NewUnits(db.DB)
		now := time.Now()
		added, err := msgs.Add(ctx, conversation.Message{AgentID: 1, ConversationID: "c1", Role: "user", Content: "hi"},
			conversation.Message{AgentID: 1, ConversationID: "c1", Role: "assistant", Content: "hello"})
		if err != nil {
			t.Fatal(err)
		}
		last := added[1].ID
		p, err := msgs.Progress(ctx, 1, "c1")
		if err != nil || p.Count != 2 || p.Last != last || p.Registered || p.ErasedAt != nil {
			t.Fatalf("progress before registration: %+v %v", p, err)
		}
		move := func(mv conversation.Move) error {
			return units.Do(ctx, func(tx *store.Tx) error { return msgs.MoveWatermarks(tx, 1, []conversation.Move{mv}, now) })
		}
		// Not registered yet: the move inserts the watermark.
		if err := move(conversation.Move{Conv: "c1", From: 0, To: added[0].ID, New: true}); err != nil {
			t.Fatal(err)
		}
		// Registering again leaves it where it is.
		if err := msgs.Register(ctx, 1, "c1", now); err != nil {
			t.Fatal(err)
		}
		if wm, err := msgs.LastExtracted(ctx, 1, "c1"); err != nil || wm != added[0].ID {
			t.Fatalf("watermark %d %v, want %d", wm, err, added[0].ID)
		}
		// A batch that started elsewhere is stale, and rolls its unit back.
		if err := move(conversation.Move{Conv: "c1", From: 0, To: last}); !errors.Is(err, conversation.ErrStale) {
			t.Fatalf("stale move: %v", err)
		}
		if err := move(conversation.Move{Conv: "c1", From: added[0].ID, To: last}); err != nil {
			t.Fatal(err)
		}
		// A forced re-extraction moves nothing, and needs the range extracted.
		if err := move(conversation.Move{Conv: "c1", From: 0, To: last, Redo: true}); err != nil {
			t.Fatal(err)
		}
		if err := move(conversation.Move{Conv: "c1", From: 0, To: last + 1, Redo: true}); !errors.Is(err, conversation.ErrStale) {
			t.Fatalf("redo past the watermark: %v", err)
		}
		p, err = msgs.Progress(ctx, 1, "c1")
		if err != nil || !p.Registered || p.Extracted != last {
			t.Fatalf("progress after the moves: %+v %v", p, err)
		}
		wms, err := msgs.Watermarks(ctx, 1)
		if err != nil || len(wms) != 1 || wms["c1"] != last {
			t.Fatalf("watermarks %v %v", wms, err)
		}
		if pend, err := msgs.PendingElsewhere(ctx, 1, "c2", 0, 10); err != nil || len(pend) != 0 {
			t.Fatalf("pending after extraction: %v %v", pend, err)
		}
	})
}

// An event's inline messages are stored once, whatever the redeliveries.
func TestIngestStoresAnEventOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ctx := context.Background()
		msgs := conversation.New(db.DB)
		ev := &event.ConversationCompletedEvent{EventID: "e1", AgentID: 2, ConversationID: "c1", OccurredAt: time.Now(),
			Messages: []event.Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello"}}}
		for range 2 {
			if err := msgs.Ingest(ctx, ev, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := msgs.Count(ctx, 2, "c1"); err != nil || n != 2 {
			t.Fatalf("%d messages stored (%v), want 2", n, err)
		}
		if text, ok, err := msgs.LastUserMessage(ctx, 2, "c1"); err != nil || !ok || text != "hi" {
			t.Fatalf("last user message %q %v %v", text, ok, err)
		}
	})
}
