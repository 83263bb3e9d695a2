// Package emergence is the spec's 记忆整合 (memory emergence): it reads an agent's recent
// daily notes (memory/YYYY-MM-DD.md) and its MEMORY.md, asks the model what recurs and
// matters, and replaces MEMORY.md with the consolidation when the model says it should.
//
// Requests come from a JetStream stream (MATE_EMERGENCE): one per cron slot from the
// scheduler, one per manual trigger from the API. The worker takes the same per-agent lease
// as the summarizer, so nothing else of the pipeline writes the agent's MEMORY.md meanwhile;
// a request that meets a held lease is redelivered later, never dropped. MEMORY.md is
// written with compare-and-swap on the version read before the model call (a tool edit that
// lands during the call makes the worker re-read and ask again), a rewrite that is empty,
// cut off or drops most of the file is refused, secrets are redacted, the previous version
// stays in the file's history, and every attempt is a row in the run ledger. MEMORY.md is
// kept within the agent's token budget: the prompt states it, what is written is fitted to
// it, and whatever leaves the file goes to the archive note in the same transaction (core.go).
package emergence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/matememory/matememory/pkg/api"
	"github.com/matememory/matememory/pkg/internal/archive"
	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/consolidate"
	"github.com/matememory/matememory/pkg/internal/fence"
	"github.com/matememory/matememory/pkg/internal/guard"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/memedit"
	"github.com/matememory/matememory/pkg/internal/panics"
	"github.com/matememory/matememory/pkg/internal/prompt"
	"github.com/matememory/matememory/pkg/internal/ratelog"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/tracing"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// MemoryFile is the file emergence rewrites.
const MemoryFile = "MEMORY.md"

// ReasonNoLLM is the skip reason when no model is configured: the offline provider never
// touches MEMORY.md (DESIGN.md §2).
const ReasonNoLLM = "no LLM configured"

// Config is what the worker needs from configuration.
type Config struct {
	// Enabled is mate.memory.emergence-enabled; when false every request is skipped.
	Enabled bool
	// DayRange is mate.memory.emergence-day-range: the calendar days, today included, whose
	// daily notes are read (see docs/emergence.md).
	DayRange int
	// MaxDeliver bounds deliveries of a request before it is dead-lettered.
	MaxDeliver int
	// AckWait must exceed the worst-case model call.
	AckWait time.Duration
	// Concurrency is how many agents one worker consolidates at once (default 4).
	Concurrency int
	// Stream is MATE_EMERGENCE as the composition root derives it for every process.
	Stream jetstream.StreamConfig
	// DLQ is created when missing (MATE_DLQ).
	DLQ jetstream.StreamConfig
	// LeaseRetry is the first redelivery delay of a request that met a held lease (default
	// 2 s), doubling up to 30 s.
	LeaseRetry time.Duration
	// RetryBase is the first redelivery delay after a transient failure (default 10 s),
	// doubling up to 5 minutes.
	RetryBase time.Duration
	// MaxNotesBytes bounds the daily notes put in the prompt (default 96 KiB); older notes
	// are left out first.
	MaxNotesBytes int
	// CASAttempts bounds the model calls of one attempt when MEMORY.md keeps changing under
	// it (default 3).
	CASAttempts int
	// HandlerTimeout bounds the handling of one request (default (CASAttempts+1) × AckWait):
	// past it the handler's context is cancelled, so a stalled database or model call gives
	// up, the lease is released and the request is retried.
	HandlerTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.DayRange <= 0 {
		c.DayRange = 7
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = 20
	}
	if c.AckWait <= 0 {
		c.AckWait = 3 * time.Minute
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.LeaseRetry <= 0 {
		c.LeaseRetry = 2 * time.Second
	}
	if c.RetryBase <= 0 {
		c.RetryBase = 10 * time.Second
	}
	if c.MaxNotesBytes <= 0 {
		c.MaxNotesBytes = 96 << 10
	}
	if c.CASAttempts <= 0 {
		c.CASAttempts = 3
	}
	if c.HandlerTimeout <= 0 {
		c.HandlerTimeout = time.Duration(c.CASAttempts+1) * c.AckWait
	}
	return c
}

// ConsumerConfig is the workers' shared durable consumer (bus.EmergenceConsumerConfig):
// created at start-up and bound (DESIGN.md §8), explicit acks, bounded deliveries.
func ConsumerConfig(c Config) jetstream.ConsumerConfig {
	c = c.withDefaults()
	return bus.EmergenceConsumerConfig(c.AckWait, c.MaxDeliver)
}

// Worker consumes emergence requests.
type Worker struct {
	js      jetstream.JetStream
	ws      *workspace.Service
	ledger  *ledger.Ledger
	leases  *lease.Manager
	client  llm.Client
	prompts *prompt.Loader
	cfg     Config
	now     func() time.Time
	log     *slog.Logger
	warn    *ratelog.Logger
	runs    *prometheus.CounterVec
	tracing tracing.Messaging
	guard   *panics.Guard

	mu sync.Mutex
	rt *bus.Runtime[Request]
}

// Option configures a Worker.
type Option func(*Worker)

// WithClock replaces time.Now for dates (which daily notes are recent).
func WithClock(now func() time.Time) Option { return func(w *Worker) { w.now = now } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(w *Worker) { w.log = l } }

// WithGuard recovers, logs and counts a panic while a request is handled (it is then retried
// like a transient failure); without it a guard logs to the worker's logger.
func WithGuard(g *panics.Guard) Option { return func(w *Worker) { w.guard = g } }

// WithTracing starts a consumer span per delivery with m, as a child of the span that
// published the request (its context travels in the message headers), so the model call
// joins the trace of the cron slot or the manual trigger.
func WithTracing(m tracing.Messaging) Option { return func(w *Worker) { w.tracing = m } }

// WithRegistry registers the worker's metrics.
func WithRegistry(reg prometheus.Registerer) Option {
	return func(w *Worker) {
		w.runs = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "matememory_emergence_runs_total",
			Help: "Emergence attempts by outcome (completed, skipped, refused, failed, deferred, dead_lettered).",
		}, []string{"status"})
		reg.MustRegister(w.runs)
	}
}

