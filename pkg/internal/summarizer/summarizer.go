// Package summarizer is MateMemory's automatic memory extraction (the spec's
// PostConversationMemoryListener and MemorySummarizationService) rebuilt as JetStream
// workers: it consumes ConversationCompletedEvents and manual summarize requests, takes the
// per-agent lease, honours the cooldown without dropping anything (one event per agent waits
// for its end, the others are acknowledged into the extraction that follows, and one
// extraction covers everything of the agent not yet extracted), asks the LLM
// (or the offline provider) what to remember, and writes PROFILE.md, MEMORY.md and the daily
// note safely: compare-and-swap with re-read and retry, a guard against destructive
// rewrites, secrets redacted, the daily entry appended once per covered message range.
//
// The application logic is Service.Handle (no NATS in it); Worker is the JetStream port
// that feeds it deliveries and maps its Result to ack, delayed NAK or dead letter.
package summarizer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/guard"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/memedit"
	"github.com/matememory/matememory/pkg/internal/prompt"
	"github.com/matememory/matememory/pkg/internal/ratelog"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// Workspace file names the summarizer writes.
const (
	ProfileFile = "PROFILE.md"
	MemoryFile  = "MEMORY.md"
)

// Providers recorded in the ledger.
const (
	ProviderLLM     = "llm"
	ProviderOffline = "offline"
)

// Settings are the summarizer's knobs, taken from configuration (SettingsFrom) and
// adjustable by tests.
type Settings struct {
	Memory config.Memory
	// Replicas and MaxAge of the streams and buckets.
	Replicas int
	MaxAge   time.Duration
	// MaxBytes and MaxMsgs bound MATE_EVENTS (0: unlimited); when full, new events are
	// refused (503), never old ones discarded.
	MaxBytes int64
	MaxMsgs  int64
	// MaxDeliver bounds deliveries of one event before it is dead-lettered.
	MaxDeliver int
	// AckWait is how long a delivery may go unacknowledged before JetStream redelivers it;
	// workers send progress acks while they work, so it bounds a stalled worker, not an LLM call.
	AckWait time.Duration
	// LeaseTTL is the per-agent lease's lifetime between renewals.
	LeaseTTL time.Duration
	// JSONMode asks the LLM for a JSON object answer.
	JSONMode bool
	// BackoffBase and BackoffMax shape the delay of a NAK after a transient failure or
	// when the lease is held: base·2^(delivery-1), capped, ±20% jitter.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Concurrency is how many deliveries one worker handles at once.
	Concurrency int
	// ManualTimeout bounds how long the manual summarize endpoint waits for the outcome.
	ManualTimeout time.Duration
	// DuplicateWindow is the events stream's Nats-Msg-Id deduplication window.
	DuplicateWindow time.Duration
	// HandlerTimeout bounds the handling of one delivery: past it the handler's context is
	// cancelled, so a database or LLM call that hangs gives up, the lease is released and
	// the delivery is handed back for a retry.
	HandlerTimeout time.Duration
	// DBTimeout bounds each database transaction made outside the handler's context (the
	// commit of an extraction, the ledger row).
	DBTimeout time.Duration
	// SweepEvery is how often a worker looks for events coalesced behind a waiter that will
	// not come back (sweep.go); 0 turns the sweep off.
	SweepEvery time.Duration
}

// SettingsFrom derives Settings from the configuration.
func SettingsFrom(cfg config.Config) Settings {
	m := cfg.Mate
	maxAge := time.Duration(m.NATS.StreamMaxAgeHours * float64(time.Hour))
	llmTimeout := config.Seconds(m.LLM.TimeoutSeconds)
	return Settings{
		Memory:          m.Memory,
		Replicas:        m.NATS.Replicas,
		MaxAge:          maxAge,
		MaxBytes:        int64(m.NATS.StreamMaxBytes),
		MaxMsgs:         int64(m.NATS.StreamMaxMsgs),
		MaxDeliver:      m.NATS.MaxDeliver,
		AckWait:         config.Seconds(m.NATS.AckWaitSeconds),
		LeaseTTL:        config.Seconds(m.Memory.LeaseTTLSeconds),
		JSONMode:        m.LLM.JSONMode,
		BackoffBase:     2 * time.Second,
		BackoffMax:      5 * time.Minute,
		Concurrency:     4,
		ManualTimeout:   2*llmTimeout + 30*time.Second,
		DuplicateWindow: 10 * time.Minute,
		HandlerTimeout:  3*llmTimeout + time.Minute,
		DBTimeout:       10 * time.Second,
		SweepEvery:      10 * time.Minute,
	}
}

// Deps are the services the summarizer uses.
type Deps struct {
	DB        *gorm.DB
	Workspace *workspace.Service
	Ledger    *ledger.Ledger
	// Leases is the per-agent record (lease and cooldown) in bus.BucketLease.
	Leases *lease.Manager
	// Intents is bus.BucketIntent, read only for agents an older version worked on last.
	Intents jetstream.KeyValue
	// LLM is nil when none is configured: the offline provider is used.
	LLM     llm.Client
	Prompts *prompt.Loader
	Metrics *Metrics
	Log     *slog.Logger
	// Now is the clock (dates of daily notes, cooldowns); nil = time.Now.
	Now func() time.Time
}

