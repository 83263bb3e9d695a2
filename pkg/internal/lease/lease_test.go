package lease_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus/bustest"
	"github.com/matememory/matememory/pkg/internal/lease"
)

func managers(t testing.TB, ttl time.Duration, owners ...string) ([]*lease.Manager, jetstream.JetStream) {
	t.Helper()
	_, d := bustest.Server(t)
	var out []*lease.Manager
	var js0 jetstream.JetStream
	for _, o := range owners {
		nc, err := d.Connect(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		js0 = js
		m, err := lease.Bucket(context.Background(), js, "lease_test", ttl, 1, o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out, js0
}

func TestLeaseIsExclusiveAndReleasable(t *testing.T) {
	ms, _ := managers(t, 2*time.Second, "w1", "w2")
	ctx := context.Background()
	l, err := ms[0].Acquire(ctx, 7, "summarize")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ms[1].Acquire(ctx, 7, "emergence"); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second acquire: got %v, want ErrHeld", err)
	}
	if _, err := ms[1].Acquire(ctx, 8, "emergence"); err != nil {
		t.Fatalf("other agent: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := ms[1].Acquire(ctx, 7, "emergence")
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	_ = l2.Release(ctx)
}

// Renewal keeps a lease past its TTL; a holder that dies (no renewal) frees it after the TTL.
func TestLeaseRenewsAndExpires(t *testing.T) {
	ttl := 3 * time.Second
	ms, js := managers(t, ttl, "w1", "w2")
	ctx := context.Background()
	l, err := ms[0].Acquire(ctx, 1, "long job")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * ttl)
	for time.Now().Before(deadline) {
		if _, err := ms[1].Acquire(ctx, 1, "x"); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("lease not held during renewal: %v", err)
		}
		if l.Lost() {
			t.Fatal("lease lost while renewing")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if l.Revision() == 0 {
		t.Fatal("no fencing revision")
	}
	_ = l.Release(ctx)

	// A crashed holder: the record written once and never renewed frees itself after the
	// TTL, whether this version wrote it (its expiry) or an older one (its write time).
	kv, err := js.KeyValue(ctx, "lease_test")
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range []string{
		`{"v":2,"owner":"crashed","purpose":"x","expires":"` + time.Now().Add(ttl).UTC().Format(time.RFC3339Nano) + `"}`,
		`{"owner":"crashed-older-version"}`,
	} {
		if _, err := kv.Put(ctx, "1", []byte(rec)); err != nil {
			t.Fatal(err)
		}
		written := time.Now()
		if _, err := ms[1].Acquire(ctx, 1, "x"); !errors.Is(err, lease.ErrHeld) {
			t.Fatalf("crashed holder's lease %s not held: %v", rec, err)
		}
		deadline = time.Now().Add(5 * ttl)
		for {
			l2, err := ms[1].Acquire(ctx, 1, "after crash")
			if err == nil {
				if held := time.Since(written); held < ttl-200*time.Millisecond {
					t.Fatalf("lease %s taken after %s, before its TTL %s", rec, held, ttl)
				}
				_ = l2.Release(ctx)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("lease of a crashed holder never expired: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// Taking and releasing a lease is one read and two writes on one record, never a delete
// marker; what a holder keeps in the record at release (a cooldown) survives other holders.
func TestLeaseRecordCostAndCooldown(t *testing.T) {
	ms, js := managers(t, 2*time.Second, "summarizer", "emergence")
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, "lease_test")
	if err != nil {
		t.Fatal(err)
	}
	writes := func() uint64 {
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.(*jetstream.KeyValueBucketStatus).StreamInfo().State.LastSeq
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	for round := 0; round < 3; round++ {
		before := writes()
		l, err := ms[0].Acquire(ctx, 5, "summarize")
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := l.Release(ctx, func(r *lease.Record) { r.CooldownUntil, r.CooldownRun = until, "run-1" }); err != nil {
			t.Fatal(err)
		}
		if n := writes() - before; n != 2 {
			t.Fatalf("round %d: %d KV writes to take and release a lease, want 2", round, n)
		}
		e, err := kv.Get(ctx, "5")
		if err != nil || e.Operation() != jetstream.KeyValuePut {
			t.Fatalf("round %d: record %v, %v; want a put, never a delete marker", round, e, err)
		}
		// Another holder (the emergence worker) keeps the cooldown it found.
		l2, err := ms[1].Acquire(ctx, 5, "emergence")
		if err != nil {
			t.Fatal(err)
		}
		if err := l2.Release(ctx); err != nil {
			t.Fatal(err)
		}
		st, err := ms[0].Read(ctx, 5)
		if err != nil {
			t.Fatal(err)
		}
		if !st.CooldownUntil.Equal(until) || st.CooldownRun != "run-1" || st.Held(time.Now()) || st.Legacy {
			t.Fatalf("round %d: record after two leases %+v, want the cooldown kept and free", round, st)
		}
	}
	// A lease taken from a state read before another holder's write is refused.
	st, err := ms[0].Read(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ms[1].Acquire(ctx, 5, "emergence")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ms[0].AcquireFrom(ctx, 5, "summarize", st); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("acquire from a stale state: %v, want ErrHeld", err)
	}
	_ = l.Release(ctx)
}

// Under contention at most one of many workers holds an agent's lease at any moment.
func TestLeaseMutualExclusionUnderContention(t *testing.T) {
	ms, _ := managers(t, 2*time.Second, "a", "b", "c", "d")
	var holders, maxHolders, done atomic.Int64
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func(m *lease.Manager) {
			defer wg.Done()
			for done.Load() < 40 {
				l, err := m.Acquire(context.Background(), 42, "x")
				if err != nil {
					continue
				}
				n := holders.Add(1)
				for {
					cur := maxHolders.Load()
					if n <= cur || maxHolders.CompareAndSwap(cur, n) {
						break
					}
				}
				time.Sleep(time.Millisecond)
				holders.Add(-1)
				done.Add(1)
				_ = l.Release(context.Background())
			}
		}(m)
	}
	wg.Wait()
	if maxHolders.Load() != 1 {
		t.Fatalf("max concurrent holders %d, want 1", maxHolders.Load())
	}
}

// A lease whose key is taken over (expired and re-acquired elsewhere) is reported lost.
func TestLeaseLostWhenKeyReplaced(t *testing.T) {
	ms, js := managers(t, 900*time.Millisecond, "w1")
	ctx := context.Background()
	l, err := ms[0].Acquire(ctx, 3, "x")
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "lease_test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "3", []byte(`{"owner":"intruder"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("lease context not cancelled after the key was replaced")
	}
	if !l.Lost() || !errors.Is(l.Err(), lease.ErrLost) {
		t.Fatalf("Lost()=%v Err()=%v", l.Lost(), l.Err())
	}
}

// Issue 9 point 16: on a replicated bucket, workers racing to take a lease that was just
// released get ErrHeld when they lose, never the raw
// "wrong last sequence" error (10164) that would be handled as a failure.
func TestContentionAfterReleaseIsHeldOnR3(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	c := bustest.StartCluster(t, 3)
	var ms []*lease.Manager
	for i := 0; i < 4; i++ {
		nc, err := c.Dialer().Connect("lease-r3")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		m, err := lease.Bucket(context.Background(), js, "lease_r3", 10*time.Second, 3, "w")
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	ctx := context.Background()
	for round := 0; round < 25; round++ {
		var wg sync.WaitGroup
		var won []*lease.Lease
		var mu sync.Mutex
		for _, m := range ms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := m.Acquire(ctx, 1, "summarize")
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won = append(won, l)
				case !errors.Is(err, lease.ErrHeld):
					t.Errorf("round %d: losing acquire: %v, want ErrHeld", round, err)
				}
			}()
		}
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("round %d: %d winners", round, len(won))
		}
		if err := won[0].Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