// NewWorker builds a worker. client nil means no model is configured: requests are
// skipped with ReasonNoLLM. leases must be the per-agent lease bucket (bus.BucketLease) the
// summarizer uses.
func NewWorker(js jetstream.JetStream, ws *workspace.Service, led *ledger.Ledger, leases *lease.Manager,
	client llm.Client, prompts *prompt.Loader, cfg Config, opts ...Option) *Worker {
	w := &Worker{js: js, ws: ws, ledger: led, leases: leases, client: client, prompts: prompts,
		cfg: cfg.withDefaults(), now: time.Now, log: slog.Default()}
	for _, o := range opts {
		o(w)
	}
	// Failed attempts (the LLM down) show at once, then at a bounded rate.
	w.warn = ratelog.New(w.log, 30*time.Second, 5)
	if w.guard == nil {
		w.guard = panics.New(w.log, nil)
	}
	return w
}

// Provision creates MATE_EMERGENCE (and MATE_DLQ when missing) and the durable consumer.
func (w *Worker) Provision(ctx context.Context) error {
	if _, err := bus.EnsureStream(ctx, w.js, w.cfg.Stream); err != nil {
		return err
	}
	// MATE_DLQ belongs to the pipeline; create it only when this process runs alone, so two
	// owners never keep rewriting its settings.
	if _, err := w.js.Stream(ctx, bus.StreamDLQ); errors.Is(err, jetstream.ErrStreamNotFound) {
		if _, err := bus.EnsureStream(ctx, w.js, w.cfg.DLQ); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("look up %s: %w", bus.StreamDLQ, err)
	}
	_, err := bus.EnsureConsumer(ctx, w.js, Stream, ConsumerConfig(w.cfg))
	return err
}

