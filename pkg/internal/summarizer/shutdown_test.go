package summarizer

import (
	"context"
	"errors"
	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/nats-io/nats.go/jetstream"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// A worker told to stop (SIGTERM) right before committing an extraction still commits it
// under its lease instead of throwing the model's answer away: the daily entry is appended,
// the watermarks move, and the run is recorded as the completed extraction that changed the
// daily note.
func TestStopBeforeCommitFinishesTheExtraction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		fake := llmtest.New(t, echoLLM)
		h := newHarness(t, db, withLLM(fake))
		h.conversation(6, "c1", "t6-1", 4)
		svc := h.service("w1")
		stopping := make(chan *Worker, 1)
		svc.hookBeforeCommit = func() error {
			w := <-stopping
			w.cancel() // what Stop does first; Stop itself waits for this very call
			return nil
		}
		stopping <- h.worker(svc)
		h.publish(completed(6, "c1", "e-stop", 4))
		poll.Until(t, 20*time.Second, "the run recorded", func() bool { return len(h.runs("e-stop")) > 0 })
		runs := h.runs("e-stop")
		r := runs[len(runs)-1]
		if r.Status != store.RunCompleted || !slices.ContainsFunc(r.FilesChanged, func(f string) bool { return strings.HasPrefix(f, "memory/") }) {
			t.Fatalf("the interrupted run is recorded as %s %v: %s", r.Status, r.FilesChanged, r.Reason)
		}
		if _, err := h.js.KeyValue(context.Background(), bus.BucketIntent); !errors.Is(err, jetstream.ErrBucketNotFound) {
			t.Fatalf("the intent bucket of older versions is there (%v): nothing is to be kept in KV across the commit", err)
		}
		var wm store.ExtractionWatermark
		if err := h.db.DB.Where("agent_id = ? AND conversation_id = ?", 6, "c1").First(&wm).Error; err != nil || wm.LastMessageID == 0 {
			t.Fatalf("watermark not moved: %+v %v", wm, err)
		}
	})
}
