package summarizer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/eventpub"
	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// TestStreamLimitsAndBucketTTLs: MATE_EVENTS takes the configured byte and message limits
// and, when full, refuses new events instead of discarding unprocessed ones; the lease
// bucket (which keeps each agent's cooldown) and the intent bucket expire their keys after a
// TTL that outlives every cooldown and every recovery.
func TestStreamLimitsAndBucketTTLs(t *testing.T) {
	h := newHarness(t, storetest.SQLite(t), withSettings(func(s *Settings) {
		s.MaxMsgs, s.MaxBytes = 3, 1<<20
		s.Memory.CooldownMinutes = 5
		s.MaxAge = 14 * 24 * time.Hour
	}))
	h.service("w1") // creates the lease bucket
	ctx := context.Background()
	st, err := h.js.Stream(ctx, bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := info.Config; c.MaxMsgs != 3 || c.MaxBytes != 1<<20 || c.Discard != jetstream.DiscardNew {
		t.Fatalf("stream limits %d msgs, %d bytes, discard %v", c.MaxMsgs, c.MaxBytes, c.Discard)
	}
	for i := 0; i < 3; i++ {
		h.publish(completed(1, "c", fmt.Sprintf("e-%d", i), 4))
	}
	if _, err := h.pub.PublishCompleted(ctx, completed(1, "c", "e-full", 4)); !errors.Is(err, eventpub.ErrUnavailable) {
		t.Fatalf("publish on a full stream: %v; want it refused", err)
	}
	if m, err := st.GetMsg(ctx, 1); err != nil || m == nil {
		t.Fatalf("the oldest event was discarded: %v", err)
	}

	for _, c := range []struct {
		bucket string
		want   time.Duration
	}{{bus.BucketLease, lease.DefaultRetention}} {
		kv, err := h.js.KeyValue(ctx, c.bucket)
		if err != nil {
			t.Fatal(err)
		}
		s, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.TTL() != c.want {
			t.Errorf("%s TTL %s, want %s", c.bucket, s.TTL(), c.want)
		}
	}
	if lease.DefaultRetention <= h.set.Memory.CooldownMinutes.Duration() {
		t.Fatal("a TTL is shorter than what it must outlive")
	}
}