// Start provisions, binds to the durable consumer and consumes until Stop (a handler on
// the message runtime, bus.Runtime).
func (w *Worker) Start(ctx context.Context) error {
	if err := w.Provision(ctx); err != nil {
		return err
	}
	rt, err := bus.Bind(ctx, w.js.Conn(), Stream, Consumer, bus.Handler[Request]{
		Decode:       decode,
		Handle:       w.handle,
		Where:        "emergence.handle",
		Attrs:        func(r Request) []any { return []any{"agent", r.AgentID, "request", r.RequestID} },
		DeadLettered: func(string) { w.count("dead_lettered") },
	}, bus.WithLogger(w.log), bus.WithTracing(w.tracing), bus.WithGuard(w.guard), bus.WithConcurrency(w.cfg.Concurrency),
		bus.WithBackoff(w.retryBackoff()), bus.WithMaxDeliver(w.cfg.MaxDeliver), bus.WithAckWait(w.cfg.AckWait))
	if err != nil {
		return err
	}
	if err := rt.Start(); err != nil {
		return err
	}
	w.mu.Lock()
	w.rt = rt
	w.mu.Unlock()
	return nil
}

// Stop stops taking requests; those in progress are interrupted and handed back for
// another worker (NAKed without delay).
func (w *Worker) Stop() {
	w.mu.Lock()
	rt := w.rt
	w.rt = nil
	w.mu.Unlock()
	if rt != nil {
		rt.Stop()
	}
}

func (w *Worker) count(status string) {
	if w.runs != nil {
		w.runs.WithLabelValues(status).Inc()
	}
}

// inboxPrefix: replies go only to request/reply inboxes, never to arbitrary subjects named
// in a message.
const inboxPrefix = "_INBOX."

var agentSubject = regexp.MustCompile(`^` + regexp.QuoteMeta(bus.SubjectEmergence) + `\.([1-9][0-9]*)$`)

// decode reads a request and checks it against its subject.
func decode(msg jetstream.Msg) (Request, error) {
	var req Request
	m := agentSubject.FindStringSubmatch(msg.Subject())
	if m == nil {
		return req, fmt.Errorf("poison: subject %s is not %s.<agentId>", msg.Subject(), bus.SubjectEmergence)
	}
	if err := json.Unmarshal(msg.Data(), &req); err != nil {
		return req, fmt.Errorf("poison: undecodable request: %v", err)
	}
	if strconv.FormatInt(req.AgentID, 10) != m[1] {
		return req, fmt.Errorf("poison: request for agent %d published on %s", req.AgentID, msg.Subject())
	}
	if req.RequestID == "" {
		req.RequestID = msg.Headers().Get("Nats-Msg-Id")
	}
	if req.RequestID == "" {
		if md, err := msg.Metadata(); err == nil {
			req.RequestID = fmt.Sprintf("seq:%d", md.Sequence.Stream)
		}
	}
	return req, nil
}

// Failure classes: an error is a deferral (the agent's lease is held), or what
// bus.OutcomeOf makes of it (Permanent: dead letter; anything else: retry with backoff).
type action int

const (
	actAck        action = iota // done: completed, skipped or refused
	actDefer                    // the agent's lease is held: redeliver soon
	actRetry                    // transient failure: redeliver with backoff
	actDeadLetter               // permanent failure: nothing to gain from retrying
)

// permanent marks failures that retrying cannot fix (a 400 from the model, an answer that
// is not the JSON contract).
func permanent(err error) error { return bus.Permanent(err) }

func classify(err error) action {
	switch {
	case err == nil:
		return actAck
	case errors.Is(err, lease.ErrHeld):
		return actDefer
	case bus.IsPermanent(err):
		return actDeadLetter
	default:
		return actRetry
	}
}

// retryBackoff is the delay after a transient failure: RetryBase doubling up to 5 minutes.
func (w *Worker) retryBackoff() bus.Backoff {
	return bus.Backoff{Initial: w.cfg.RetryBase, Max: 5 * time.Minute}
}

// leaseBackoff is the delay after meeting a held lease: LeaseRetry doubling up to 30 s.
func (w *Worker) leaseBackoff() bus.Backoff {
	return bus.Backoff{Initial: w.cfg.LeaseRetry, Max: 30 * time.Second}
}

