// Package scheduler fires cron slots: every tick it finds the enabled jobs whose next run
// has come, publishes one message per slot (an emergence request, or an agent trigger for
// task type text) and advances the job's next and last run.
//
// Each slot fires once however many schedulers run and however they crash:
//   - a leader lease in NATS KV lets one scheduler do the work while the others stand by;
//   - the message id is the job and the slot time, so a slot published twice (two leaders
//     for a moment, or a crash between publishing and advancing the job) is stored once by
//     JetStream's de-duplication, whose window is at least the grace period;
//   - the job is advanced with a compare-and-swap on next_run_time, so of two schedulers
//     that saw the same due slot exactly one moves it on;
//   - the message is published before the job is advanced: a crash in between re-publishes
//     the same id (dropped) instead of losing the slot.
//
// A slot missed while no scheduler ran fires once when one comes back, if it is within the
// grace period; slots older than that, and all but the latest of several missed ones, are
// skipped and recorded (log, metric, and a skipped run in the ledger for emergence jobs).
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/cronjob"
	"github.com/matememory/matememory/pkg/internal/emergence"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/panics"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/tracing"
)

// LeaderBucket is the KV bucket of the scheduler's leader lease (separate from the
// per-agent leases).
const LeaderBucket = bus.BucketSchedulerLeader

// leaderKey is the one key of LeaderBucket (pkg/internal/lease keys leases by a number).
const leaderKey int64 = 0

// Config is what the scheduler needs from configuration.
type Config struct {
	// Tick is how often due jobs are looked for (mate.scheduler.tick-seconds).
	Tick time.Duration
	// Grace is how late a missed slot may still fire (mate.scheduler.grace-minutes).
	Grace time.Duration
	// Replicas and MaxAge configure the streams and the leader bucket.
	Replicas int
	MaxAge   time.Duration
	// LeaderTTL is how long a dead leader keeps the lease; default 5 ticks, at least 5 s.
	LeaderTTL time.Duration
	// Owner names this scheduler in the leader lease (host and process).
	Owner string
	// Batch bounds the jobs read per query (default 200).
	Batch int
}

// DupWindow is the duplicate window the scheduler's streams need: a slot can be published
// again at most Grace after its first publication (a scheduler only fires slots within
// Grace of now), plus a margin for ticks and clock skew between replicas.
func (c Config) DupWindow() time.Duration {
	c = c.withDefaults()
	return c.Grace + c.LeaderTTL + 5*time.Minute
}

func (c Config) withDefaults() Config {
	if c.Tick <= 0 {
		c.Tick = time.Second
	}
	if c.LeaderTTL <= 0 {
		c.LeaderTTL = max(5*c.Tick, 5*time.Second)
	}
	if c.Batch <= 0 {
		c.Batch = 200
	}
	if c.Owner == "" {
		c.Owner = "scheduler"
	}
	return c
}

// FromConfig reads the scheduler's settings from MateMemory's configuration; every process
// that provisions the scheduler's streams must derive them the same way, or they would
// keep updating each other's stream settings.
func FromConfig(m config.Mate, owner string) Config {
	return Config{
		Tick:     config.Seconds(m.Sched.TickSeconds),
		Grace:    m.Sched.GraceMinutes.Duration(),
		Replicas: m.NATS.Replicas,
		MaxAge:   time.Duration(m.NATS.StreamMaxAgeHours * float64(time.Hour)),
		Owner:    owner,
	}.withDefaults()
}

// Stats counts what a scheduler did (for tests and logs).
type Stats struct {
	Ticks      int64 // passes made while leader
	Fired      int64 // slots this scheduler published and JetStream stored
	Duplicates int64 // publications JetStream recognised as already stored (dropped)
	LostRaces  int64 // slots another scheduler advanced first
	Skipped    int64 // missed slots not fired
	Failures   int64
}

