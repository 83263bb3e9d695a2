package scheduler_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/cronjob"
	"github.com/matememory/matememory/pkg/internal/panics"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/scheduler"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// A panic during a tick (here the clock's, the tick's first read) is recovered, logged and
// counted; the scheduler stays leader and the next ticks fire the due slot.
func TestTickPanicIsRecovered(t *testing.T) {
	f := newFixture(t, storetest.SQLite(t))
	j := f.job(t, 1, "* * * * *", cronjob.TaskEmergence)
	var logs syncBuffer
	g := panics.New(slog.New(slog.NewTextHandler(&logs, nil)), prometheus.NewRegistry())
	var boom atomic.Int64
	boom.Store(2)
	clk := func() time.Time {
		if boom.Add(-1) >= 0 {
			panic("clock exploded")
		}
		return f.clk.Now()
	}
	slot := f.nextRun(t, j.ID)
	f.clk.Set(slot.Add(time.Second))
	s := f.start(t, "scheduler-p", scheduler.WithClock(clk), scheduler.WithGuard(g))
	poll.Until(t, 10*time.Second, "the slot after the panics", func() bool { return f.nextRun(t, j.ID).After(slot) })
	if got := g.Count("scheduler.tick"); got != 2 {
		t.Fatalf("recovered tick panics = %v, want 2", got)
	}
	if !s.Leader() {
		t.Error("the scheduler lost its leadership to a panic")
	}
	if reqs := f.requests(t); len(reqs) != 1 || reqs[0].Slot == nil || !reqs[0].Slot.Equal(slot) {
		t.Fatalf("requests %+v; want the one slot %s", reqs, slot)
	}
	if !strings.Contains(logs.String(), "clock exploded") {
		t.Errorf("the log lacks the panic: %s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the scheduler's goroutine and the test's.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