// handle consolidates one request and maps what happened to an outcome.
func (w *Worker) handle(ctx context.Context, d *bus.Delivery[Request]) bus.Outcome {
	req := d.Value
	hctx, cancel := context.WithTimeout(ctx, w.cfg.HandlerTimeout)
	run, err := w.consolidate(hctx, req, d.Attempt)
	cancel()
	d.Span.SetAttributes(attribute.Int64("matememory.agent_id", req.AgentID), attribute.String("matememory.run.status", string(run.Status)))
	if act := classify(err); act == actRetry || act == actDeadLetter {
		d.Span.RecordError(err)
		d.Span.SetStatus(codes.Error, err.Error())
	}
	return w.outcome(req, run, err, d.Attempt, d.LastAttempt)
}

// outcome is the request's outcome; it answers a manual caller on the way.
func (w *Worker) outcome(req Request, run ledger.Run, err error, attempt int, last bool) bus.Outcome {
	switch classify(err) {
	case actDefer:
		if last {
			reason := fmt.Sprintf("agent %d's lease was held at each of %d deliveries (last: %v)", req.AgentID, attempt, err)
			run.Status, run.Reason = store.RunFailed, reason+"; dead-lettered"
			w.reply(req, run, false)
			return bus.Reject(reason)
		}
		return bus.RetryAfter(w.leaseBackoff().Delay(attempt), err.Error())
	case actRetry:
		if last {
			run.Reason += fmt.Sprintf("; failed at each of %d deliveries, dead-lettered", attempt)
			w.reply(req, run, false)
			return bus.Reject(fmt.Sprintf("failed at each of %d deliveries; last: %v", attempt, err))
		}
		w.reply(req, run, true)
		o := bus.OutcomeOf(err, attempt, w.retryBackoff())
		if ra, ok := llm.RetryAfter(err); ok {
			// A rate-limited provider said when to come back: not sooner (within the cap).
			o.Delay = max(o.Delay, min(ra, 5*time.Minute))
		}
		return o
	case actDeadLetter:
		run.Reason += "; dead-lettered"
	}
	w.reply(req, run, false)
	return bus.OutcomeOf(err, attempt, w.retryBackoff())
}

func (w *Worker) reply(req Request, run ledger.Run, retrying bool) {
	if req.ReplyTo == "" || !strings.HasPrefix(req.ReplyTo, inboxPrefix) || run.RunID == "" {
		return
	}
	data, _ := json.Marshal(Outcome{RequestID: req.RequestID, RunID: run.RunID, Status: string(run.Status),
		Reason: run.Reason, Retrying: retrying})
	if err := w.js.Conn().Publish(req.ReplyTo, data); err != nil {
		w.log.Warn("emergence: reply", "request", req.RequestID, "err", err)
	}
}

// consolidate runs one attempt and records it in the ledger.
func (w *Worker) consolidate(ctx context.Context, req Request, attempt int) (ledger.Run, error) {
	start := time.Now()
	run := ledger.Run{RunID: uuid.NewString(), Kind: ledger.KindEmergence, AgentID: req.AgentID,
		EventID: req.RequestID, Attempt: attempt, Provider: "offline"}
	if w.client != nil {
		run.Provider, run.Model = "llm", w.client.Model()
	}
	err := w.attempt(ctx, req, &run)
	run.LatencyMs = time.Since(start).Milliseconds()
	switch classify(err) {
	case actAck:
	case actDefer:
		run.Status, run.Reason = store.RunDeferred, err.Error()+"; redelivered later"
	default:
		run.Status, run.Reason = store.RunFailed, err.Error()
	}
	w.count(string(run.Status))
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, rerr := w.ledger.Record(rctx, run); rerr != nil {
		w.log.Error("emergence: record run", "agent", req.AgentID, "err", rerr)
		if err == nil {
			// The outcome must be on record: try the whole request again.
			return run, rerr
		}
	}
	if run.Status == store.RunFailed {
		w.warn.Warn("emergence: attempt failed", "agent", req.AgentID, "request", req.RequestID, "run", run.RunID,
			"attempt", attempt, "cause", run.Reason)
	} else {
		w.log.Info("emergence: attempt", "agent", req.AgentID, "request", req.RequestID, "run", run.RunID,
			"status", run.Status, "reason", run.Reason)
	}
	return run, err
}