// Service runs extractions.
type Service struct {
	set Settings
	d   Deps
	// warn logs failed runs (the LLM or the database failing), at a bounded rate.
	warn *ratelog.Logger

	// hookBeforeCommit, set by tests, runs just before the transaction that appends the
	// daily entry and moves the watermarks; an error simulates a crash there.
	hookBeforeCommit func() error
}

// New builds the service.
func New(d Deps, set Settings) *Service {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Metrics == nil {
		d.Metrics = NewMetrics(nil)
	}
	if d.Prompts == nil {
		d.Prompts = prompt.NewLoader("")
	}
	if set.BackoffBase <= 0 {
		set.BackoffBase = time.Second
	}
	if set.BackoffMax < set.BackoffBase {
		set.BackoffMax = set.BackoffBase
	}
	if set.Concurrency <= 0 {
		set.Concurrency = 1
	}
	if set.DBTimeout <= 0 {
		set.DBTimeout = 10 * time.Second
	}
	return &Service{set: set, d: d, warn: ratelog.New(d.Log, failureLogInterval, failureLogBurst)}
}

// Settings returns the service's settings.
func (s *Service) Settings() Settings { return s.set }

// Job is one delivery to handle: an event or a manual request.
type Job struct {
	// EventID is the event id or the manual request id.
	EventID        string
	AgentID        int64
	ConversationID string
	// Event is the completed event (nil for a manual request).
	Event *event.ConversationCompletedEvent
	// Manual is a summarize request rather than an event: the event pre-checks do not
	// apply (the stored-message minimum does).
	Manual bool
	// Urgent means someone waits for the outcome (the manual summarize endpoint, an
	// operator replay): the cooldown does not apply, a held lease is retried soon, and the
	// conversation is extracted completely. A request without a reply subject (the context
	// window's flush when it evicts unextracted messages) is not urgent: it honours the
	// cooldown and is coalesced like an event.
	Urgent bool
	// Replay is an operator replay (recorded as such in the ledger).
	Replay bool
	// Settle, when set, may be called once with the outcome as soon as it is final and
	// recorded, while the agent's lease is still being released (when the outcome does not
	// depend on that release); Handle returns the same outcome after the release is done.
	// The worker acknowledges the delivery there, so that the ack and the release overlap;
	// when Settle was not called, it settles with what Handle returns.
	Settle func(Result)
	// Force (manual requests) re-extracts a conversation already extracted up to its end:
	// its last transcript's worth of messages, with the same effect key for the same range.
	Force bool
	// Sweep is a request of the stranded sweep (sweep.go): it runs like an event's extraction,
	// and a failure is not retried or dead-lettered (the next sweep tries again).
	Sweep bool
	// Attempt is the delivery number (1 for the first); LastAttempt is true when no
	// redelivery will follow, so a result that wants a retry is dead-lettered instead.
	Attempt     int
	LastAttempt bool
}

// JobFromEvent builds the job of a completed event.
func JobFromEvent(e *event.ConversationCompletedEvent) Job {
	return Job{EventID: e.EventID, AgentID: e.AgentID, ConversationID: e.ConversationID, Event: e, Attempt: 1}
}

// JobFromRequest builds the job of a manual summarize request.
func JobFromRequest(r *event.SummarizeRequest) Job {
	return Job{EventID: r.RequestID, AgentID: r.AgentID, ConversationID: r.ConversationID, Manual: true,
		Urgent: r.ReplyTo != "", Force: r.Force, Sweep: r.Reason == sweepReason && r.ReplyTo == "", Attempt: 1}
}

// Result is what became of a job; the worker maps it to ack, NAK with Delay, or dead letter.
type Result struct {
	// Status is the ledger status: completed, skipped, refused, deferred or failed.
	Status string
	Reason string
	RunID  string
	// Retry asks for a redelivery after Delay (deferred, or a transient failure).
	Retry bool
	Delay time.Duration
	// DeadLetter asks for the message to go to the dead-letter stream (a permanent failure,
	// or a retry wanted on the last delivery).
	DeadLetter bool
	// Covered is true when the job's conversation is fully extracted.
	Covered bool
	// Deferral names why a job was deferred (cooldown, lease, messages, backlog).
	Deferral     string
	FilesChanged []string
	// unrecorded: the outcome writes no ledger row (an erased agent's event).
	unrecorded bool
	// conflict: PROFILE.md or MEMORY.md changed during the extraction and nothing was
	// committed; the extraction asks the model again.
	conflict bool
}

// erasedResult is the outcome of an event of an agent erased after it happened.
func erasedResult() Result {
	return Result{Status: store.RunSkipped, Reason: "the agent was erased after this event; nothing of it is kept", Covered: true, unrecorded: true}
}

// Final reports whether the job is done with (not to be retried).
func (r Result) Final() bool { return !r.Retry }

func (s *Service) backoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := s.set.BackoffBase
	for i := 1; i < attempt && d < s.set.BackoffMax; i++ {
		d *= 2
	}
	if d > s.set.BackoffMax {
		d = s.set.BackoffMax
	}
	return jitter(d)
}

func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