// Scheduler fires cron slots.
type Scheduler struct {
	jobs   *cronjob.Service
	js     jetstream.JetStream
	cfg    Config
	now    func() time.Time
	log    *slog.Logger
	ledger *ledger.Ledger
	bucket string
	tr     tracing.Messaging
	pub    *bus.Publisher
	guard  *panics.Guard

	slots  *prometheus.CounterVec
	leader prometheus.Gauge

	ticks, fired, dups, lost, skipped, failures atomic.Int64
	isLeader                                    atomic.Bool

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Option configures a Scheduler.
type Option func(*Scheduler)

// WithClock replaces time.Now (tests move time forward without waiting).
func WithClock(now func() time.Time) Option { return func(s *Scheduler) { s.now = now } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(s *Scheduler) { s.log = l } }

// WithGuard recovers, logs and counts a panic during a tick; without it a guard logs to the
// scheduler's logger.
func WithGuard(g *panics.Guard) Option { return func(s *Scheduler) { s.guard = g } }

// WithLedger records skipped emergence slots in the run ledger.
func WithLedger(l *ledger.Ledger) Option { return func(s *Scheduler) { s.ledger = l } }

// WithTracing starts a producer span with m for each slot published (an emergence request
// or an agent trigger); its context travels in the message headers to the consumer.
func WithTracing(m tracing.Messaging) Option { return func(s *Scheduler) { s.tr = m } }

// WithRegistry registers the scheduler's metrics.
func WithRegistry(reg prometheus.Registerer) Option {
	return func(s *Scheduler) {
		s.slots = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "matememory_scheduler_slots_total",
			Help: "Cron slots by task type and outcome (fired, duplicate, lost_race, skipped, failed).",
		}, []string{"task", "outcome"})
		s.leader = prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "matememory_scheduler_leader", Help: "1 while this process is the scheduler leader.",
		})
		reg.MustRegister(s.slots, s.leader)
	}
}

// WithLeaderBucket uses another KV bucket for the leader lease (tests that want two
// schedulers to both work, to show that de-duplication and the compare-and-swap alone keep
// slots single).
func WithLeaderBucket(name string) Option { return func(s *Scheduler) { s.bucket = name } }

// New builds a scheduler; Start runs it.
func New(jobs *cronjob.Service, js jetstream.JetStream, cfg Config, opts ...Option) *Scheduler {
	cfg = cfg.withDefaults()
	s := &Scheduler{jobs: jobs, js: js, cfg: cfg, now: time.Now, log: slog.Default(), bucket: LeaderBucket}
	for _, o := range opts {
		o(s)
	}
	if s.guard == nil {
		s.guard = panics.New(s.log, nil)
	}
	s.pub = bus.PublisherOn(js, s.tr)
	return s
}

// Provision creates (or updates) the streams the scheduler publishes to.
func Provision(ctx context.Context, js jetstream.JetStream, cfg Config) error {
	if _, err := bus.EnsureStream(ctx, js, bus.EmergenceStreamConfig(cfg.Replicas, cfg.MaxAge, cfg.DupWindow())); err != nil {
		return err
	}
	_, err := bus.EnsureStream(ctx, js, TriggerStreamConfig(cfg.Replicas, cfg.MaxAge, cfg.DupWindow()))
	return err
}