// attempt does the work and fills run's status, reason, tokens and files; an error is a
// deferral or a failure (classify).
func (w *Worker) attempt(ctx context.Context, req Request, run *ledger.Run) error {
	done := func(status, reason string) error {
		// The reason quotes the model: secrets masked before the ledger and the caller.
		run.Status, run.Reason = api.RunStatus(status), guard.Redact(reason)
		return nil
	}
	if !w.cfg.Enabled {
		return done(store.RunSkipped, "emergence is disabled (mate.memory.emergence-enabled=false)")
	}
	if w.client == nil {
		return done(store.RunSkipped, ReasonNoLLM)
	}
	agent, budgets, err := w.ws.EnsureAgentBudgets(ctx, req.AgentID)
	if err != nil {
		if errors.Is(err, workspace.ErrInvalid) {
			return permanent(err)
		}
		return err
	}
	held, err := w.leases.Acquire(ctx, req.AgentID, "emergence "+req.RequestID)
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := held.Release(rctx); err != nil {
			w.log.Warn("emergence: release lease", "agent", req.AgentID, "err", err)
		}
	}()
	lctx := held.Context()

	notes, window, err := w.notes(lctx, agent)
	if err != nil {
		return err
	}
	if len(notes) == 0 {
		return done(store.RunSkipped, fmt.Sprintf("no daily notes from %s to %s (the last %d days)", window.from, window.to, w.cfg.DayRange))
	}
	rendered, left := renderNotes(notes, w.cfg.MaxNotesBytes)
	p := prepared{agent: agent, budgets: budgets, win: window, notes: rendered, n: len(notes) - left, held: held}
	if left > 0 {
		p.suffix = fmt.Sprintf(" (%d older notes left out: over the %d-byte prompt budget)", left, w.cfg.MaxNotesBytes)
	}
	for try := 1; try <= w.cfg.CASAttempts; try++ {
		status, reason, err := w.rewrite(lctx, req, p, run)
		if errors.Is(err, errChanged) {
			// A tool or API edit landed during the model call: ask again with what is there now.
			w.log.Info("emergence: MEMORY.md changed during the model call; asking again", "agent", req.AgentID, "try", try)
			continue
		}
		if err != nil {
			return err
		}
		return done(status, reason)
	}
	return fmt.Errorf("MEMORY.md changed during each of %d model calls; will retry", w.cfg.CASAttempts)
}

// prepared is what one attempt asks the model about: the agent and its budgets, the notes'
// window, the rendered notes (n of them) and what the reason says about notes left out,
// under held.
type prepared struct {
	agent   store.Agent
	budgets workspace.AgentBudgets
	win     window
	notes   string
	n       int
	suffix  string
	held    *lease.Lease
}

// errChanged: MEMORY.md changed between its read and the write (compare-and-swap lost).
var errChanged = errors.New("MEMORY.md changed during the model call")