func transient(reason string, attempt int, s *Service) Result {
	return Result{Status: store.RunFailed, Reason: reason, Retry: true, Delay: s.backoff(attempt)}
}

func permanent(reason string) Result {
	return Result{Status: store.RunFailed, Reason: reason, DeadLetter: true}
}

func deferred(kind, reason string, delay time.Duration) Result {
	return Result{Status: store.RunDeferred, Reason: reason, Retry: true, Delay: delay, Deferral: kind}
}

// attempt is one handling of a job: its ledger row and what the lease's release writes.
type attempt struct {
	run   ledger.Run
	start time.Time
	// recorded is set when the ledger row was written in the extraction's own commit.
	recorded bool
	// cooldown, when set, is written into the agent's record as the lease is released.
	cooldown    time.Time
	cooldownRun string
	// waiter is set when this delivery is the one the agent's record says waits for the
	// cooldown; coalesced are the events acknowledged into this extraction, and
	// coalescedDone says their ledger rows were committed.
	waiter        bool
	coalesced     []lease.Coalesced
	coalescedDone bool
	// behind is how many events the agent's record listed as coalesced behind this waiter.
	behind int
	// releasing, when set, is closed once the lease's release, running alongside the
	// settlement of the delivery, is done.
	releasing chan struct{}
	// conv is set once the job's conversation passed the checks that let it take part in
	// extraction; registered says whether it has a watermark (the extraction's commit
	// gives it one).
	conv, registered bool
}

// Handle processes one job and records one ledger row for it, except for a deferral
// (cooldown, held lease), which costs no ledger row: the metrics count those.
func (s *Service) Handle(parent context.Context, job Job) Result {
	a := &attempt{start: time.Now(), run: ledger.Run{RunID: uuid.NewString(), Kind: ledger.KindSummarize, AgentID: job.AgentID,
		EventID: job.EventID, Attempt: job.Attempt, Conversations: []string{job.ConversationID}}}
	ctx := parent
	if s.set.HandlerTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(parent, s.set.HandlerTimeout,
			fmt.Errorf("the delivery's handling exceeded its budget of %s (a stalled database or LLM call?)", s.set.HandlerTimeout))
		defer cancel()
	}
	res := s.handle(ctx, job, a)
	if parent.Err() != nil && res.Retry {
		// Shutting down: let another worker take it now rather than after a backoff.
		res.Delay = 0
	}
	if !a.recorded {
		res = s.settle(job, a, res)
		if res.DeadLetter && a.conv && !a.registered {
			// Dead-lettered before its conversation was registered: registered now, the
			// agent's next extraction covers it even if nobody retries the dead letter.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.set.DBTimeout)
			if err := s.register(rctx, job.AgentID, job.ConversationID); err != nil {
				s.d.Log.Error("register the conversation of a dead-lettered job", "agent", job.AgentID, "event", job.EventID, "err", err)
			}
			cancel()
		}
		if !cheapDeferral(res) && !res.unrecorded {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.set.DBTimeout)
			defer cancel()
			if _, err := s.d.Ledger.Record(rctx, a.run); err != nil {
				s.d.Log.Error("record summarize run", "agent", job.AgentID, "event", job.EventID, "err", err)
			}
		}
	}
	if res.Status == store.RunFailed {
		s.warn.Warn("summarize run failed", "agent", job.AgentID, "run", a.run.RunID, "event", job.EventID,
			"attempt", job.Attempt, "retrying", res.Retry, "cause", res.Reason)
	}
	s.d.Metrics.Outcomes.WithLabelValues(res.Status).Inc()
	if res.Deferral != "" {
		s.d.Metrics.Deferrals.WithLabelValues(res.Deferral).Inc()
	}
	s.d.Metrics.RunSeconds.Observe(time.Since(a.start).Seconds())
	if a.releasing != nil {
		job.Settle(res)
		<-a.releasing
	}
	return res
}

// cheapDeferral is a deferral decided from the agent's record alone (its cooldown runs,
// another worker holds its lease): redelivered later, it leaves no ledger row. An event
// acknowledged into the agent's next extraction gets its row in that extraction's commit.
func cheapDeferral(res Result) bool {
	return res.Status == store.RunDeferred && (res.Deferral == "cooldown" || res.Deferral == "lease") ||
		res.Deferral == deferralCoalesced
}

// settle turns what handling a job gave into its outcome, and fills the ledger row with it.
func (s *Service) settle(job Job, a *attempt, res Result) Result {
	if job.Sweep && res.Retry && res.Status == store.RunFailed {
		// The coalesced events stay listed in the agent's record: the next sweep tries again,
		// and a long outage does not fill the dead-letter queue with sweeps.
		res.Retry, res.Delay = false, 0
		res.Reason += "; the next sweep tries again"
	}
	if res.Retry && job.LastAttempt {
		res = Result{Status: store.RunFailed, DeadLetter: true, FilesChanged: res.FilesChanged, Covered: res.Covered,
			Reason: fmt.Sprintf("gave up after %d deliveries: %s", job.Attempt, res.Reason)}
	}
	if job.Replay {
		res.Reason = "replay: " + res.Reason
	}
	// The reason may quote the model, which may quote the user: secrets are masked before
	// it reaches the ledger or a manual caller.
	res.Reason = guard.Redact(res.Reason)
	if res.DeadLetter && a.waiter && a.behind > 0 {
		// Those events were acknowledged: the agent's next extraction covers them (its next
		// event, a manual summarize, the workers' stranded sweep, or this dead letter retried).
		res.Reason += fmt.Sprintf("; %d events were acknowledged into this extraction during the cooldown: the workers' stranded sweep extracts them once the model answers, or retrying this dead letter does", a.behind)
	}
	if res.DeadLetter && !strings.Contains(res.Reason, "dead-lettered") {
		// Final: nothing retries it (the Go client's WaitRun stops on this word).
		res.Reason += " (dead-lettered)"
	}
	a.run.Status, a.run.Reason = res.Status, res.Reason
	a.run.FilesChanged = res.FilesChanged
	a.run.LatencyMs = time.Since(a.start).Milliseconds()
	res.RunID = a.run.RunID
	return res
}

