package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/bus/bustest"
	"github.com/matememory/matememory/pkg/internal/cronjob"
	"github.com/matememory/matememory/pkg/internal/emergence"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/scheduler"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
)

// clock is a controllable clock shared by the schedulers of a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

type fixture struct {
	db    storetest.DB
	clk   *clock
	jobs  *cronjob.Service
	dial  bus.Dialer
	js    jetstream.JetStream
	cfg   scheduler.Config
	quiet *slog.Logger
}

func newFixture(t *testing.T, db storetest.DB) *fixture {
	t.Helper()
	_, d := bustest.Server(t)
	f := &fixture{db: db, dial: d, clk: &clock{t: time.Date(2026, 4, 3, 10, 0, 30, 0, time.UTC)},
		quiet: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var err error
	f.jobs, err = cronjob.New(db.DB, nil, cronjob.WithClock(f.clk.Now))
	if err != nil {
		t.Fatal(err)
	}
	f.js = f.connect(t, "test")
	f.cfg = scheduler.Config{Tick: 10 * time.Millisecond, Grace: 60 * time.Minute, Replicas: 1,
		MaxAge: 24 * time.Hour, LeaderTTL: 2 * time.Second}
	if err := scheduler.Provision(context.Background(), f.js, f.cfg); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) connect(t *testing.T, name string) jetstream.JetStream {
	t.Helper()
	nc, err := f.dial.Connect(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// start runs a scheduler on its own connection; it is stopped at cleanup.
func (f *fixture) start(t *testing.T, name string, opts ...scheduler.Option) *scheduler.Scheduler {
	t.Helper()
	cfg := f.cfg
	cfg.Owner = name
	opts = append([]scheduler.Option{scheduler.WithClock(f.clk.Now), scheduler.WithLogger(f.quiet),
		scheduler.WithLedger(ledger.New(f.db.DB, f.clk.Now))}, opts...)
	s := scheduler.New(f.jobs, f.connect(t, name), cfg, opts...)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func (f *fixture) job(t *testing.T, agent int64, expr, task string) cronjob.Job {
	t.Helper()
	in := cronjob.Input{AgentID: &agent, Name: ptr(fmt.Sprintf("%s %s", task, expr)), CronExpression: &expr,
		Timezone: ptr("Asia/Shanghai"), TaskType: &task}
	if task == cronjob.TaskText {
		in.TriggerMessage = ptr("Look back at today's notes")
	}
	j, err := f.jobs.Create(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// messages reads every message of stream, in order.
func (f *fixture) messages(t *testing.T, stream string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	s, err := f.js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func (f *fixture) requests(t *testing.T) []emergence.Request {
	t.Helper()
	var out []emergence.Request
	for _, m := range f.messages(t, emergence.Stream) {
		var r emergence.Request
		if err := json.Unmarshal(m.Data, &r); err != nil {
			t.Fatal(err)
		}
		if m.Header.Get("Nats-Msg-Id") != r.RequestID {
			t.Fatalf("message id %q, request id %q", m.Header.Get("Nats-Msg-Id"), r.RequestID)
		}
		out = append(out, r)
	}
	return out
}

// settle waits until every scheduler that is leader has made n more passes, so that any
// extra publication it would make has been made.
func settle(t *testing.T, n int64, ss ...*scheduler.Scheduler) {
	t.Helper()
	start := make([]int64, len(ss))
	for i, s := range ss {
		start[i] = s.Stats().Ticks
	}
	poll.Until(t, 10*time.Second, "scheduler passes", func() bool {
		leaders := 0
		for i, s := range ss {
			if s.Leader() {
				leaders++
				if s.Stats().Ticks-start[i] < n {
					return false
				}
			}
		}
		return leaders > 0
	})
}

func (f *fixture) nextRun(t *testing.T, id int64) time.Time {
	t.Helper()
	j, err := f.jobs.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if j.NextRunTime == nil {
		return time.Time{}
	}
	return *j.NextRunTime
}

// runMinutes moves the clock over n minute slots, each time waiting until the job has moved
// past the slot, and returns the slots.
func (f *fixture) runMinutes(t *testing.T, j cronjob.Job, n int, ss ...*scheduler.Scheduler) []time.Time {
	t.Helper()
	var want []time.Time
	for i := 0; i < n; i++ {
		slot := f.nextRun(t, j.ID)
		want = append(want, slot)
		f.clk.Set(slot.Add(time.Second))
		poll.Until(t, 10*time.Second, "slot "+slot.String()+" to be claimed", func() bool { return f.nextRun(t, j.ID).After(slot) })
		settle(t, 3, ss...)
	}
	return want
}

func slotsOf(reqs []emergence.Request) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Slot.UTC().Format(time.RFC3339))
	}
	sort.Strings(out)
	return out
}

func TestTwoSchedulersFireEachSlotOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		f := newFixture(t, db)
		j := f.job(t, 1, "* * * * *", cronjob.TaskEmergence)
		a := f.start(t, "scheduler-a")
		b := f.start(t, "scheduler-b")
		poll.Until(t, 10*time.Second, "a leader", func() bool { return a.Leader() || b.Leader() })
		if a.Leader() && b.Leader() {
			t.Fatal("both schedulers hold the leader lease")
		}
		want := f.runMinutes(t, j, 5, a, b)
		reqs := f.requests(t)
		if got, w := strings.Join(slotsOf(reqs), " "), strings.Join(fmtAll(want), " "); got != w {
			t.Fatalf("requests for slots %s, want exactly %s", got, w)
		}
		for _, r := range reqs {
			if r.AgentID != 1 || r.Source != emergence.SourceCron || r.JobID != j.ID ||
				r.RequestID != emergence.CronRequestID(j.ID, *r.Slot) {
				t.Fatalf("request %+v", r)
			}
		}
		got, _ := f.jobs.Get(context.Background(), j.ID)
		if got.LastRunTime == nil || !got.LastRunTime.Equal(want[len(want)-1]) {
			t.Fatalf("last run %v, want %v", got.LastRunTime, want[len(want)-1])
		}
	})
}

// With the leader lease out of the way (each scheduler in its own leader bucket), three
// schedulers race for every slot; de-duplication and the compare-and-swap alone keep each
// slot single.
func TestRacingSchedulersWithoutLeaderStillFireOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		f := newFixture(t, db)
		j := f.job(t, 1, "* * * * *", cronjob.TaskEmergence)
		var ss []*scheduler.Scheduler
		for _, n := range []string{"x", "y", "z"} {
			ss = append(ss, f.start(t, "scheduler-"+n, scheduler.WithLeaderBucket("leader_"+n)))
		}
		poll.Until(t, 10*time.Second, "three leaders", func() bool { return ss[0].Leader() && ss[1].Leader() && ss[2].Leader() })
		want := f.runMinutes(t, j, 6, ss...)
		if got, w := strings.Join(slotsOf(f.requests(t)), " "), strings.Join(fmtAll(want), " "); got != w {
			t.Fatalf("requests for slots %s, want exactly %s", got, w)
		}
		var fired int64
		for _, s := range ss {
			fired += s.Stats().Fired
		}
		t.Logf("stats: %+v %+v %+v", ss[0].Stats(), ss[1].Stats(), ss[2].Stats())
		if fired != int64(len(want)) {
			t.Fatalf("schedulers report %d fired slots, want %d", fired, len(want))
		}
	})
}

func TestSlotMissedWhileDownFiresOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		f := newFixture(t, db)
		ctx := context.Background()
		j := f.job(t, 2, "* * * * *", cronjob.TaskEmergence)
		s := f.start(t, "scheduler-1")
		f.runMinutes(t, j, 1, s)
		s.Stop()

		// Down across three slots (10:02, 10:03, 10:04 +08:00 clock minutes), back at 10:04:30.
		missed := f.nextRun(t, j.ID)
		f.clk.Set(missed.Add(2*time.Minute + 30*time.Second))
		latest := missed.Add(2 * time.Minute)
		s2 := f.start(t, "scheduler-2")
		poll.Until(t, 10*time.Second, "catch-up", func() bool { return f.nextRun(t, j.ID).After(latest) })
		settle(t, 3, s2)
		// Restarted again with the clock where it is: nothing more fires.
		s2.Stop()
		s3 := f.start(t, "scheduler-3")
		settle(t, 3, s3)

		reqs := f.requests(t)
		if len(reqs) != 2 || !reqs[1].Slot.Equal(latest) {
			t.Fatalf("requests %v; want the first slot and one catch-up for %v", slotsOf(reqs), latest)
		}
		if st := s2.Stats(); st.Fired != 1 || st.Skipped != 2 {
			t.Fatalf("catch-up stats %+v; want 1 fired, 2 skipped", st)
		}
		runs, _ := ledger.New(db.DB, nil).List(ctx, ledger.Filter{AgentID: 2, Kind: ledger.KindEmergence})
		if len(runs) != 1 || runs[0].Status != store.RunSkipped || !strings.Contains(runs[0].Reason, "2 slot(s)") {
			t.Fatalf("ledger %+v; want one skipped row for the 2 superseded slots", runs)
		}

		// Down for longer than the grace period: a daily job's slot is not fired late, the
		// job moves on to tomorrow; the minutely job fires its latest slot, once.
		s3.Stop()
		daily := f.job(t, 5, "0 2 * * *", cronjob.TaskEmergence) // 02:00 Shanghai = 18:00Z
		slot := *daily.NextRunTime
		f.clk.Set(slot.Add(3 * time.Hour))
		s4 := f.start(t, "scheduler-4")
		poll.Until(t, 10*time.Second, "skip", func() bool {
			return f.nextRun(t, daily.ID).After(f.clk.Now()) && f.nextRun(t, j.ID).After(f.clk.Now())
		})
		settle(t, 3, s4)
		if got := f.nextRun(t, daily.ID); !got.Equal(slot.Add(24 * time.Hour)) {
			t.Fatalf("daily job next run %v, want %v", got, slot.Add(24*time.Hour))
		}
		perAgent := map[int64]int{}
		for _, r := range f.requests(t) {
			perAgent[r.AgentID]++
		}
		if perAgent[5] != 0 || perAgent[2] != 3 {
			t.Fatalf("requests per agent %v; want none for the daily job 3h late, one more for the minutely job", perAgent)
		}
		runs, _ = ledger.New(db.DB, nil).List(ctx, ledger.Filter{AgentID: 5, Kind: ledger.KindEmergence})
		if len(runs) != 1 || runs[0].Status != store.RunSkipped || !strings.Contains(runs[0].Reason, "none fired") {
			t.Fatalf("ledger %+v; want a skipped row for the daily slot", runs)
		}
	})
}

