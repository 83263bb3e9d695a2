// Package lease is the per-agent lease in NATS KV that keeps two workers (summarizers, the
// emergence worker) from working on one agent at once, across processes and machines.
//
// Each agent has one record (one key) that is only ever rewritten by compare-and-swap on
// its revision, never deleted: who holds the lease and until when, and what the holders
// keep about the agent between leases (the summarizer's cooldown). Taking the lease is one
// read and one revision-checked write; releasing it is one revision-checked write that
// clears the holder (and may set a cooldown); a holder renews with a revision-checked
// write before its expiry. A holder that cannot renew loses the lease: its context is
// cancelled and it must write nothing. The revision is the fencing token (pkg/internal/fence).
//
// Expiry is the time written in the record (the holder's clock plus the TTL), judged on
// the reader's clock: clocks of the workers must agree to well within the TTL (NTP). A
// reader whose clock runs ahead may take a lease early; the database's fencing (pkg/internal/fence)
// and the watermarks' compare-and-swap then refuse the older holder's writes, so a skewed
// clock costs a repeated extraction, never a double effect.
package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
)

// ErrHeld is returned by Acquire when another holder has the lease.
var ErrHeld = errors.New("lease held by another worker")

// ErrLost is the cause of a lease context cancelled because renewal failed.
var ErrLost = errors.New("lease lost")

// DefaultRetention is how long a record nobody rewrites is kept (the bucket's TTL): longer
// than any lease, and than the cooldowns kept in it. A record that ages out is recreated
// on the next lease; it only ever shortens a cooldown.
const DefaultRetention = 24 * time.Hour

// recordVersion is the format version this package writes into every record (`v`). The
// rule for a later format (docs/operations.md, "Upgrade with a rolling update"): a version
// reads every record its predecessor writes; fields are only added, and a reader ignores
// those it does not know (an older writer drops them and writes its own, lower `v`, which
// tells a newer reader they are absent); a record a version must not rewrite carries
// `min`, the oldest version allowed to, and older versions leave it alone.
const recordVersion = 2

// versionedSince is the first version that wrote `v`: a record below it was written by a
// version that took leases with Create and released them with Delete. It stays 2 when
// recordVersion moves on: a later version reads version-2 records as current ones.
const versionedSince = 2

// Manager acquires leases in one bucket.
type Manager struct {
	kv    jetstream.KeyValue
	ttl   time.Duration
	owner string
	// epoch is the bucket's creation time: revisions restart in a recreated bucket.
	epoch int64
	now   func() time.Time
}

// Holder describes who holds a lease.
type Holder struct {
	Owner    string    `json:"owner"`
	Purpose  string    `json:"purpose"`
	Acquired time.Time `json:"acquired"`
}

// Record is an agent's one record in the bucket.
type Record struct {
	V        int       `json:"v"`
	Owner    string    `json:"owner,omitempty"`
	Purpose  string    `json:"purpose,omitempty"`
	Acquired time.Time `json:"acquired,omitzero"`
	// Expires is when the holder's lease ends unless renewed (zero when free).
	Expires time.Time `json:"expires,omitzero"`
	// CooldownUntil is when the agent's next LLM extraction may start, and CooldownRun the
	// run that set it (pkg/internal/summarizer).
	CooldownUntil time.Time `json:"cooldownUntil,omitzero"`
	CooldownRun   string    `json:"cooldownRun,omitempty"`
	// Waiter is the one delivery (an event id) waiting for the cooldown to end, expected
	// back by WaiterUntil; Coalesced are the events acknowledged meanwhile, whose
	// conversations the next complete extraction of the agent covers (pkg/internal/summarizer).
	Waiter      string      `json:"waiter,omitempty"`
	WaiterUntil time.Time   `json:"waiterUntil,omitzero"`
	Coalesced   []Coalesced `json:"coalesced,omitempty"`
	// Min is the oldest record version allowed to rewrite the record (0: any). A version
	// below it leaves the record alone: it reads the lease as held and neither takes nor
	// updates it. This version never sets it; it is the way out for a later format that
	// an older writer would corrupt.
	Min int `json:"min,omitempty"`
}