// waitForMessages is how many deliveries an event whose messages are not stored yet (the
// chat service stores them concurrently) is deferred before it is skipped as too short.
const waitForMessages = 3

func (s *Service) handle(ctx context.Context, job Job, a *attempt) (res Result) {
	var early *lease.State // the agent's record, when a redelivery read it already
	if !job.Urgent && job.Attempt > 1 {
		// A redelivery, most often of an event deferred for the cooldown: the first delivery
		// stored its messages and registered its conversation, so while the cooldown runs it
		// waits again at the cost of one KV read, no SQL. (Had that delivery failed before
		// registering, waiting once more still drops nothing: it registers after the cooldown.)
		if st, err := s.d.Leases.Read(ctx, job.AgentID); err == nil {
			if r, wait := s.cooldownResult(job.AgentID, st.CooldownUntil); wait {
				return r
			}
			early = &st
		}
	}
	ev := job.Event
	if ev != nil && len(ev.Messages) > 0 {
		if err := s.ingest(ctx, ev); err != nil {
			if errors.Is(err, store.ErrErased) {
				return erasedResult()
			}
			return transient(fmt.Sprintf("store the event's inline messages: %v", err), job.Attempt, s)
		}
	}
	if !job.Manual && ev != nil {
		reason, skip, err := s.preCheck(ctx, ev)
		if err != nil {
			return transient(err.Error(), job.Attempt, s)
		}
		if skip {
			return Result{Status: store.RunSkipped, Reason: reason, Covered: true}
		}
	}
	// One read of the agent's record says whether its cooldown runs, whether its lease is
	// held and who waits for the cooldown; the lease is taken from exactly that revision, so
	// all that still holds when it is. It is read while the conversation is counted.
	recc := make(chan stateRead, 1)
	if early != nil {
		recc <- stateRead{st: *early}
	} else {
		go func() {
			st, err := s.d.Leases.Read(ctx, job.AgentID)
			recc <- stateRead{st, err}
		}()
	}
	count, last, wm, registered, erased, err := s.convStats(ctx, job.AgentID, job.ConversationID)
	if err != nil {
		return transient(fmt.Sprintf("count messages of conversation %s: %v", job.ConversationID, err), job.Attempt, s)
	}
	if ev != nil && erased != nil && !ev.OccurredAt.After(*erased) {
		// An event from before the agent's erasure (in flight, delayed, redelivered or
		// replayed) brings nothing back: acknowledged, nothing stored, no ledger row. (Its
		// inline messages were refused by the same check in ingest's transaction.)
		return erasedResult()
	}
	min := int64(s.set.Memory.MinMessagesForSummarize)
	if count < min || count == 0 {
		if !job.Manual && ev != nil && int64(ev.MessageCount) >= min && ev.MessageCount > 0 && job.Attempt < waitForMessages {
			return deferred("messages", fmt.Sprintf("the event reports %d messages but %d are stored yet; waiting for them", ev.MessageCount, count),
				s.backoff(job.Attempt))
		}
		return Result{Status: store.RunSkipped, Covered: true,
			Reason: fmt.Sprintf("conversation %s has %d stored messages; min-messages-for-summarize is %d", job.ConversationID, count, min)}
	}
	// Registering the conversation (a watermark row) is what lets any later extraction of the
	// agent cover it: a deferred event's messages are swept up by the next extraction,
	// whichever event runs it. A job that extracts registers it in its commit; one that ends
	// otherwise registers it before it goes (and a dead-lettered one in Handle).
	a.conv = true
	a.registered = registered
	register := func() error {
		if a.registered {
			return nil
		}
		if err := s.register(ctx, job.AgentID, job.ConversationID); err != nil {
			return fmt.Errorf("register conversation %s: %w", job.ConversationID, err)
		}
		a.registered = true
		return nil
	}
	rec := <-recc
	if rec.err != nil {
		return transient(rec.err.Error(), job.Attempt, s)
	}
	st := rec.st
	a.waiter = job.Event != nil && !job.Manual && st.Waiter == job.EventID
	if a.waiter {
		a.behind = len(st.Coalesced)
	}
	// Events acknowledged into the agent's next extraction are swept up by their waiter, or
	// by any job once the waiter is overdue.
	sweep := len(st.Coalesced) > 0 && (a.waiter || !s.waiterLive(st))
	if r, done := s.coveredResult(job, wm, last); done && !sweep {
		if a.waiter {
			return s.stopWaiting(ctx, job, st, r)
		}
		return r
	}
	if !job.Urgent {
		if r, wait := s.cooldownResult(job.AgentID, st.CooldownUntil); wait {
			if err := register(); err != nil {
				return transient(err.Error(), job.Attempt, s)
			}
			return s.wait(ctx, job, st, r)
		}
	}
	// The agent is read once per job, and only for an extraction: its language and time
	// zone serve it (the first sight of an agent seeds its files here). It is read while the
	// lease's write is on its way (an fsync on the server).
	agentc := make(chan agentRead, 1)
	go func() {
		agent, err := s.d.Workspace.EnsureAgent(ctx, job.AgentID)
		agentc <- agentRead{agent, err}
	}()
	l, err := s.d.Leases.AcquireFrom(ctx, job.AgentID, "summarize", st)
	if errors.Is(err, lease.ErrHeld) {
		s.d.Metrics.Contention.Inc()
		if err := register(); err != nil {
			return transient(err.Error(), job.Attempt, s)
		}
		return deferred("lease", err.Error(), s.leaseDelay(job))
	}
	if err != nil {
		return transient(err.Error(), job.Attempt, s)
	}
	a.coalesced = l.Record().Coalesced
	defer func() {
		if a.waiter || job.Settle == nil {
			s.release(ctx, l, job, a, &res)
			return
		}
		// The outcome does not depend on the release: the caller may settle the delivery
		// while the release is on its way (Handle waits for it before it returns).
		a.releasing = make(chan struct{})
		go func() {
			defer close(a.releasing)
			s.release(ctx, l, job, a, nil)
		}()
	}()
	ag := <-agentc
	if ag.err != nil {
		return transient(fmt.Sprintf("load agent %d: %v", job.AgentID, ag.err), job.Attempt, s)
	}
	agent := ag.agent
	wctx, cancel := context.WithCancelCause(l.Context())
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer stop()

	if st.Legacy {
		// Only an older version, which kept intents in KV, can have left one for this agent:
		// it never wrote the records this version writes.
		if err := s.recoverIntent(wctx, job.AgentID); err != nil {
			return s.workErr(wctx, l, job, "recover an interrupted extraction", err)
		}
	}
	// Whatever was committed between the reads above and the lease shows in the batch, which
	// is read under the lease: covered meanwhile, it is empty.
	for round := 0; ; round++ {
		final := !job.Urgent || round+1 >= maxManualRounds
		res = s.extract(wctx, l, job, a, agent, last, st.CooldownUntil, final)
		if res.Retry || res.DeadLetter || res.Covered || final {
			break
		}
		// An urgent request extracts its conversation completely, one transcript budget at a time.
	}
	if job.Force && !a.recorded {
		res.Reason = "force: " + res.Reason
	}
	return res
}

