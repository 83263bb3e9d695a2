package summarizer

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// Issue 9 point 14: the database connections freeze (packets stop, no reset). A handler
// gives up within its budget instead of hanging, releases the lease and asks for a retry;
// once the database answers again the event is extracted once.
func TestStalledDatabaseGivesUpWithinBudget(t *testing.T) {
	direct, ok := storetest.MySQL(t)
	if !ok {
		t.Skip("MATE_TEST_MYSQL_DSN not set")
	}
	// Statements without a deadline would wait for the 30 s default: what bounds them here
	// is the handler's budget.
	gdb, proxy := storetest.Via(t, direct)
	db := direct
	db.DB = gdb
	fake := llmtest.New(t, echoLLM)
	h := newHarness(t, db, withLLM(fake), withSettings(func(s *Settings) {
		s.HandlerTimeout = 2 * time.Second
		s.DBTimeout = time.Second
		s.LeaseTTL = 30 * time.Second
	}))
	h.conversation(9, "c1", "t9-1", 4)
	svc := h.service("w1")
	job := JobFromEvent(completed(9, "c1", "e9", 4))

	// Frozen from the start: the handler's first database call hangs.
	proxy.Freeze()
	start := time.Now()
	res := svc.Handle(context.Background(), job)
	if took := time.Since(start); took > 6*time.Second || !res.Retry {
		t.Fatalf("frozen database: %+v after %s, want a retry within the budget", res, took)
	}
	proxy.Thaw()

	// Frozen just before the commit, under the lease: the commit gives up, the lease is
	// released, nothing is written.
	var froze atomic.Bool
	svc.hookBeforeCommit = func() error {
		if froze.CompareAndSwap(false, true) {
			proxy.Freeze()
		}
		return nil
	}
	start = time.Now()
	job.Attempt = 2
	res = svc.Handle(context.Background(), job)
	if took := time.Since(start); took > 6*time.Second || !res.Retry {
		t.Fatalf("database frozen at the commit: %+v after %s, want a retry", res, took)
	}
	if hd, err := svc.d.Leases.Holder(context.Background(), 9); err != nil || hd.Owner != "" {
		t.Fatalf("lease still held after giving up: %+v %v", hd, err)
	}
	proxy.Thaw()

	job.Attempt = 3
	res = svc.Handle(context.Background(), job)
	if res.Status != store.RunCompleted || !res.Covered {
		t.Fatalf("after the thaw: %+v", res)
	}
	if note := h.dailyNote(9); strings.Count(note, "covered t9-1") != 1 {
		t.Fatalf("daily note:\n%s", note)
	}
}