// Coalesced is an event acknowledged into the agent's next extraction.
type Coalesced struct {
	EventID        string `json:"e"`
	ConversationID string `json:"c"`
}

// State is an agent's record as read, with the revision a lease is taken from.
type State struct {
	Record
	// Revision is the record's revision (0: no record).
	Revision uint64
	// Legacy is true for a record an older version wrote, or no record at all: such an agent
	// may have state an older version kept elsewhere (the summarizer's intents).
	Legacy bool
}

// Held reports whether a holder's lease is running at now, or the record is one a newer
// version wrote for itself only (Min above this version's), which this version leaves alone.
func (s State) Held(now time.Time) bool {
	return s.newer() || (s.Owner != "" && now.Before(s.Expires))
}

// newer reports whether the record is one this version must not rewrite.
func (s State) newer() bool { return s.Min > recordVersion }

// Holder is who holds the lease at now (zero when free).
func (s State) Holder(now time.Time) Holder {
	if !s.Held(now) {
		return Holder{}
	}
	if s.Owner == "" || !now.Before(s.Expires) {
		// Left alone for a newer version (newer), nobody's lease running.
		return Holder{Owner: fmt.Sprintf("(a record for version %d and later)", s.Min)}
	}
	return Holder{Owner: s.Owner, Purpose: s.Purpose, Acquired: s.Acquired}
}

// Bucket creates (or updates) the lease bucket and returns a manager for owner (a worker
// identity, logged and stored in the record) whose leases last ttl between renewals.
func Bucket(ctx context.Context, js jetstream.JetStream, bucket string, ttl time.Duration, replicas int, owner string, opts ...BucketOption) (*Manager, error) {
	cfg := jetstream.KeyValueConfig{
		Bucket: bucket, TTL: max(ttl, DefaultRetention), History: 1, Replicas: replicas, Storage: jetstream.FileStorage,
		Description: "MateMemory per-agent leases",
	}
	for _, o := range opts {
		o(&cfg)
	}
	kv, err := bus.EnsureKeyValue(ctx, js, cfg)
	if err != nil {
		return nil, fmt.Errorf("lease bucket %s: %w", bucket, err)
	}
	st, err := bus.Retry(ctx, "read lease bucket "+bucket, kv.Status)
	if err != nil {
		return nil, err
	}
	var epoch int64
	if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok && bs.StreamInfo() != nil {
		epoch = bs.StreamInfo().Created.UnixNano()
	}
	return &Manager{kv: kv, ttl: ttl, owner: owner, epoch: epoch, now: time.Now}, nil
}

// BucketOption adjusts the lease bucket's configuration.
type BucketOption func(*jetstream.KeyValueConfig)

// WithDescription describes the bucket (a bucket of other leases than the per-agent ones,
// such as the scheduler's leader lease).
func WithDescription(d string) BucketOption {
	return func(c *jetstream.KeyValueConfig) { c.Description = d }
}

// Lease is a held lease.
type Lease struct {
	m      *Manager
	key    string
	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}

	mu  sync.Mutex
	rev uint64
	rec Record
}

// Read returns agentID's record (a zero State when it has none).
func (m *Manager) Read(ctx context.Context, agentID int64) (State, error) {
	e, err := m.kv.Get(ctx, strconv.FormatInt(agentID, 10))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return State{Legacy: true}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("read lease record of agent %d: %w", agentID, err)
	}
	return m.state(e), nil
}

// state decodes a record as read.
func (m *Manager) state(e jetstream.KeyValueEntry) State {
	st := State{Revision: e.Revision()}
	if err := json.Unmarshal(e.Value(), &st.Record); err != nil {
		// Unreadable: treated as a holder's until it would have expired.
		st.Record = Record{Owner: "unknown"}
	}
	if st.V < versionedSince {
		// An older version's lease: held from its last write until the TTL ran out.
		st.Legacy = true
		if st.Owner != "" {
			st.Expires = e.Created().Add(m.ttl)
		}
	}
	return st
}