// stateRead is an agent's record read concurrently with other work.
type stateRead struct {
	st  lease.State
	err error
}

// agentRead is an agent read concurrently with other work.
type agentRead struct {
	agent store.Agent
	err   error
}

// filesRead is memory files read concurrently with other work.
type filesRead struct {
	files map[string]workspace.File
	err   error
}

// release releases the lease with what the attempt leaves in the agent's record (the
// cooldown, the coalesced list swept, the waiter standing down or coming back). res is the
// waiter's outcome (nil for any other job): a waiter whose release failed comes back.
func (s *Service) release(ctx context.Context, l *lease.Lease, job Job, a *attempt, res *Result) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := l.Release(rctx, func(r *lease.Record) {
		if !a.cooldown.IsZero() {
			r.CooldownUntil, r.CooldownRun = a.cooldown, a.cooldownRun
		}
		if a.coalescedDone {
			r.Coalesced = nil
		}
		if a.waiter && res != nil {
			if res.Retry {
				// Back after the cooldown (a backlog) or the backoff (a failure).
				r.WaiterUntil = later(r.CooldownUntil, time.Now().Add(res.Delay)).Add(s.waiterGrace())
			} else {
				r.Waiter, r.WaiterUntil = "", time.Time{}
			}
		}
	})
	if err != nil {
		s.d.Log.Warn("release lease", "agent", job.AgentID, "err", err)
		if a.waiter && res != nil && !res.Retry {
			// Still the agent's recorded waiter: never acknowledged as such, it comes back
			// (finding its work done) to stand down.
			res.Retry, res.Delay = true, s.backoff(job.Attempt)
		}
	}
}

// maxManualRounds bounds the transcript-sized extractions one manual request runs.
const maxManualRounds = 20

// coveredResult says whether job is done with, its conversation being extracted up to
// wm already (last is its last message).
func (s *Service) coveredResult(job Job, wm, last int64) (Result, bool) {
	if wm < last || job.Manual && job.Force {
		return Result{}, false
	}
	if job.Manual {
		return Result{Status: store.RunSkipped, Covered: true,
			Reason: fmt.Sprintf("conversation %s is already extracted up to its last message (#%d); nothing new", job.ConversationID, wm)}, true
	}
	return Result{Status: store.RunCompleted, Covered: true,
		Reason: fmt.Sprintf("covered by an earlier extraction (conversation %s extracted up to message #%d)", job.ConversationID, wm)}, true
}

