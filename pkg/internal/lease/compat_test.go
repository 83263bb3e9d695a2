package lease_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/lease"
)

// Records of other versions in one bucket (a rolling update): a later version's record with
// fields this one does not know is read and taken like its own, a record that names a
// newer minimum version is left alone, and an older version's record is legacy.
func TestLeaseRecordsOfOtherVersions(t *testing.T) {
	ms, js := managers(t, 2*time.Second, "w1")
	m := ms[0]
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, "lease_test")
	if err != nil {
		t.Fatal(err)
	}
	put := func(key string, rec map[string]any) {
		t.Helper()
		b, _ := json.Marshal(rec)
		if _, err := kv.Put(ctx, key, b); err != nil {
			t.Fatal(err)
		}
	}
	future := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	past := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)

	// A later, additive version: its cooldown is kept, its lease judged by its expiry, its
	// unknown field ignored; once free it is taken and written back as this version's.
	put("1", map[string]any{"v": 3, "owner": "next", "purpose": "summarize", "expires": future,
		"cooldownUntil": future, "cooldownRun": "run-3", "somethingNew": map[string]int{"x": 1}})
	st, err := m.Read(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.Legacy || !st.Held(time.Now()) || st.Owner != "next" || !st.CooldownUntil.Equal(future) {
		t.Fatalf("a later version's held record read as %+v", st)
	}
	if _, err := m.AcquireFrom(ctx, 1, "emergence", st); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("acquire a later version's running lease: %v, want ErrHeld", err)
	}
	put("1", map[string]any{"v": 3, "owner": "next", "expires": past, "cooldownUntil": future, "cooldownRun": "run-3", "somethingNew": 1})
	l, err := m.Acquire(ctx, 1, "emergence")
	if err != nil {
		t.Fatalf("acquire a later version's expired lease: %v", err)
	}
	if r := l.Record(); r.V != 2 || !r.CooldownUntil.Equal(future) || r.CooldownRun != "run-3" {
		t.Fatalf("taken from a later version's record: %+v, want version 2 with its cooldown", r)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A record for version 3 and later only: held for this version, whoever holds it, and
	// neither taken nor updated; its bytes stay as the newer version wrote them.
	put("2", map[string]any{"v": 3, "min": 3, "cooldownRun": "run-3"})
	before, _ := kv.Get(ctx, "2")
	st, err = m.Read(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Held(time.Now()) || st.Holder(time.Now()).Owner == "" {
		t.Fatalf("a min-3 record read as free: %+v, holder %+v", st, st.Holder(time.Now()))
	}
	if _, err := m.AcquireFrom(ctx, 2, "summarize", st); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("acquire a min-3 record: %v, want ErrHeld", err)
	}
	if _, err := m.Update(ctx, 2, st, func(r *lease.Record) { r.CooldownRun = "mine" }); !errors.Is(err, lease.ErrChanged) {
		t.Fatalf("update a min-3 record: %v, want ErrChanged", err)
	}
	after, _ := kv.Get(ctx, "2")
	if after.Revision() != before.Revision() {
		t.Fatal("the min-3 record was rewritten")
	}

	// A record for version 2 and later: this is version 2, so it is free, taken and
	// updated like any other, and it keeps its minimum.
	put("4", map[string]any{"v": 2, "min": 2, "cooldownRun": "run-2"})
	st, err = m.Read(ctx, 4)
	if err != nil {
		t.Fatal(err)
	}
	if st.Held(time.Now()) || st.Holder(time.Now()).Owner != "" {
		t.Fatalf("a min-2 record read as held by version 2: %+v, holder %+v", st, st.Holder(time.Now()))
	}
	if st, err = m.Update(ctx, 4, st, func(r *lease.Record) { r.CooldownRun = "run-4" }); err != nil {
		t.Fatalf("version 2 updates a min-2 record: %v", err)
	}
	l, err = m.AcquireFrom(ctx, 4, "summarize", st)
	if err != nil {
		t.Fatalf("version 2 takes a min-2 record: %v", err)
	}
	if r := l.Record(); r.Min != 2 || r.CooldownRun != "run-4" {
		t.Fatalf("taken: %+v; want min 2 and the updated cooldown run", r)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A record of the versions before `v` (Create/Delete leases): legacy, its lease judged
	// by its write time plus the TTL.
	put("3", map[string]any{"owner": "old", "purpose": "summarize"})
	st, err = m.Read(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Legacy || !st.Held(time.Now()) {
		t.Fatalf("a record without v read as %+v, want legacy and held", st)
	}
	// This version's own records are not legacy.
	if st, err := m.Read(ctx, 1); err != nil || st.Legacy || st.V != 2 {
		t.Fatalf("own record read as %+v, %v", st, err)
	}
}
