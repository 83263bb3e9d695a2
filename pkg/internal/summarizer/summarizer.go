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
// The application logic is Service.Handle (no NATS in it), whose steps (admit, lease,
// batch, ask, write, commit) read in order in extraction.go; a Job's Kind gives its Policy
// (job.go). The commit is one unit of work (store.Units) that the repositories join:
// conversation (watermarks), workspace (the files), ledger and fence. Worker is the
// JetStream port that feeds it deliveries and maps its Result to ack, delayed NAK or dead
// letter.
package summarizer

import (
	"context"
	"fmt"
	"github.com/matememory/matememory/pkg/api"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/matememory/matememory/pkg/internal/conversation"

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
	// Units opens the unit of work an extraction commits in.
	Units *store.Units
	// Messages are the conversations' messages and their extraction watermarks.
	Messages  *conversation.Store
	Workspace *workspace.Service
	Ledger    *ledger.Ledger
	// Leases is the per-agent record (lease and cooldown) in bus.BucketLease.
	Leases *lease.Manager
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
	// consBackoff says which core files the model is not asked to consolidate for now.
	consBackoff consolidationBackoff

	// hookBeforeCommit, set by tests, runs just before the commit's unit of work (the daily
	// entry, the core files, the watermarks); an error simulates a crash there.
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
	// contextLength: the model answered that the prompt exceeds its context (the core
	// files are fitted and the model asked again).
	contextLength bool
}

// erasedResult is the outcome of an event of an agent erased after it happened.
func erasedResult() Result {
	return Result{Status: store.RunSkipped, Reason: "the agent was erased after this event; nothing of it is kept", Covered: true, unrecorded: true}
}

// Final reports whether the job is done with (not to be retried).
func (r Result) Final() bool { return !r.Retry }

func (s *Service) backoff(attempt int) time.Duration { return s.retryBackoff().Delay(attempt) }

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
	// budgets are the agent's core-file budgets, read with the agent.
	budgets workspace.AgentBudgets
	// conv is set once the job's conversation passed the checks that let it take part in
	// extraction; registered says whether it has a watermark (the extraction's commit
	// gives it one).
	conv, registered bool
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
	if !job.policy().Retried && res.Retry && res.Status == store.RunFailed {
		// The coalesced events stay listed in the agent's record: the next sweep tries again,
		// and a long outage does not fill the dead-letter queue with sweeps.
		res.Retry, res.Delay = false, 0
		res.Reason += "; the next sweep tries again"
	}
	if res.Retry && job.LastAttempt {
		res = Result{Status: store.RunFailed, DeadLetter: true, FilesChanged: res.FilesChanged, Covered: res.Covered,
			Reason: fmt.Sprintf("gave up after %d deliveries: %s", job.Attempt, res.Reason)}
	}
	if job.policy().Replay {
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
	a.run.Status, a.run.Reason = api.RunStatus(res.Status), res.Reason
	a.run.FilesChanged = res.FilesChanged
	a.run.LatencyMs = time.Since(a.start).Milliseconds()
	res.RunID = a.run.RunID
	return res
}

// waitForMessages is how many deliveries an event whose messages are not stored yet (the
// chat service stores them concurrently) is deferred before it is skipped as too short.
const waitForMessages = 3

// tooFew ends a job whose conversation has fewer stored messages than an extraction needs:
// skipped, or, for an event that reports enough of them, deferred while they are stored.
func (s *Service) tooFew(job Job, count int64) (Result, bool) {
	min := int64(s.set.Memory.MinMessagesForSummarize)
	if count >= min && count > 0 {
		return Result{}, false
	}
	if ev := job.Event; job.policy().Event && int64(ev.MessageCount) >= min && ev.MessageCount > 0 && job.Attempt < waitForMessages {
		return deferred("messages", fmt.Sprintf("the event reports %d messages but %d are stored yet; waiting for them", ev.MessageCount, count),
			s.backoff(job.Attempt)), true
	}
	return Result{Status: store.RunSkipped, Covered: true,
		Reason: fmt.Sprintf("conversation %s has %d stored messages; min-messages-for-summarize is %d", job.ConversationID, count, min)}, true
}

// registerOnce registers the job's conversation (a watermark row at message 0) for a job
// that ends without extracting (it waits for the cooldown, is coalesced, or finds the lease
// held), so that the agent's next extraction covers it; an extraction registers the
// conversation it extracts in its own commit instead.
func (s *Service) registerOnce(ctx context.Context, job Job, a *attempt) error {
	if a.registered {
		return nil
	}
	if err := s.d.Messages.Register(ctx, job.AgentID, job.ConversationID, s.d.Now()); err != nil {
		return fmt.Errorf("register conversation %s: %w", job.ConversationID, err)
	}
	a.registered = true
	return nil
}

// stateRead is an agent's record read concurrently with other work.
type stateRead struct {
	st  lease.State
	err error
}

// agentRead is an agent read concurrently with other work.
type agentRead struct {
	agent   store.Agent
	budgets workspace.AgentBudgets
	err     error
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
	if wm < last || job.forced() {
		return Result{}, false
	}
	if !job.policy().Event {
		return Result{Status: store.RunSkipped, Covered: true,
			Reason: fmt.Sprintf("conversation %s is already extracted up to its last message (#%d); nothing new", job.ConversationID, wm)}, true
	}
	return Result{Status: store.RunCompleted, Covered: true,
		Reason: fmt.Sprintf("covered by an earlier extraction (conversation %s extracted up to message #%d)", job.ConversationID, wm)}, true
}

func (s *Service) leaseDelay(job Job) time.Duration {
	d := s.backoff(job.Attempt)
	if job.policy().Urgent {
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
func (s *Service) planCoreWrites(out extractOutput, cur map[string]workspace.File, budgets workspace.AgentBudgets) ([]coreWrite, []refusal) {
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
		// refusal of that file and not a failure of the whole extraction. A file with a
		// budget is fitted to it after the answer (fit), without the model: not refused.
		budget := budgets.MemoryTokens
		if f.name == ProfileFile {
			budget = budgets.ProfileTokens
		}
		if max := s.d.Workspace.MaxBytes(); len(text) > max && budget <= 0 {
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

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// agentLocation is the agent's time zone (UTC when it names none that loads).
func agentLocation(a store.Agent) *time.Location {
	loc, err := config.LoadLocation(a.Timezone)
	if err != nil {
		return time.UTC
	}
	return loc
}