func (s *Service) leaseDelay(job Job) time.Duration {
	d := s.backoff(job.Attempt)
	if job.Urgent {
		return min(d, 2*time.Second)
	}
	// The holder, if a summarizer, sets a cooldown when it finishes: waiting about a
	// cooldown spares deliveries (each counts against MaxDeliver).
	if cd := s.set.Memory.CooldownMinutes.Duration(); cd > d {
		d = jitter(min(cd, time.Minute))
	}
	return d
}

// workErr classifies a failure inside the lease: lease lost and everything else here are
// transient.
func (s *Service) workErr(ctx context.Context, l *lease.Lease, job Job, what string, err error) Result {
	if l.Lost() {
		return transient(fmt.Sprintf("%s: lease lost, nothing written: %v", what, l.Err()), job.Attempt, s)
	}
	if ctx.Err() != nil {
		return transient(fmt.Sprintf("%s: interrupted (%v)", what, context.Cause(ctx)), job.Attempt, s)
	}
	return transient(fmt.Sprintf("%s: %v", what, err), job.Attempt, s)
}

// stepError carries whether an extraction step may succeed when retried.
type stepError struct {
	transient bool
	err       error
}

func (e *stepError) Error() string { return e.err.Error() }
func (e *stepError) Unwrap() error { return e.err }

// maxConflictRounds bounds the re-reads (and LLM re-runs) after a tool edit landed on
// PROFILE.md or MEMORY.md during an extraction.
const maxConflictRounds = 3

// extract runs one extraction over the agent's pending messages (the job's conversation
// first), under the lease.
func (s *Service) extract(ctx context.Context, l *lease.Lease, job Job, a *attempt, agent store.Agent, last int64, cooldown time.Time, final bool) Result {
	agentID := job.AgentID
	run := &a.run
	now := s.d.Now()
	date := now.In(agentLocation(agent)).Format("2006-01-02")
	daily := "memory/" + date + ".md"

	// The memory files are read while the pending messages are.
	names := []string{ProfileFile, MemoryFile, daily}
	filesc := make(chan filesRead, 1)
	go func() {
		files, err := s.d.Workspace.GetMany(ctx, agentID, names)
		filesc <- filesRead{files, err}
	}()
	b, err := s.batchFor(ctx, job, last)
	if err != nil {
		return s.workErr(ctx, l, job, "read pending messages", err)
	}
	run.Conversations = b.conversations()
	if len(b.spans) == 0 {
		res := Result{Status: store.RunCompleted, Covered: true, Reason: "nothing pending (covered meanwhile)"}
		if len(a.coalesced) > 0 {
			// The coalesced events' conversations are covered: their ledger rows are written.
			res, _ = s.commitRun(ctx, l, job, a, b, last, final, cooldown, res, dailyEntry{})
		}
		return res
	}
	if len(b.msgs) == 0 {
		res, _ := s.commitRun(ctx, l, job, a, b, last, final, cooldown, Result{Status: store.RunSkipped,
			Reason: fmt.Sprintf("no user or assistant messages with content among %d new messages (tool and system messages, and blank messages, are not extracted)", b.scanned)},
			dailyEntry{})
		return res
	}

	prov := s.provider()
	for round := 0; ; round++ {
		var cur map[string]workspace.File
		if round == 0 {
			fr := <-filesc
			cur, err = fr.files, fr.err
		} else {
			cur, err = s.d.Workspace.GetMany(ctx, agentID, names)
		}
		if err != nil {
			return s.workErr(ctx, l, job, "read memory files", err)
		}
		dailyBase := cur[daily]
		out, err := prov.extract(ctx, extractInput{
			Language: agent.Language, Date: date, Profile: cur[ProfileFile].Content, Memory: cur[MemoryFile].Content,
			Daily: cur[daily].Content, Messages: b.msgs, Conversations: len(b.spans),
		})
		run.Provider, run.Model = out.Provider, out.Model
		run.TokensIn += out.TokensIn
		run.TokensOut += out.TokensOut
		if err != nil {
			var se *stepError
			if errors.As(err, &se) && !se.transient && !l.Lost() && ctx.Err() == nil {
				return permanent(err.Error())
			}
			res := s.workErr(ctx, l, job, "extract", err)
			if ra, ok := llm.RetryAfter(err); ok && res.Retry {
				// A rate-limited provider said when to come back: not sooner (within the cap).
				res.Delay = max(res.Delay, min(ra, s.set.BackoffMax))
				res.Reason += fmt.Sprintf(" (the endpoint asked to retry after %s)", ra)
			}
			return res
		}
		var writes []coreWrite
		var refusals []refusal
		if out.ShouldUpdate {
			writes, refusals = s.planCoreWrites(out, cur)
		}

		entry := ""
		if out.ShouldUpdate {
			entry = strings.TrimSpace(guard.Redact(out.DailyEntry))
		}
		if s.hookBeforeCommit != nil {
			if err := s.hookBeforeCommit(); err != nil {
				return s.workErr(ctx, l, job, "before the commit", err)
			}
		}
		var next time.Time
		cooldownRun := cooldown
		if cd := s.set.Memory.CooldownMinutes.Duration(); out.Provider == ProviderLLM && cd > 0 {
			next = time.Now().Add(cd).UTC()
			cooldownRun = next
		}

		var files []string
		for _, w := range writes {
			files = append(files, w.name)
		}
		res := Result{Status: store.RunCompleted, FilesChanged: files}
		summary := fmt.Sprintf("extracted %d messages from %d conversations with the %s provider", len(b.msgs), len(b.spans), out.Provider)
		switch {
		case !out.ShouldUpdate:
			res.Status = store.RunSkipped
			res.Reason = "the model found nothing worth remembering: " + out.Reason
		case len(refusals) > 0:
			res.Status = store.RunRefused
			reasons := make([]string, len(refusals))
			for i, r := range refusals {
				reasons[i] = r.reason
			}
			res.Reason = summary + "; refused: " + strings.Join(reasons, "; ")
		default:
			res.Reason = summary
			if out.Reason != "" {
				res.Reason += ": " + out.Reason
			}
		}
		res, committed := s.commitRun(ctx, l, job, a, b, last, final, cooldownRun, res,
			dailyEntry{text: entry, file: daily, date: date, base: dailyBase, core: writes})
		if res.conflict {
			// A tool or API edit of PROFILE.md or MEMORY.md landed during the call: nothing of
			// this extraction was committed; ask again with the files as they are now.
			if round+1 >= maxConflictRounds {
				return transient(fmt.Sprintf("PROFILE.md or MEMORY.md changed during each of %d extractions; retrying later", maxConflictRounds), job.Attempt, s)
			}
			s.d.Log.Info("memory file changed during extraction; re-reading and extracting again", "agent", agentID, "round", round+1)
			continue
		}
		if committed {
			for _, w := range writes {
				s.d.Metrics.CoreChanges.WithLabelValues(w.name, w.form, "written").Inc()
			}
			for _, r := range refusals {
				s.d.Metrics.CoreChanges.WithLabelValues(r.name, r.form, "refused").Inc()
			}
		}
		if committed && !next.IsZero() {
			// Committed: the agent's next LLM extraction waits for the cooldown, written into its
			// record as the lease is released.
			a.cooldown, a.cooldownRun = next, run.RunID
		}
		return res
	}
}