// rewrite reads MEMORY.md, asks the model, checks its answer and writes it against the
// version read; it returns the run's status and reason, or errChanged to ask again.
func (w *Worker) rewrite(ctx context.Context, req Request, p prepared, run *ledger.Run) (string, string, error) {
	read, err := w.readMemory(ctx, req.AgentID)
	if err != nil {
		return "", "", err
	}
	cur := read.Content
	// A MEMORY.md too large to put in a prompt is fitted by the service's demotion first,
	// with no model answer (what it demotes is archived with the write); one the model
	// answers context_length_exceeded to is fitted so and asked about again, once.
	budget := p.budgets.MemoryTokens
	if budget > 0 && consolidate.TooLargeToAsk(w.ws.CountTokens(cur), budget) {
		cur = w.fit(ctx, p, read, cur, archive.ReasonDemotion, run.RunID).content
	}
	reply, truncated, err := w.ask(ctx, p, cur, run)
	if err != nil && llm.ContextLengthExceeded(err) && budget > 0 {
		if fitted := w.fit(ctx, p, read, cur, archive.ReasonDemotion, run.RunID).content; fitted != cur {
			cur = fitted
			reply, truncated, err = w.ask(ctx, p, cur, run)
		}
	}
	if err != nil {
		return "", "", err
	}
	if !reply.ShouldUpdate {
		if cur == read.Content {
			return store.RunSkipped, "the model saw nothing to consolidate: " + oneLine(reply.Reason) + p.suffix, nil
		}
		// The service's fit is written all the same: the file was too large to ask about.
		reply = Reply{ShouldUpdate: true, MemoryContent: cur, Reason: "MEMORY.md fitted to its budget by the service (the model changed nothing): " + reply.Reason}
	}
	proposed, form := reply.MemoryContent, archive.ReasonRewrite
	if len(reply.MemoryEdits) > 0 {
		// Edits apply to the file as read for this call (the version written against
		// below), all or nothing; a missing or ambiguous anchor refuses them without
		// asking the model again (docs/emergence.md).
		applied, err := memedit.Apply(cur, reply.MemoryEdits)
		if err != nil {
			return store.RunRefused, "memory_edits refused: " + err.Error() + "; MEMORY.md left unchanged", nil
		}
		proposed, form = applied, archive.ReasonEdit
	}
	// Trimmed as the summarizer trims memory_update: a model's leading blank line or
	// trailing spaces never reach MEMORY.md.
	content := strings.TrimSpace(guard.Redact(proposed))
	base := cur
	if workspace.IsSeed(MemoryFile, cur) {
		// The seeded template holds no user information: replacing it loses nothing.
		base = ""
	}
	if strings.TrimSpace(content) == strings.TrimSpace(read.Content) {
		return store.RunSkipped, "the consolidation equals the current MEMORY.md: " + oneLine(reply.Reason), nil
	}
	// The budget holds whatever the model answered; what leaves the file is archived.
	fit := w.fit(ctx, p, read, content, form, run.RunID)
	// The rewrite guard: a file over its budget, which the prompt asks to shrink, is judged
	// by what the change keeps in the core file and the archive together (an answer that fits
	// it by leaving entries to the archive loses nothing); a file within it, by the core file
	// alone. An empty or cut-off answer is refused either way.
	kept := content
	if b := p.budgets.MemoryTokens; b > 0 && w.ws.CountTokens(base) > b && strings.TrimSpace(content) != "" {
		kept = content + "\n" + fit.removed
	}
	if err := guard.CheckRewrite(base, kept, truncated); err != nil {
		return store.RunRefused, err.Error() + "; MEMORY.md left unchanged", nil
	}
	notes, err := w.write(ctx, req.AgentID, fit, read.Version, p.held, run)
	if err != nil {
		return "", "", err
	}
	run.FilesChanged = []string{MemoryFile}
	for _, n := range notes {
		run.FilesChanged = append(run.FilesChanged, n.Filename)
	}
	return store.RunCompleted, fmt.Sprintf("MEMORY.md consolidated from %d daily notes (%s to %s): %s%s%s",
		p.n, p.win.from, p.win.to, oneLine(reply.Reason), p.suffix, demotedNote(fit, p.budgets.MemoryTokens)), nil
}

// write stores f's MEMORY.md against version expect, fenced by held, and appends f's blocks
// to the archive notes in the same transaction; it returns the archive notes written (none
// when nothing was archived), or errChanged when MEMORY.md changed meanwhile.
func (w *Worker) write(ctx context.Context, agentID int64, f fitted, expect int64, held *lease.Lease, run *ledger.Run) ([]workspace.File, error) {
	// Fencing: a worker that lost its lease writes nothing.
	if err := held.Err(); err != nil {
		return nil, err
	}
	var notes []workspace.File
	inTx := func(tx *store.Tx) error {
		if err := fence.InTx(held, agentID)(tx); err != nil {
			return err
		}
		var err error
		notes, err = w.archiveInTx(tx, agentID, f, run.RunID)
		return err
	}
	mem, created, err := w.ws.Write(ctx, agentID, MemoryFile, f.content, expect,
		workspace.Change{Actor: store.ActorEmergence, Ref: run.RunID, InTx: inTx})
	var archErr *archiveError
	if errors.As(err, &archErr) {
		return nil, err
	}
	if errors.Is(err, workspace.ErrConflict) || errors.Is(err, workspace.ErrNotFound) {
		return nil, errChanged
	}
	if err != nil {
		return nil, err
	}
	for i := range notes {
		// The archive notes were written in MEMORY.md's unit: their hooks (the recall index) run now.
		w.ws.Committed(ctx, &notes[i], store.ActorEmergence)
	}
	if created {
		// MEMORY.md had been deleted: the re-created file is a core file again.
		on, order := true, 3
		if _, err := w.ws.SetFlags(ctx, agentID, MemoryFile, &on, &order, mem.Version,
			workspace.Change{Actor: store.ActorEmergence, Ref: run.RunID}); err != nil {
			w.log.Warn("emergence: enable re-created MEMORY.md", "agent", agentID, "err", err)
		}
	}
	return notes, nil
}

