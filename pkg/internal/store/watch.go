package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
)

// DefaultStatementTimeout is the deadline a SQL statement gets when its context has none,
// so that no call waits forever on a stalled connection.
const DefaultStatementTimeout = 30 * time.Second

// StallReadiness is how long a statement may be in flight before readiness reports the
// process stuck on the database.
const StallReadiness = 15 * time.Second

// Watch gives every gorm statement without a deadline one (timeout), and keeps track of the
// statements in flight, so readiness can report a process stuck on the database (a ping on
// a fresh connection answers while the pooled ones are frozen).
type Watch struct {
	timeout time.Duration
	next    atomic.Uint64

	mu       sync.Mutex
	inflight map[uint64]time.Time
}

const watchKey = "matememory:watch"

// NewWatch returns a watch giving statements without a deadline timeout (<= 0: none; they
// are still tracked). Install it with db.Use; Open does.
func NewWatch(timeout time.Duration) *Watch {
	return &Watch{timeout: timeout, inflight: map[uint64]time.Time{}}
}

const watchPlugin = "matememory:statement_watch"

// Name implements gorm.Plugin.
func (w *Watch) Name() string { return watchPlugin }

// WatchOf returns the watch installed on db, or nil.
func WatchOf(db *gorm.DB) *Watch {
	w, _ := db.Config.Plugins[watchPlugin].(*Watch)
	return w
}

// Initialize implements gorm.Plugin: it registers the watch's callbacks.
func (w *Watch) Initialize(db *gorm.DB) error {
	cb := db.Callback()
	regs := []struct {
		name     string
		before   func(string, func(*gorm.DB)) error
		after    func(string, func(*gorm.DB)) error
		deadline bool
	}{
		{"create", cb.Create().Before("*").Register, cb.Create().After("*").Register, true},
		{"query", cb.Query().Before("*").Register, cb.Query().After("*").Register, true},
		{"update", cb.Update().Before("*").Register, cb.Update().After("*").Register, true},
		{"delete", cb.Delete().Before("*").Register, cb.Delete().After("*").Register, true},
		{"raw", cb.Raw().Before("*").Register, cb.Raw().After("*").Register, true},
		// Row returns rows the caller reads after the callbacks: its context must outlive
		// them, so it is tracked but not given a deadline here.
		{"row", cb.Row().Before("*").Register, cb.Row().After("*").Register, false},
	}
	for _, r := range regs {
		deadline := r.deadline
		if err := r.before("matememory:watch_before_"+r.name, func(db *gorm.DB) { w.before(db, deadline) }); err != nil {
			return fmt.Errorf("register statement watch: %w", err)
		}
		if err := r.after("matememory:watch_after_"+r.name, w.after); err != nil {
			return fmt.Errorf("register statement watch: %w", err)
		}
	}
	return nil
}

// watchState is what before leaves for after on the statement. A *gorm.DB may run several
// operations on one Statement (CreateInBatches, a session inside a transaction), so after
// restores the caller's context and clears the state.
type watchState struct {
	id     uint64
	orig   context.Context
	cancel context.CancelFunc
}

func (w *Watch) before(db *gorm.DB, deadline bool) {
	st := &watchState{id: w.next.Add(1), orig: db.Statement.Context}
	w.mu.Lock()
	w.inflight[st.id] = time.Now()
	w.mu.Unlock()
	ctx := db.Statement.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if _, ok := ctx.Deadline(); deadline && !ok && w.timeout > 0 {
		db.Statement.Context, st.cancel = context.WithTimeout(ctx, w.timeout)
	}
	db.InstanceSet(watchKey, st)
}

func (w *Watch) after(db *gorm.DB) {
	v, _ := db.InstanceGet(watchKey)
	st, _ := v.(*watchState)
	if st == nil {
		return
	}
	db.InstanceSet(watchKey, (*watchState)(nil))
	if st.cancel != nil {
		st.cancel()
		db.Statement.Context = st.orig
	}
	w.mu.Lock()
	delete(w.inflight, st.id)
	w.mu.Unlock()
}

// Oldest is how long the oldest statement in flight has been waiting (0 when none).
func (w *Watch) Oldest() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	var oldest time.Time
	for _, t := range w.inflight {
		if oldest.IsZero() || t.Before(oldest) {
			oldest = t
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return time.Since(oldest)
}

// Stalled returns an error when a statement has been in flight for longer than limit.
func (w *Watch) Stalled(limit time.Duration) error {
	if d := w.Oldest(); d > limit {
		return fmt.Errorf("a database call has been waiting for %s (more than %s): the database or a connection to it is stalled", d.Round(time.Second), limit)
	}
	return nil
}