// refusal is a core file's change that is not written, and why.
type refusal struct{ name, form, reason string }

// coreWrite is a new PROFILE.md or MEMORY.md, written in the extraction's commit against
// the version the extraction read.
type coreWrite struct {
	name, text string
	expect     int64
	// form is how the model gave it: "edits" or "whole".
	form string
}

// planCoreWrites turns the model's answer into the core files' new contents: a file's edits
// applied to the content read for this round (all or nothing), or its whole new content;
// redacted, trimmed and checked by the rewrite guard. What cannot be written is a refusal
// with its reason; the LLM is not asked again for it (docs/pipeline.md, "Edits").
func (s *Service) planCoreWrites(out extractOutput, cur map[string]workspace.File) ([]coreWrite, []refusal) {
	var writes []coreWrite
	var refusals []refusal
	for _, f := range []struct {
		name, text, field string
		edits             []memedit.Edit
	}{{ProfileFile, out.ProfileUpdate, "profile_edits", out.ProfileEdits}, {MemoryFile, out.MemoryUpdate, "memory_edits", out.MemoryEdits}} {
		old, exists := cur[f.name]
		form := "whole"
		refuse := func(reason string) {
			refusals = append(refusals, refusal{name: f.name, form: form, reason: reason})
		}
		if len(f.edits) > 0 {
			form = "edits"
			applied, err := memedit.Apply(old.Content, f.edits)
			if err != nil {
				refuse(f.name + ": " + f.field + " refused, file unchanged: " + err.Error())
				continue
			}
			f.text = applied
		}
		text := strings.TrimSpace(guard.Redact(f.text))
		if text == "" {
			continue
		}
		text += "\n"
		if strings.TrimSpace(old.Content) == strings.TrimSpace(text) {
			continue
		}
		base := old.Content
		if workspace.IsSeed(f.name, base) {
			// The seeded template holds no user information: replacing it loses nothing.
			base = ""
		}
		if err := guard.CheckRewrite(base, text, out.Truncated); err != nil {
			refuse(f.name + ": " + err.Error())
			continue
		}
		// Checked here, not in the commit, so that a file the workspace would refuse is a
		// refusal of that file and not a failure of the whole extraction.
		if max := s.d.Workspace.MaxBytes(); len(text) > max {
			refuse(fmt.Sprintf("%s: the new content is %d bytes; at most %d allowed", f.name, len(text), max))
			continue
		}
		if !utf8.ValidString(text) {
			refuse(f.name + ": the new content is not valid UTF-8")
			continue
		}
		expect := workspace.CreateOnly
		if exists {
			expect = old.Version
		}
		writes = append(writes, coreWrite{name: f.name, text: text, expect: expect, form: form})
	}
	return writes, refusals
}

// dailyEntry is what an extraction appends to the day's note (nothing when text is empty).
type dailyEntry struct {
	text, file, date string
	// base is the note as the extraction read it (version 0: none yet); the append starts
	// from it rather than reading the note again in the commit.
	base workspace.File
	// core is PROFILE.md and MEMORY.md as the extraction changes them, written in the same
	// transaction against the versions read (a conflict rolls the whole commit back).
	core []coreWrite
}