// readMemory returns MEMORY.md as read, whose version is the one to write against: a file of
// version 0 (workspace.CreateOnly) when it does not exist.
func (w *Worker) readMemory(ctx context.Context, agentID int64) (workspace.File, error) {
	f, err := w.ws.Get(ctx, agentID, MemoryFile)
	if errors.Is(err, workspace.ErrNotFound) {
		return workspace.File{File: api.File{AgentID: agentID, Filename: MemoryFile, Version: workspace.CreateOnly}}, nil
	}
	if err != nil {
		return workspace.File{}, err
	}
	return f, nil
}

func (w *Worker) ask(ctx context.Context, p prepared, memory string, run *ledger.Run) (Reply, bool, error) {
	lang, win, notes := p.agent.Language, p.win, p.notes
	system, err := w.prompts.Render("memory/emergence-system", lang, map[string]string{})
	if err != nil {
		return Reply{}, false, permanent(err)
	}
	user, err := w.prompts.Render("memory/emergence-user", lang, map[string]string{
		"date": win.to, "day_range": strconv.Itoa(w.cfg.DayRange), "note_count": strconv.Itoa(p.n),
		"memory_content": memory, "daily_notes": notes,
		// The budget (issue 22): MateClaw .txt templates, which do not name these, render as before.
		"memory_tokens": strconv.Itoa(w.ws.CountTokens(memory)), "budget_tokens": strconv.Itoa(p.budgets.MemoryTokens),
	})
	if err != nil {
		return Reply{}, false, permanent(err)
	}
	resp, err := w.client.Complete(ctx, llm.Request{
		Messages:  []llm.Message{{Role: "system", Content: system}, {Role: "user", Content: user}},
		MaxTokens: outputBudget(memory, notes, w.asksForEdits(lang, system)), JSON: true,
	})
	run.TokensIn += resp.TokensIn
	run.TokensOut += resp.TokensOut
	if resp.Model != "" {
		run.Model = resp.Model
	}
	if err != nil {
		if ctx.Err() != nil {
			if cause := context.Cause(ctx); cause != nil {
				return Reply{}, false, fmt.Errorf("model call stopped: %w", cause)
			}
		}
		if llm.Transient(err) {
			return Reply{}, false, fmt.Errorf("model call: %w", err)
		}
		return Reply{}, false, permanent(fmt.Errorf("model call refused: %w", err))
	}
	reply, err := ParseReply(resp.Content)
	if err != nil {
		if resp.Truncated {
			// Cut off mid-JSON: refuse like any truncated rewrite rather than fail.
			return Reply{ShouldUpdate: true}, true, nil
		}
		return Reply{}, false, permanent(err)
	}
	return reply, resp.Truncated, nil
}

// outputBudget is the completion limit: room for the whole new MEMORY.md (which replaces
// the old one, so it is at least about as long) plus growth from the notes. Asked for edits,
// the answer grows with the change, which the notes bound, not with MEMORY.md.
func outputBudget(memory, notes string, edits bool) int {
	if edits {
		memory = ""
	}
	// About 3 bytes per token (English ~4, Chinese ~3 per character of 3 bytes).
	est := (len(memory)+len(notes)/4)/3 + 1024
	return min(max(est, 2048), 16384)
}

// asksForEdits reports whether the templates ask for memory_edits; the user template is
// looked at unrendered, so that MEMORY.md or a note that mentions the field does not count.
func (w *Worker) asksForEdits(lang, system string) bool {
	if strings.Contains(system, "memory_edits") {
		return true
	}
	user, err := w.prompts.Load("memory/emergence-user", lang)
	return err == nil && strings.Contains(user, "memory_edits")
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "(no reason given)"
	}
	return clip(s, 500)
}
