package summarizer

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// loseLease deletes an agent's lease key behind its holder's back, as its expiry does while
// the holder is cut off from NATS (the holder has not noticed yet: its TTL is long).
func (h *harness) loseLease(agentID int64) {
	h.t.Helper()
	kv, err := h.js.KeyValue(context.Background(), bus.BucketLease)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := kv.Delete(context.Background(), strconv.FormatInt(agentID, 10)); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) dailyNote(agentID int64) string {
	h.t.Helper()
	notes, err := h.ws.ListContent(context.Background(), agentID, "memory/", 0)
	if err != nil || len(notes) != 1 {
		h.t.Fatalf("daily notes of agent %d: %+v %v", agentID, notes, err)
	}
	return notes[0].Content
}

func longLease(s *Settings) { s.LeaseTTL = 30 * time.Second }

// Issue 9 point 15. Worker A's commit is delayed while it loses its lease; worker B takes
// the lease and extracts the same and the newer messages; then A's commit goes through.
// The fencing value in the database refuses A's write: each message range is in the note
// once.
func TestLostLeaseCommitIsFencedOut(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		fake := llmtest.New(t, echoLLM)
		h := newHarness(t, db, withLLM(fake), withSettings(longLease))
		h.conversation(7, "c1", "t7-1", 4)
		a, b := h.service("A"), h.service("B")
		atCommit, resume := make(chan struct{}), make(chan struct{})
		a.hookBeforeCommit = func() error { close(atCommit); <-resume; return nil }
		done := make(chan Result, 1)
		go func() { done <- a.Handle(context.Background(), JobFromEvent(completed(7, "c1", "e7-1", 4))) }()
		<-atCommit

		h.loseLease(7)
		h.conversation(7, "c1", "t7-2", 2)
		rb := b.Handle(context.Background(), JobFromEvent(completed(7, "c1", "e7-2", 6)))
		if rb.Status != store.RunCompleted || !rb.Covered {
			t.Fatalf("worker B: %+v", rb)
		}
		close(resume)
		ra := <-done
		if !ra.Retry || !strings.Contains(ra.Reason, "fenced out") {
			t.Fatalf("worker A's late commit: %+v, want a retry for being fenced out", ra)
		}
		note := h.dailyNote(7)
		if strings.Count(note, "covered t7-1") != 1 || strings.Count(note, "covered t7-2") != 1 {
			t.Fatalf("daily note:\n%s", note)
		}
		// A's redelivery finds its conversation covered and writes nothing.
		before := h.snapshot()
		again := a.Handle(context.Background(), Job{EventID: "e7-1", AgentID: 7, ConversationID: "c1",
			Event: completed(7, "c1", "e7-1", 4), Delivery: Delivery{Attempt: 2}})
		if again.Status != store.RunCompleted || !again.Covered || h.snapshot() != before {
			t.Fatalf("redelivery: %+v", again)
		}
	})
}

// The other order: the old holder's commit lands first, after the new holder read the
// same messages. The new holder's batch overlaps what was just applied; its watermark check
// fails in the same transaction, and its retry extracts only the newer messages.
func TestOverlappingBatchCannotCommitTwice(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		fake := llmtest.New(t, echoLLM)
		h := newHarness(t, db, withLLM(fake), withSettings(longLease))
		h.conversation(8, "c1", "t8-1", 4)
		a, b := h.service("A"), h.service("B")
		aAt, aGo := make(chan struct{}), make(chan struct{})
		a.hookBeforeCommit = func() error { close(aAt); <-aGo; return nil }
		bAt, bGo := make(chan struct{}), make(chan struct{})
		var bFirst = true
		b.hookBeforeCommit = func() error {
			if bFirst {
				bFirst = false
				close(bAt)
				<-bGo
			}
			return nil
		}
		aDone, bDone := make(chan Result, 1), make(chan Result, 1)
		go func() { aDone <- a.Handle(context.Background(), JobFromEvent(completed(8, "c1", "e8-1", 4))) }()
		<-aAt
		h.loseLease(8)
		h.conversation(8, "c1", "t8-2", 2)
		go func() { bDone <- b.Handle(context.Background(), JobFromEvent(completed(8, "c1", "e8-2", 6))) }()
		<-bAt
		close(aGo)
		if ra := <-aDone; ra.Status != store.RunCompleted {
			t.Fatalf("worker A: %+v", ra)
		}
		close(bGo)
		rb := <-bDone
		if !rb.Retry || !strings.Contains(rb.Reason, "extracted meanwhile") {
			t.Fatalf("worker B's overlapping batch: %+v, want a retry", rb)
		}
		rb = b.Handle(context.Background(), Job{EventID: "e8-2", AgentID: 8, ConversationID: "c1",
			Event: completed(8, "c1", "e8-2", 6), Delivery: Delivery{Attempt: 2}})
		if rb.Status != store.RunCompleted || !rb.Covered {
			t.Fatalf("worker B's retry: %+v", rb)
		}
		note := h.dailyNote(8)
		if strings.Count(note, "covered t8-1") != 1 || strings.Count(note, "covered t8-2") != 1 {
			t.Fatalf("daily note:\n%s", note)
		}
	})
}