// Scan calls fn with every agent's record, as the bucket holds them now (one pass over the
// bucket's current values, not a read per key).
func (m *Manager) Scan(ctx context.Context, fn func(agentID int64, st State)) error {
	w, err := m.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("scan lease records: %w", err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("scan lease records: the watch ended early")
			}
			if e == nil {
				return nil // the current values are all delivered
			}
			id, err := strconv.ParseInt(e.Key(), 10, 64)
			if err != nil || id <= 0 {
				continue // not an agent's record (the scheduler's leader key is 0)
			}
			fn(id, m.state(e))
		}
	}
}

// Acquire takes the lease on agentID for purpose, or returns ErrHeld (wrapped with the
// holder). The returned lease renews itself until Release; its Context is cancelled with
// ErrLost if renewal fails.
func (m *Manager) Acquire(ctx context.Context, agentID int64, purpose string) (*Lease, error) {
	st, err := m.Read(ctx, agentID)
	if err != nil {
		return nil, fmt.Errorf("acquire lease on agent %d: %w", agentID, err)
	}
	return m.AcquireFrom(ctx, agentID, purpose, st)
}

// AcquireFrom takes the lease on agentID from st, a State read earlier: the write succeeds
// only if the record is still at st's revision, so a caller that decided on what st holds
// (a cooldown) knows it still held when the lease was taken.
func (m *Manager) AcquireFrom(ctx context.Context, agentID int64, purpose string, st State) (*Lease, error) {
	now := m.now()
	if st.newer() {
		return nil, fmt.Errorf("%w: agent %d's record is for version %d and later (this is version %d)", ErrHeld, agentID, st.Min, recordVersion)
	}
	if st.Held(now) {
		return nil, fmt.Errorf("%w: agent %d by %s (%s)", ErrHeld, agentID, st.Owner, st.Purpose)
	}
	rec := st.Record
	rec.V, rec.Owner, rec.Purpose = recordVersion, m.owner, purpose
	rec.Acquired, rec.Expires = now.UTC(), now.Add(m.ttl).UTC()
	key := strconv.FormatInt(agentID, 10)
	rev, err := m.swap(ctx, key, rec, st.Revision)
	if err != nil {
		if contended(err) {
			return nil, fmt.Errorf("%w: agent %d (taken by another worker just now)", ErrHeld, agentID)
		}
		return nil, fmt.Errorf("acquire lease on agent %d: %w", agentID, err)
	}
	lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	l := &Lease{m: m, key: key, ctx: lctx, cancel: cancel, done: make(chan struct{}), rev: rev, rec: rec}
	go l.renew(now)
	return l, nil
}

// ErrChanged is returned by Update when the record changed since it was read (or its lease
// is held): read it again.
var ErrChanged = errors.New("the agent's record changed since it was read")

// Update rewrites agentID's record from st with edit, by compare-and-swap on st's revision,
// while nobody holds its lease (a holder's renewal and release rely on its revision).
func (m *Manager) Update(ctx context.Context, agentID int64, st State, edit func(*Record)) (State, error) {
	if st.newer() {
		return st, fmt.Errorf("%w: agent %d's record is for version %d and later", ErrChanged, agentID, st.Min)
	}
	if st.Held(m.now()) {
		return st, fmt.Errorf("%w: agent %d's lease is held by %s", ErrChanged, agentID, st.Owner)
	}
	// The version stays what it was: a record an older version wrote still sends the next
	// holder to the older version's leftovers.
	rec := st.Record
	edit(&rec)
	rev, err := m.swap(ctx, strconv.FormatInt(agentID, 10), rec, st.Revision)
	if err != nil {
		if contended(err) {
			return st, fmt.Errorf("%w (agent %d)", ErrChanged, agentID)
		}
		return st, fmt.Errorf("update record of agent %d: %w", agentID, err)
	}
	return State{Record: rec, Revision: rev, Legacy: st.Legacy}, nil
}

// swap writes rec by compare-and-swap on revision (0: the record must not exist yet).
func (m *Manager) swap(ctx context.Context, key string, rec Record, revision uint64) (uint64, error) {
	val, _ := json.Marshal(rec)
	if revision == 0 {
		return m.kv.Create(ctx, key, val)
	}
	return m.kv.Update(ctx, key, val, revision)
}