// Start provisions the streams and the leader bucket and runs the loop until Stop.
func (s *Scheduler) Start(ctx context.Context) error {
	if err := Provision(ctx, s.js, s.cfg); err != nil {
		return err
	}
	mgr, err := lease.Bucket(ctx, s.js, s.bucket, s.cfg.LeaderTTL, s.cfg.Replicas, s.cfg.Owner,
		lease.WithDescription("MateMemory scheduler leader lease: the one scheduler replica that emits cron slots"))
	if err != nil {
		return err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.mu.Lock()
	s.cancel, s.done = cancel, make(chan struct{})
	done := s.done
	s.mu.Unlock()
	go s.run(lctx, mgr, done)
	return nil
}

// Stop ends the loop, waits for the tick in progress and hands the leader lease over.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.cancel = nil
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// Stats returns the counters so far.
func (s *Scheduler) Stats() Stats {
	return Stats{Ticks: s.ticks.Load(), Fired: s.fired.Load(), Duplicates: s.dups.Load(),
		LostRaces: s.lost.Load(), Skipped: s.skipped.Load(), Failures: s.failures.Load()}
}

// Leader reports whether this scheduler holds the leader lease.
func (s *Scheduler) Leader() bool { return s.isLeader.Load() }

func (s *Scheduler) setLeader(on bool) {
	if s.isLeader.Swap(on) != on {
		if on {
			s.log.Info("scheduler: leader", "owner", s.cfg.Owner)
		} else {
			s.log.Info("scheduler: no longer leader", "owner", s.cfg.Owner)
		}
	}
	if s.leader != nil {
		v := 0.0
		if on {
			v = 1
		}
		s.leader.Set(v)
	}
}

func (s *Scheduler) run(ctx context.Context, mgr *lease.Manager, done chan struct{}) {
	defer close(done)
	var held *lease.Lease
	defer func() {
		if held != nil {
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = held.Release(rctx)
			cancel()
		}
		s.setLeader(false)
	}()
	t := time.NewTicker(s.cfg.Tick)
	defer t.Stop()
	for {
		if held != nil && held.Err() != nil {
			s.log.Warn("scheduler: leader lease lost", "err", held.Err())
			_ = held.Release(ctx)
			held = nil
			s.setLeader(false)
		}
		if held == nil {
			l, err := mgr.Acquire(ctx, leaderKey, "scheduler leader")
			switch {
			case err == nil:
				held = l
				s.setLeader(true)
			case errors.Is(err, lease.ErrHeld):
			default:
				if ctx.Err() == nil {
					s.log.Warn("scheduler: leader lease", "err", err)
				}
			}
		}
		if held != nil {
			// A panic on a job is recovered: the loop goes on leading and ticking.
			_ = s.guard.Do("scheduler.tick", func() { s.tick(held.Context()) })
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tick fires every due slot once; the loop runs it while leader.
func (s *Scheduler) tick(ctx context.Context) {
	s.ticks.Add(1)
	now := s.now().UTC()
	for ctx.Err() == nil {
		due, err := s.jobs.Due(ctx, now, s.cfg.Batch)
		if err != nil {
			if ctx.Err() == nil {
				s.failures.Add(1)
				s.log.Error("scheduler: read due jobs", "err", err)
			}
			return
		}
		moved := 0
		for _, j := range due {
			if ctx.Err() != nil {
				return
			}
			if s.fire(ctx, j, now) {
				moved++
			}
		}
		// A full batch that all moved on may have more behind it; a job that could not be
		// moved (publish failed) waits for the next tick instead of spinning here.
		if len(due) < s.cfg.Batch || moved < len(due) {
			return
		}
	}
}

// tolerance is how late a slot may fire: the grace period, but never less than a leader
// hand-over and a few ticks, so that grace-minutes 0 ("do not catch up") still fires slots
// that are merely noticed a tick late.
func (s *Scheduler) tolerance() time.Duration {
	return max(s.cfg.Grace, s.cfg.LeaderTTL+3*s.cfg.Tick)
}

func (s *Scheduler) count(task, outcome string) {
	if s.slots != nil {
		s.slots.WithLabelValues(task, outcome).Inc()
	}
}

// fire handles one due job and reports whether its next run moved past now.
func (s *Scheduler) fire(ctx context.Context, j cronjob.Job, now time.Time) bool {
	from := *j.NextRunTime
	log := s.log.With("job", j.ID, "agent", j.AgentID, "name", j.Name, "task", j.TaskType)
	sched, err := j.Schedule()
	if err != nil {
		// Only a row edited behind the API's back gets here; park it rather than retry forever.
		log.Error("scheduler: job has an invalid schedule; it will not run until fixed", "err", err)
		s.failures.Add(1)
		s.count(j.TaskType, "failed")
		won, aerr := s.jobs.Advance(ctx, j.ID, from, nil, nil)
		return won || aerr == nil
	}

	// The slot to fire is the latest one not after now; earlier ones were missed.
	earliestAllowed := now.Add(-s.tolerance())
	slot := from
	missedFrom, missed := time.Time{}, 0
	if slot.Before(earliestAllowed) {
		missedFrom = slot
		// Jump over everything older than the grace period without walking it slot by slot.
		slot = sched.Next(earliestAllowed.Add(-time.Nanosecond))
		missed = -1 // unknown count: at least one
	}
	for !slot.IsZero() && !slot.After(now) {
		n := sched.Next(slot)
		if n.IsZero() || n.After(now) {
			break
		}
		if missedFrom.IsZero() {
			missedFrom = slot
		}
		if missed >= 0 {
			missed++
		}
		slot = n
	}

	if slot.IsZero() || slot.After(now) {
		// Nothing within the grace period: skip them all and move on.
		next := sched.Next(now)
		s.recordSkipped(ctx, j, missedFrom, now, missed, "")
		return s.advance(ctx, log, j, from, next, nil)
	}
	if !missedFrom.IsZero() {
		s.recordSkipped(ctx, j, missedFrom, slot, missed, slot.Format(time.RFC3339))
	}

	dup, err := s.publish(ctx, j, slot)
	if err != nil {
		if ctx.Err() == nil {
			s.failures.Add(1)
			s.count(j.TaskType, "failed")
			log.Error("scheduler: publish slot; will retry next tick", "slot", slot, "err", err)
		}
		return false
	}
	if dup {
		s.dups.Add(1)
		s.count(j.TaskType, "duplicate")
	} else {
		s.fired.Add(1)
		s.count(j.TaskType, "fired")
		log.Info("scheduler: fired", "slot", slot)
	}
	next := sched.Next(slot)
	var nextp *time.Time
	if !next.IsZero() {
		nextp = &next
	}
	won, err := s.jobs.Advance(ctx, j.ID, from, nextp, &slot)
	if err != nil {
		s.failures.Add(1)
		log.Error("scheduler: advance job after publishing; the slot is re-published (and de-duplicated) next tick", "slot", slot, "err", err)
		return false
	}
	if !won {
		s.lost.Add(1)
		s.count(j.TaskType, "lost_race")
		log.Debug("scheduler: another scheduler advanced the job first", "slot", slot)
	}
	return true
}

func (s *Scheduler) advance(ctx context.Context, log *slog.Logger, j cronjob.Job, from, next time.Time, last *time.Time) bool {
	var nextp *time.Time
	if !next.IsZero() {
		nextp = &next
	}
	won, err := s.jobs.Advance(ctx, j.ID, from, nextp, last)
	if err != nil {
		s.failures.Add(1)
		log.Error("scheduler: advance job", "err", err)
		return false
	}
	if !won {
		s.lost.Add(1)
		s.count(j.TaskType, "lost_race")
	}
	return true
}

// recordSkipped notes missed slots from first up to (not including) until. n is their
// number, or -1 when older slots were jumped over uncounted.
func (s *Scheduler) recordSkipped(ctx context.Context, j cronjob.Job, first, until time.Time, n int, firedInstead string) {
	count := "several"
	if n >= 0 {
		count = fmt.Sprint(n)
		s.skipped.Add(int64(n))
		if s.slots != nil {
			s.slots.WithLabelValues(j.TaskType, "skipped").Add(float64(n))
		}
	} else {
		s.skipped.Add(1)
		s.count(j.TaskType, "skipped")
	}
	reason := fmt.Sprintf("cron job %d (%s): %s slot(s) from %s to before %s missed while no scheduler ran; ",
		j.ID, j.Name, count, first.Format(time.RFC3339), until.Format(time.RFC3339))
	if firedInstead != "" {
		reason += "fired once, for the latest slot " + firedInstead + ", instead"
	} else {
		reason += fmt.Sprintf("all older than the grace period (%s), none fired", s.tolerance())
	}
	s.log.Warn("scheduler: missed slots skipped", "job", j.ID, "agent", j.AgentID, "reason", reason)
	if s.ledger != nil && j.TaskType == cronjob.TaskEmergence {
		_, err := s.ledger.Record(ctx, ledger.Run{Kind: ledger.KindEmergence, AgentID: j.AgentID,
			EventID: emergence.CronRequestID(j.ID, first), Status: store.RunSkipped, Reason: reason})
		if err != nil {
			s.log.Error("scheduler: record skipped slots", "err", err)
		}
	}
}

// publish stores the slot's message; the id makes a second publication of the same slot a
// no-op.
func (s *Scheduler) publish(ctx context.Context, j cronjob.Job, slot time.Time) (bool, error) {
	id := emergence.CronRequestID(j.ID, slot)
	switch j.TaskType {
	case cronjob.TaskEmergence:
		sl := slot
		return emergence.PublishWith(ctx, s.pub, emergence.Request{RequestID: id, AgentID: j.AgentID,
			Source: emergence.SourceCron, JobID: j.ID, Slot: &sl, CreatedAt: s.now().UTC()})
	case cronjob.TaskText:
		ack, err := s.pub.PublishJSON(ctx, Trigger{TriggerID: id, AgentID: j.AgentID, JobID: j.ID, JobName: j.Name,
			Message: j.TriggerMessage, RequestBody: j.RequestBody, TriggerSource: TriggerSourceCron,
			Slot: slot, Timezone: j.Timezone},
			bus.Message{Subject: bus.AgentSubject(bus.SubjectAgentTrigger, j.AgentID), MsgID: id, Stream: TriggerStream,
				Header: nats.Header{"Mate-Trigger-Source": {TriggerSourceCron}}})
		if err != nil {
			return false, fmt.Errorf("publish trigger %s: %w", id, err)
		}
		return ack.Duplicate, nil
	default:
		return false, fmt.Errorf("task type %q is not supported", j.TaskType)
	}
}
