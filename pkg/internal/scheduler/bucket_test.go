package scheduler_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/scheduler"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// TestLeaderBucketSaysWhatItIs: the scheduler-leader bucket is described as such, not with
// the per-agent lease bucket's description.
func TestLeaderBucketSaysWhatItIs(t *testing.T) {
	f := newFixture(t, storetest.SQLite(t))
	f.start(t, "scheduler-a")
	kv, err := f.js.KeyValue(context.Background(), scheduler.LeaderBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	desc := st.(*jetstream.KeyValueBucketStatus).Config().Description
	if !strings.Contains(desc, "scheduler leader") || strings.Contains(desc, "per-agent") {
		t.Fatalf("leader bucket description %q", desc)
	}
}
