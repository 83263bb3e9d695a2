// Package lease is the per-agent lease in NATS KV that keeps two workers (summarizers, the
// emergence worker) from working on one agent at once, across processes and machines.
//
// A lease is a key created with Create (fails while held), renewed with a revision-checked
// Update before the bucket TTL runs out, and released with a revision-checked Delete. A
// holder that cannot renew loses the lease: its context is cancelled and it must write
// nothing. The revision is the fencing token.
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

	"github.com/matememory/matememory/pkg/bus"
)

// ErrHeld is returned by Acquire when another holder has the lease.
var ErrHeld = errors.New("lease held by another worker")

// ErrLost is the cause of a lease context cancelled because renewal failed.
var ErrLost = errors.New("lease lost")

// Manager acquires leases in one bucket.
type Manager struct {
	kv    jetstream.KeyValue
	ttl   time.Duration
	owner string
	// epoch is the bucket's creation time: revisions restart in a recreated bucket.
	epoch int64
}

// Holder describes who holds a lease.
type Holder struct {
	Owner    string    `json:"owner"`
	Purpose  string    `json:"purpose"`
	Acquired time.Time `json:"acquired"`
}

// Bucket creates (or updates) the lease bucket with TTL ttl and returns a manager for owner
// (a worker identity, logged and stored in the key).
func Bucket(ctx context.Context, js jetstream.JetStream, bucket string, ttl time.Duration, replicas int, owner string, opts ...BucketOption) (*Manager, error) {
	cfg := jetstream.KeyValueConfig{
		Bucket: bucket, TTL: ttl, History: 1, Replicas: replicas, Storage: jetstream.FileStorage,
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
	return &Manager{kv: kv, ttl: ttl, owner: owner, epoch: epoch}, nil
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
}

// Acquire takes the lease on agentID for purpose, or returns ErrHeld (wrapped with the
// holder). The returned lease renews itself until Release; its Context is cancelled with
// ErrLost if renewal fails.
func (m *Manager) Acquire(ctx context.Context, agentID int64, purpose string) (*Lease, error) {
	key := strconv.FormatInt(agentID, 10)
	val, _ := json.Marshal(Holder{Owner: m.owner, Purpose: purpose, Acquired: time.Now().UTC()})
	rev, err := m.kv.Create(ctx, key, val)
	if err != nil {
		if contended(err) {
			h, _ := m.Holder(ctx, agentID)
			return nil, fmt.Errorf("%w: agent %d by %s (%s)", ErrHeld, agentID, h.Owner, h.Purpose)
		}
		return nil, fmt.Errorf("acquire lease on agent %d: %w", agentID, err)
	}
	lctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	l := &Lease{m: m, key: key, ctx: lctx, cancel: cancel, done: make(chan struct{}), rev: rev}
	go l.renew(val)
	return l, nil
}

// contended reports whether a revision-checked write lost to another writer: ErrKeyExists,
// or the raw "wrong last sequence" error that Create returns when the key's last entry is
// a delete marker and another worker wrote first (10071, or 10164 on replicated buckets).
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
	var h Holder
	e, err := m.kv.Get(ctx, strconv.FormatInt(agentID, 10))
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return h, nil
		}
		return h, err
	}
	_ = json.Unmarshal(e.Value(), &h)
	return h, nil
}

func (l *Lease) renew(val []byte) {
	defer close(l.done)
	ttl := l.m.ttl
	lastOK := time.Now()
	wait := ttl / 3
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-time.After(wait):
		}
		l.mu.Lock()
		rev := l.rev
		l.mu.Unlock()
		// The key lives until lastOK+ttl; stop trying a little before that so that a holder
		// never believes it holds a key that has already expired.
		left := ttl - time.Since(lastOK) - ttl/10
		if left <= 0 {
			l.cancel(fmt.Errorf("%w: could not renew the lease on agent %s within its TTL", ErrLost, l.key))
			return
		}
		ctx, cancel := context.WithTimeout(l.ctx, min(left, ttl/3))
		next, err := l.m.kv.Update(ctx, l.key, val, rev)
		cancel()
		if err != nil {
			if l.ctx.Err() != nil {
				return
			}
			if contended(err) || errors.Is(err, jetstream.ErrKeyNotFound) {
				// Someone else holds the key now (ours expired or was deleted): fenced out.
				l.cancel(fmt.Errorf("%w: renew lease on agent %s: %v", ErrLost, l.key, err))
				return
			}
			// A transient failure (leader election, slow disk): retry soon, within the TTL.
			wait = min(250*time.Millisecond, ttl/10)
			continue
		}
		lastOK = time.Now()
		wait = ttl / 3
		l.mu.Lock()
		l.rev = next
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

// Release stops renewal and deletes the key if this lease still holds it.
func (l *Lease) Release(ctx context.Context) error {
	lost := l.Lost()
	l.cancel(errors.New("lease released"))
	<-l.done
	if lost {
		return nil
	}
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	if err := l.m.kv.Delete(ctx, l.key, jetstream.LastRevision(rev)); err != nil {
		return fmt.Errorf("release lease on agent %s: %w", l.key, err)
	}
	return nil
}