// errCoreConflict: a core file changed since the extraction read it; nothing was committed.
var errCoreConflict = errors.New("a memory file changed during the extraction")

// commitRun commits an extraction in one transaction: it appends the daily entry (once per
// message range: its effect key), moves the watermarks from exactly where the batch started,
// raises the agent's fencing value to this lease's token, and, when this extraction is the
// job's outcome (final, or covering its conversation), writes the job's ledger row. A holder
// that lost its lease, or a batch overlapping one applied meanwhile, fails as a whole. It
// reports whether the extraction committed.
func (s *Service) commitRun(_ context.Context, l *lease.Lease, job Job, a *attempt, b batch, last int64, final bool,
	cooldown time.Time, res Result, entry dailyEntry) (Result, bool) {
	agentID := job.AgentID
	res.Covered = b.covers(job.ConversationID, last)
	// A batch that left none of the agent's pending messages out covers the coalesced events.
	sweep := len(a.coalesced) > 0 && !b.partial
	if a.waiter && len(a.coalesced) > 0 && b.partial {
		// The waiter stays until the coalesced events are covered too.
		res.Covered = false
	}
	if !res.Covered && !job.Urgent {
		// The conversation had more new messages than one transcript holds: the rest goes
		// into the next extraction after the cooldown.
		res.Retry, res.Deferral = true, "backlog"
		res.Delay = max(time.Until(cooldown), 0) + jitter(minDeferral)
		res.Reason += "; more messages of this conversation remain, deferred to the next extraction"
	}
	record := final || res.Covered || res.Retry
	if record && job.Force {
		res.Reason = "force: " + res.Reason
	}
	// What the model answered is committed even when the worker is stopping (the caller's
	// context is not used), so that a graceful stop never throws away an LLM call's work.
	// Only a lost lease stops it.
	ctx, cancel := context.WithTimeout(l.Context(), s.set.DBTimeout)
	defer cancel()
	// The core files the transaction wrote (the last attempt's), announced after it commits.
	var written []workspace.File
	// The outcome, and so the ledger row, is settled before the transaction that records it.
	inTx := func(out *Result) func(tx *gorm.DB) error {
		if record {
			*out = s.settle(job, a, *out)
		}
		return func(tx *gorm.DB) error {
			if err := s.commitTx(tx, l, agentID, b.spans); err != nil {
				return err
			}
			written = written[:0]
			for _, w := range entry.core {
				f, _, err := s.d.Workspace.WriteTx(tx, agentID, w.name, w.text, w.expect,
					workspace.Change{Actor: store.ActorSummarizer, Ref: a.run.RunID})
				if errors.Is(err, workspace.ErrConflict) {
					return fmt.Errorf("%w: %w", errCoreConflict, err)
				}
				if err != nil {
					return fmt.Errorf("write %s: %w", w.name, err)
				}
				written = append(written, f)
			}
			if sweep {
				if err := s.recordCoalesced(tx, job.AgentID, a); err != nil {
					return err
				}
			}
			if !record {
				return nil
			}
			_, err := s.d.Ledger.RecordTx(tx, a.run)
			return err
		}
	}
	done := func(out Result) Result {
		a.recorded = record
		a.coalescedDone = sweep
		for i := range written {
			// After the commit, as workspace.Write does: the recall index, MCP watchers and
			// the budget check.
			s.d.Workspace.Committed(ctx, &written[i], store.ActorSummarizer)
		}
		return out
	}
	conflicted := func(err error) (Result, bool) {
		s.d.Log.Info("memory file changed during extraction; nothing committed", "agent", agentID, "err", err)
		return Result{conflict: true}, false
	}
	if entry.text != "" {
		key := effectKey(agentID, b.spans)
		appended := res
		appended.FilesChanged = append(append([]string(nil), res.FilesChanged...), entry.file)
		_, err := s.d.Workspace.Append(ctx, agentID, entry.file, entry.text+"\n", "# "+entry.date+"\n\n",
			workspace.Change{Actor: store.ActorSummarizer, Ref: a.run.RunID, EffectKey: key, InTx: inTx(&appended), Base: &entry.base})
		switch {
		case errors.Is(err, errCoreConflict):
			return conflicted(err)
		case errors.Is(err, workspace.ErrAlreadyApplied):
			s.d.Log.Info("daily entry already appended for these messages", "agent", agentID, "key", key)
		case err != nil:
			return s.workErr(ctx, l, job, "append to "+entry.file, err), false
		default:
			return done(appended), true
		}
	}
	if err := s.d.DB.WithContext(ctx).Transaction(inTx(&res)); err != nil {
		if errors.Is(err, errCoreConflict) {
			return conflicted(err)
		}
		return s.workErr(ctx, l, job, "advance watermarks", err), false
	}
	return done(res), true
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// agentLocation is the agent's time zone (UTC when it names none that loads).
func agentLocation(a store.Agent) *time.Location {
	if a.Timezone == "" || a.Timezone == "Local" {
		return time.Local
	}
	loc, err := time.LoadLocation(a.Timezone)
	if err != nil {
		return time.UTC
	}
	return loc
}
