package lease_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/lease"
)

// scanBucket is a lease bucket holding records for agents 1..n.
func scanBucket(tb testing.TB, n int) (*lease.Manager, jetstream.KeyValue) {
	tb.Helper()
	ms, js := managers(tb, time.Minute, "scan")
	m := ms[0]
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, "lease_test")
	if err != nil {
		tb.Fatal(err)
	}
	for id := int64(1); id <= int64(n); id++ {
		if _, err := m.Update(ctx, id, lease.State{}, func(r *lease.Record) {
			r.Coalesced = []lease.Coalesced{{EventID: "e" + strconv.FormatInt(id, 10), ConversationID: "c"}}
		}); err != nil {
			tb.Fatal(err)
		}
	}
	return m, kv
}

// Scan sees every agent's record once, as written, skips keys that are not an agent's, and
// ends at once on an empty bucket.
func TestScan(t *testing.T) {
	empty, _ := scanBucket(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := empty.Scan(ctx, func(int64, lease.State) { t.Error("a record in an empty bucket") }); err != nil {
		t.Fatalf("empty bucket: %v", err)
	}

	m, kv := scanBucket(t, 50)
	if _, err := kv.Put(ctx, "0", []byte(`{"v":2}`)); err != nil { // the scheduler's leader key
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "not-an-agent", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "50"); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	if err := m.Scan(ctx, func(id int64, st lease.State) {
		seen[id]++
		if len(st.Coalesced) != 1 || st.Coalesced[0].EventID != "e"+strconv.FormatInt(id, 10) || st.Revision == 0 {
			t.Errorf("agent %d: %+v", id, st)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 49 {
		t.Fatalf("saw %d agents, want 49 (1..49; 50 deleted)", len(seen))
	}
	for id, n := range seen {
		if id < 1 || id > 49 || n != 1 {
			t.Fatalf("agent %d seen %d times", id, n)
		}
	}
}

// BenchmarkScan: one pass over 2,000 records with Scan (current) against a Get per key
// (baseline), in the same run.
func BenchmarkScan(b *testing.B) {
	const n = 2000
	m, kv := scanBucket(b, n)
	ctx := context.Background()
	b.Run("baseline-get-per-key", func(b *testing.B) {
		for b.Loop() {
			for id := int64(1); id <= n; id++ {
				if _, err := kv.Get(ctx, strconv.FormatInt(id, 10)); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("current-scan", func(b *testing.B) {
		for b.Loop() {
			k := 0
			if err := m.Scan(ctx, func(int64, lease.State) { k++ }); err != nil || k != n {
				b.Fatalf("scan: %d records, %v", k, err)
			}
		}
	})
}