// A scheduler that published a slot and died before advancing the job: the next one
// publishes the same slot again, and JetStream keeps one.
func TestRepublishedSlotIsDeduplicated(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		f := newFixture(t, db)
		j := f.job(t, 3, "*/5 * * * *", cronjob.TaskEmergence)
		slot := *j.NextRunTime
		dup, err := emergence.Publish(context.Background(), f.js, emergence.Request{
			RequestID: emergence.CronRequestID(j.ID, slot), AgentID: 3, Source: emergence.SourceCron, JobID: j.ID, Slot: &slot})
		if err != nil || dup {
			t.Fatalf("first publish: dup %v err %v", dup, err)
		}
		f.clk.Set(slot.Add(10 * time.Second))
		s := f.start(t, "scheduler-1")
		poll.Until(t, 10*time.Second, "advance", func() bool { return f.nextRun(t, j.ID).After(slot) })
		if n := len(f.requests(t)); n != 1 {
			t.Fatalf("%d requests stored for one slot", n)
		}
		if st := s.Stats(); st.Duplicates != 1 || st.Fired != 0 {
			t.Fatalf("stats %+v; want the publication recognised as a duplicate", st)
		}
	})
}

func TestTextJobPublishesAgentTrigger(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		f := newFixture(t, db)
		j := f.job(t, 4, "0 * * * *", cronjob.TaskText)
		s := f.start(t, "scheduler-1")
		f.runMinutes(t, j, 1, s)
		msgs := f.messages(t, scheduler.TriggerStream)
		if len(msgs) != 1 {
			t.Fatalf("%d triggers", len(msgs))
		}
		if msgs[0].Subject != "mate.agent.trigger.4" {
			t.Fatalf("subject %s", msgs[0].Subject)
		}
		var tr scheduler.Trigger
		if err := json.Unmarshal(msgs[0].Data, &tr); err != nil {
			t.Fatal(err)
		}
		if tr.TriggerSource != "cron" || tr.Message != "Look back at today's notes" || tr.AgentID != 4 || tr.JobID != j.ID ||
			!tr.Slot.Equal(*j.NextRunTime) || tr.Timezone != "Asia/Shanghai" {
			t.Fatalf("trigger %+v", tr)
		}
		if len(f.requests(t)) != 0 {
			t.Fatal("a text job published an emergence request")
		}
	})
}

func fmtAll(ts []time.Time) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.UTC().Format(time.RFC3339))
	}
	sort.Strings(out)
	return out
}

func ptr[T any](v T) *T { return &v }