// contended reports whether a revision-checked write lost to another writer: ErrKeyExists,
// or the raw "wrong last sequence" error (10071, or 10164 on replicated buckets).
func contended(err error) bool {
	if errors.Is(err, jetstream.ErrKeyExists) {
		return true
	}
	var api *jetstream.APIError
	return errors.As(err, &api) &&
		(api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Holder reads who holds the lease on agentID (zero Holder when free).
func (m *Manager) Holder(ctx context.Context, agentID int64) (Holder, error) {
	st, err := m.Read(ctx, agentID)
	if err != nil {
		return Holder{}, err
	}
	return st.Holder(m.now()), nil
}

func (l *Lease) renew(lastOK time.Time) {
	defer close(l.done)
	ttl := l.m.ttl
	wait := ttl / 3
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-time.After(wait):
		}
		// The record says the lease ends at lastOK+ttl; stop trying a little before that so
		// that a holder never believes it holds a lease another worker may take.
		left := ttl - time.Since(lastOK) - ttl/10
		if left <= 0 {
			l.cancel(fmt.Errorf("%w: could not renew the lease on agent %s within its TTL", ErrLost, l.key))
			return
		}
		now := l.m.now()
		l.mu.Lock()
		rev, rec := l.rev, l.rec
		l.mu.Unlock()
		rec.Expires = now.Add(ttl).UTC()
		val, _ := json.Marshal(rec)
		ctx, cancel := context.WithTimeout(l.ctx, min(left, ttl/3))
		next, err := l.m.kv.Update(ctx, l.key, val, rev)
		cancel()
		if err != nil {
			if l.ctx.Err() != nil {
				return
			}
			if contended(err) || errors.Is(err, jetstream.ErrKeyNotFound) {
				// Someone else wrote the record (ours expired and was taken): fenced out.
				l.cancel(fmt.Errorf("%w: renew lease on agent %s: %v", ErrLost, l.key, err))
				return
			}
			// A transient failure (leader election, slow disk): retry soon, within the TTL.
			wait = min(250*time.Millisecond, ttl/10)
			continue
		}
		lastOK = now
		wait = ttl / 3
		l.mu.Lock()
		l.rev, l.rec = next, rec
		l.mu.Unlock()
	}
}

// Context is cancelled when the lease is lost or released.
func (l *Lease) Context() context.Context { return l.ctx }

// Lost reports whether the lease was lost (renewal failed).
func (l *Lease) Lost() bool { return errors.Is(context.Cause(l.ctx), ErrLost) }

// Err is nil while the lease is held, ErrLost (wrapped) once lost.
func (l *Lease) Err() error {
	if l.Lost() {
		return context.Cause(l.ctx)
	}
	return nil
}

// Revision is the current fencing token.
func (l *Lease) Revision() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev
}

// Epoch is the lease bucket's creation time (Unix nanoseconds): with Revision it orders
// holders across a recreated bucket, whose revisions start again at 1.
func (l *Lease) Epoch() int64 { return l.m.epoch }

// Record is the agent's record as this holder last wrote it.
func (l *Lease) Record() Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rec
}

// Release stops renewal and, if this lease still holds the record, rewrites it free, with
// edit applied (a cooldown to keep, say): one revision-checked write, no delete marker.
func (l *Lease) Release(ctx context.Context, edit ...func(*Record)) error {
	lost := l.Lost()
	l.cancel(errors.New("lease released"))
	<-l.done
	if lost {
		return nil
	}
	l.mu.Lock()
	rev, rec := l.rev, l.rec
	l.mu.Unlock()
	rec.Owner, rec.Purpose, rec.Acquired, rec.Expires = "", "", time.Time{}, time.Time{}
	for _, e := range edit {
		e(&rec)
	}
	val, _ := json.Marshal(rec)
	if _, err := l.m.kv.Update(ctx, l.key, val, rev); err != nil {
		return fmt.Errorf("release lease on agent %s: %w", l.key, err)
	}
	return nil
}
