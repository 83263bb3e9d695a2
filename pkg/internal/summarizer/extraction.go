package summarizer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/google/uuid"

	"github.com/matememory/matememory/pkg/internal/consolidate"
	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/fence"
	"github.com/matememory/matememory/pkg/internal/guard"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// An extraction, in the order its steps run (each a function below, in this order):
//
//   - admit: is the job's conversation to be extracted, and now? (pre-checks, stored
//     messages, already covered, the agent's cooldown);
//   - lease: take the agent's lease from the record admit read;
//   - batch: read the agent's pending messages above the watermarks (the job's
//     conversation first) and the memory files;
//   - ask: the model (or the offline provider) says what to remember;
//   - write: turn its answer into the core files' new contents, the daily entry and the
//     outcome;
//   - commit: one unit of work, opened here, that the repositories join: the fence check,
//     the watermarks, the daily append, PROFILE.md and MEMORY.md, the ledger rows.
//
// handle runs them; a PROFILE.md or MEMORY.md changed during the model call sends the
// extraction back to batch's file read and ask (at most maxConflictRounds times), and an
// urgent job runs batch to commit again until its conversation is covered.

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
			if err := s.d.Messages.Register(rctx, job.AgentID, job.ConversationID, s.d.Now()); err != nil {
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

// handle runs the steps; Handle records what it came to.
func (s *Service) handle(ctx context.Context, job Job, a *attempt) (res Result) {
	adm, res, done := s.admit(ctx, job, a)
	if done {
		return res
	}
	l, agentc, res, ok := s.lease(ctx, job, a, adm)
	if !ok {
		return res
	}
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
	wctx, cancel := context.WithCancelCause(l.Context())
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer stop()
	// Whatever was committed between admission and the lease shows in the batch, which is
	// read under the lease: covered meanwhile, it is empty.
	for round := 0; ; round++ {
		final := !job.policy().Urgent || round+1 >= maxManualRounds
		a.budgets = ag.budgets
		res = s.extract(wctx, l, job, a, ag.agent, adm, final)
		if res.Retry || res.DeadLetter || res.Covered || final {
			break
		}
		// An urgent job extracts its conversation completely, one transcript at a time.
	}
	if job.forced() && !a.recorded {
		res.Reason = "force: " + res.Reason
	}
	return res
}

// admission is what admit read: the agent's record (the lease is taken from exactly its
// revision, so all that admit decided from it still holds once the lease is) and the job's
// conversation's last message.
type admission struct {
	st   lease.State
	last int64
}

// admit decides whether the job goes on to take the lease. It ends the job (done) when an
// event is skipped by the pre-checks or is from before the agent's erasure, when the
// conversation has too few messages or is covered already, and when the agent's cooldown
// runs or (for a redelivery in the cooldown) still runs, at the cost of one KV read.
func (s *Service) admit(ctx context.Context, job Job, a *attempt) (admission, Result, bool) {
	pol := job.policy()
	early, res, done := s.screen(ctx, job)
	if done {
		return admission{}, res, true
	}
	// One read of the agent's record says whether its cooldown runs, whether its lease is
	// held and who waits for the cooldown. It is read while the conversation is counted.
	recc := make(chan stateRead, 1)
	if early != nil {
		recc <- stateRead{st: *early}
	} else {
		go func() {
			st, err := s.d.Leases.Read(ctx, job.AgentID)
			recc <- stateRead{st, err}
		}()
	}
	p, err := s.d.Messages.Progress(ctx, job.AgentID, job.ConversationID)
	if err != nil {
		return admission{}, transient(err.Error(), job.Attempt, s), true
	}
	if ev := job.Event; ev != nil && p.ErasedAt != nil && !ev.OccurredAt.After(*p.ErasedAt) {
		// An event from before the agent's erasure (in flight, delayed, redelivered or
		// replayed) brings nothing back: acknowledged, nothing stored, no ledger row. (Its
		// inline messages were refused by the same check in the transaction that stores.)
		return admission{}, erasedResult(), true
	}
	if res, done := s.tooFew(job, p.Count); done {
		return admission{}, res, true
	}
	// Registering the conversation (a watermark row) is what lets any later extraction of the
	// agent cover it: a deferred event's messages are swept up by the next extraction,
	// whichever event runs it. A job that extracts registers it in its commit; one that ends
	// otherwise registers it before it goes (and a dead-lettered one in Handle).
	a.conv, a.registered = true, p.Registered
	rec := <-recc
	if rec.err != nil {
		return admission{}, transient(rec.err.Error(), job.Attempt, s), true
	}
	st := rec.st
	a.waiter = pol.Event && st.Waiter == job.EventID
	if a.waiter {
		a.behind = len(st.Coalesced)
	}
	// Events acknowledged into the agent's next extraction are swept up by their waiter, or
	// by any job once the waiter is overdue.
	sweep := len(st.Coalesced) > 0 && (a.waiter || !s.waiterLive(st))
	if r, done := s.coveredResult(job, p.Extracted, p.Last); done && !sweep {
		if a.waiter {
			return admission{}, s.stopWaiting(ctx, job, st, r), true
		}
		return admission{}, r, true
	}
	if !pol.Urgent {
		if r, wait := s.cooldownResult(job.AgentID, st.CooldownUntil); wait {
			if err := s.registerOnce(ctx, job, a); err != nil {
				return admission{}, transient(err.Error(), job.Attempt, s), true
			}
			return admission{}, s.wait(ctx, job, st, r), true
		}
	}
	return admission{st: st, last: p.Last}, Result{}, false
}

// screen is admit's part before the conversation is read: a redelivery in the cooldown
// waits again (one KV read, no SQL; the record it read is returned for admit), an event's
// inline messages are stored, and the event pre-checks run.
func (s *Service) screen(ctx context.Context, job Job) (*lease.State, Result, bool) {
	var early *lease.State
	if !job.policy().Urgent && job.Attempt > 1 {
		// Most often an event deferred for the cooldown: the first delivery stored its
		// messages and registered its conversation. (Had that delivery failed before
		// registering, waiting once more still drops nothing: it registers after the cooldown.)
		if st, err := s.d.Leases.Read(ctx, job.AgentID); err == nil {
			if r, wait := s.cooldownResult(job.AgentID, st.CooldownUntil); wait {
				return nil, r, true
			}
			early = &st
		}
	}
	ev := job.Event
	if ev != nil && len(ev.Messages) > 0 {
		if err := s.d.Messages.Ingest(ctx, ev, s.d.Now()); err != nil {
			if errors.Is(err, store.ErrErased) {
				return nil, erasedResult(), true
			}
			return nil, transient(fmt.Sprintf("store the event's inline messages: %v", err), job.Attempt, s), true
		}
	}
	if job.policy().Event {
		reason, skip, err := s.preCheck(ctx, ev)
		if err != nil {
			return nil, transient(err.Error(), job.Attempt, s), true
		}
		if skip {
			return nil, Result{Status: store.RunSkipped, Reason: reason, Covered: true}, true
		}
	}
	return early, Result{}, false
}

// lease takes the agent's lease from the record admit read, and reads the agent (its
// language and time zone; the first sight of an agent seeds its files; sent on the channel
// returned) while the lease's write is on its way (an fsync on the server). A lease held by
// another worker defers the job.
func (s *Service) lease(ctx context.Context, job Job, a *attempt, adm admission) (*lease.Lease, <-chan agentRead, Result, bool) {
	agentc := make(chan agentRead, 1)
	go func() {
		agent, budgets, err := s.d.Workspace.EnsureAgentBudgets(ctx, job.AgentID)
		agentc <- agentRead{agent, budgets, err}
	}()
	l, err := s.d.Leases.AcquireFrom(ctx, job.AgentID, "summarize", adm.st)
	if errors.Is(err, lease.ErrHeld) {
		s.d.Metrics.Contention.Inc()
		if err := s.registerOnce(ctx, job, a); err != nil {
			return nil, nil, transient(err.Error(), job.Attempt, s), false
		}
		return nil, nil, deferred("lease", err.Error(), s.leaseDelay(job)), false
	}
	if err != nil {
		return nil, nil, transient(err.Error(), job.Attempt, s), false
	}
	a.coalesced = l.Record().Coalesced
	return l, agentc, Result{}, true
}

// extract runs one extraction under the lease: batch, then ask, write and commit, again
// from a fresh read of the memory files when one changed during the model call.
func (s *Service) extract(ctx context.Context, l *lease.Lease, job Job, a *attempt, agent store.Agent, adm admission, final bool) Result {
	date := s.d.Now().In(agentLocation(agent)).Format("2006-01-02")
	daily := "memory/" + date + ".md"
	names := []string{ProfileFile, MemoryFile, daily}
	b, filesc, res, done := s.batch(ctx, l, job, a, adm, final, names)
	if done {
		return res
	}
	for round := 0; ; round++ {
		var files map[string]workspace.File
		var err error
		if round == 0 {
			fr := <-filesc
			files, err = fr.files, fr.err
		} else {
			files, err = s.d.Workspace.GetMany(ctx, job.AgentID, names)
		}
		if err != nil {
			return s.workErr(ctx, l, job, "read memory files", err)
		}
		seen, c, err := s.consolidateFirst(ctx, job, a, agent, date, files)
		if err != nil {
			return s.workErr(ctx, l, job, "consolidate the core files", err)
		}
		out, res, ok := s.ask(ctx, l, job, a, agent, date, b, seen)
		if !ok && res.contextLength && s.fitToContext(ctx, job, a, &c, seen) {
			// The prompt exceeded the model's context: the core files were fitted to their
			// budgets by demotion, and the model is asked again with them.
			out, res, ok = s.ask(ctx, l, job, a, agent, date, b, seen)
		}
		if !ok {
			return res
		}
		p := s.write(out, b, seen, daily, date, a.budgets)
		s.fit(ctx, job, a, c, &p)
		if s.hookBeforeCommit != nil {
			if err := s.hookBeforeCommit(); err != nil {
				return s.workErr(ctx, l, job, "before the commit", err)
			}
		}
		cooldown := adm.st.CooldownUntil
		if !p.next.IsZero() {
			cooldown = p.next
		}
		res, committed := s.commit(l, job, a, b, adm.last, final, cooldown, p)
		if res.conflict {
			// A tool or API edit of PROFILE.md or MEMORY.md landed during the call: nothing of
			// this extraction was committed; ask again with the files as they are now.
			if round+1 >= maxConflictRounds {
				return transient(fmt.Sprintf("PROFILE.md or MEMORY.md changed during each of %d extractions; retrying later", maxConflictRounds), job.Attempt, s)
			}
			s.d.Log.Info("memory file changed during extraction; re-reading and extracting again", "agent", job.AgentID, "round", round+1)
			continue
		}
		if committed {
			s.committed(a, p)
		}
		return res
	}
}

// batch reads what one extraction covers (batchFor) while the memory files are read (sent
// on the channel returned). A batch with nothing to ask the model about ends the extraction
// (done): nothing pending (covered meanwhile), or no message with content; the commit still
// moves the watermarks and writes the coalesced events' rows.
func (s *Service) batch(ctx context.Context, l *lease.Lease, job Job, a *attempt, adm admission, final bool, names []string) (batch, <-chan filesRead, Result, bool) {
	filesc := make(chan filesRead, 1)
	go func() {
		files, err := s.d.Workspace.GetMany(ctx, job.AgentID, names)
		filesc <- filesRead{files, err}
	}()
	b, err := s.batchFor(ctx, job, adm.last)
	if err != nil {
		return b, nil, s.workErr(ctx, l, job, "read pending messages", err), true
	}
	a.run.Conversations = b.conversations()
	switch {
	case len(b.spans) == 0:
		res := Result{Status: store.RunCompleted, Covered: true, Reason: "nothing pending (covered meanwhile)"}
		if len(a.coalesced) > 0 {
			// The coalesced events' conversations are covered: their ledger rows are written.
			res, _ = s.commit(l, job, a, b, adm.last, final, adm.st.CooldownUntil, plan{res: res})
		}
		return b, nil, res, true
	case len(b.msgs) == 0:
		res, _ := s.commit(l, job, a, b, adm.last, final, adm.st.CooldownUntil, plan{res: Result{Status: store.RunSkipped,
			Reason: fmt.Sprintf("no user or assistant messages with content among %d new messages (tool and system messages, and blank messages, are not extracted)", b.scanned)}})
		return b, nil, res, true
	}
	return b, filesc, Result{}, false
}

// ask asks the provider what to remember from the batch, given the memory files, and
// classifies its failure: a permanent one (the answer is not the contract, a 400) is
// dead-lettered, the rest retried (not sooner than a 429's Retry-After).
func (s *Service) ask(ctx context.Context, l *lease.Lease, job Job, a *attempt, agent store.Agent, date string, b batch, files map[string]workspace.File) (extractOutput, Result, bool) {
	daily := "memory/" + date + ".md"
	out, err := s.provider().extract(ctx, extractInput{
		Language: agent.Language, Date: date, Profile: files[ProfileFile].Content, Memory: files[MemoryFile].Content,
		Daily: files[daily].Content, Messages: b.msgs, Conversations: len(b.spans),
	})
	run := &a.run
	run.Provider, run.Model = out.Provider, out.Model
	run.TokensIn += out.TokensIn
	run.TokensOut += out.TokensOut
	if err == nil {
		return out, Result{}, true
	}
	var se *stepError
	if llm.ContextLengthExceeded(err) && !l.Lost() && ctx.Err() == nil {
		// Not a dead letter: the caller fits the core files and asks again; a prompt still
		// too long (the transcript) is retried later.
		res := transient(err.Error(), job.Attempt, s)
		res.contextLength = true
		return out, res, false
	}
	if errors.As(err, &se) && !se.transient && !l.Lost() && ctx.Err() == nil {
		return out, permanent(err.Error()), false
	}
	res := s.workErr(ctx, l, job, "extract", err)
	if ra, ok := llm.RetryAfter(err); ok && res.Retry {
		// A rate-limited provider said when to come back: not sooner (within the cap).
		res.Delay = max(res.Delay, min(ra, s.set.BackoffMax))
		res.Reason += fmt.Sprintf(" (the endpoint asked to retry after %s)", ra)
	}
	return out, res, false
}

// plan is what write makes of the model's answer: what the commit writes and the outcome.
type plan struct {
	res Result
	// entry is the daily entry (empty: none), file its note, base the note as read.
	entry, file, date string
	base              workspace.File
	// core are PROFILE.md and MEMORY.md as the extraction changes them, written against the
	// versions read; refusals are the changes not written.
	core     []coreWrite
	refusals []refusal
	// next is when the agent's next LLM extraction may start (zero: no cooldown).
	next time.Time
	// archive is what left the core files (consolidate.Fitted.Parts' blocks), appended to
	// the archive notes of the day, memory/archive/YYYY-MM-DD.md (…-2.md, … when full), in
	// the same unit.
	archive []string
}

// write turns the model's answer into a plan: the core files' new contents (planCoreWrites),
// the redacted daily entry, the cooldown an LLM extraction sets, and the outcome's status
// and reason.
func (s *Service) write(out extractOutput, b batch, files map[string]workspace.File, daily, date string, budgets workspace.AgentBudgets) plan {
	p := plan{file: daily, date: date, base: files[daily]}
	if out.ShouldUpdate {
		p.core, p.refusals = s.planCoreWrites(out, files, budgets)
		p.entry = strings.TrimSpace(guard.Redact(out.DailyEntry))
	}
	if cd := s.set.Memory.CooldownMinutes.Duration(); out.Provider == ProviderLLM && cd > 0 {
		p.next = time.Now().Add(cd).UTC()
	}
	var changed []string
	for _, w := range p.core {
		changed = append(changed, w.name)
	}
	p.res = Result{Status: store.RunCompleted, FilesChanged: changed}
	summary := fmt.Sprintf("extracted %d messages from %d conversations with the %s provider", len(b.msgs), len(b.spans), out.Provider)
	switch {
	case !out.ShouldUpdate:
		p.res.Status = store.RunSkipped
		p.res.Reason = "the model found nothing worth remembering: " + out.Reason
	case len(p.refusals) > 0:
		p.res.Status = store.RunRefused
		reasons := make([]string, len(p.refusals))
		for i, r := range p.refusals {
			reasons[i] = r.reason
		}
		p.res.Reason = summary + "; refused: " + strings.Join(reasons, "; ")
	default:
		p.res.Reason = summary
		if out.Reason != "" {
			p.res.Reason += ": " + out.Reason
		}
	}
	return p
}

// Commit errors that decide what happens next.
var (
	// errCoreConflict: a core file changed since the extraction read it; nothing was
	// committed, and the model is asked again.
	errCoreConflict = errors.New("a memory file changed during the extraction")
	// errDailyRace: the daily note changed since the extraction read it; the commit is
	// tried again from a fresh read of the note.
	errDailyRace = errors.New("the daily note changed during the extraction")
)

// Retries of a commit whose daily append lost its compare-and-swap (another writer
// appended to the note), as workspace.Append retries its own.
const (
	maxDailyRaces   = 50
	dailyRetryFirst = 2 * time.Millisecond
	dailyRetryMax   = 250 * time.Millisecond
)

// commit commits an extraction as one unit of work: it raises the agent's fencing value to
// this lease's token, moves the watermarks from exactly where the batch started, appends the
// daily entry (once per message range: its effect key), writes the core files against the
// versions read, and, when this extraction is the job's outcome (final, or covering its
// conversation), writes the job's ledger row, with the coalesced events' rows when it covers
// them. A holder that lost its lease, or a batch overlapping one applied meanwhile, fails as
// a whole. What follows the commit (the change hooks, the budget check) runs after it. It
// reports whether the extraction committed.
func (s *Service) commit(l *lease.Lease, job Job, a *attempt, b batch, last int64, final bool, cooldown time.Time, p plan) (Result, bool) {
	res, record, sweep := s.outcome(job, a, b, last, final, cooldown, p.res)
	// What the model answered is committed even when the worker is stopping (the caller's
	// context is not used), so that a graceful stop never throws away an LLM call's work.
	// Only a lost lease stops it.
	ctx, cancel := context.WithTimeout(l.Context(), s.set.DBTimeout)
	defer cancel()
	base, key := &p.base, effectKey(job.AgentID, b.spans)
	var wait *backoff.ExponentialBackOff
	for race := 1; ; race++ {
		out, written, err := s.commitOnce(ctx, l, job, a, b, p, base, key, res, record, sweep)
		if errors.Is(err, errDailyRace) && race <= maxDailyRaces {
			base = nil // from now on the unit reads the note
			if wait == nil {
				wait = backoff.NewExponentialBackOff()
				wait.InitialInterval, wait.MaxInterval = dailyRetryFirst, dailyRetryMax
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait.NextBackOff()):
			}
			continue
		}
		switch {
		case errors.Is(err, errCoreConflict):
			s.d.Log.Info("memory file changed during extraction; nothing committed", "agent", job.AgentID, "err", err)
			return Result{conflict: true}, false
		case err != nil:
			what := "advance watermarks"
			if p.entry != "" {
				what = "append to " + p.file
			}
			return s.workErr(ctx, l, job, what, err), false
		}
		a.recorded, a.coalescedDone = record, sweep
		for i := range written {
			// After the commit, as workspace.Write does: the recall index, MCP watchers and
			// the budget check.
			s.d.Workspace.Committed(ctx, &written[i], store.ActorSummarizer)
		}
		return out, true
	}
}

// outcome is the job's outcome once the batch commits: whether its conversation is covered
// (a waiter with coalesced events behind it only when the batch left none of the agent's
// pending messages out), a backlog deferred to the next extraction when not and the job is
// not urgent; whether the commit records the job's ledger row (record: this is its outcome)
// and the coalesced events' rows (sweep: the batch covers them).
func (s *Service) outcome(job Job, a *attempt, b batch, last int64, final bool, cooldown time.Time, res Result) (Result, bool, bool) {
	res.Covered = b.covers(job.ConversationID, last)
	sweep := len(a.coalesced) > 0 && !b.partial
	if a.waiter && len(a.coalesced) > 0 && b.partial {
		// The waiter stays until the coalesced events are covered too.
		res.Covered = false
	}
	if !res.Covered && !job.policy().Urgent {
		// The conversation had more new messages than one transcript holds: the rest goes
		// into the next extraction after the cooldown.
		res.Retry, res.Deferral = true, "backlog"
		res.Delay = max(time.Until(cooldown), 0) + jitter(minDeferral)
		res.Reason += "; more messages of this conversation remain, deferred to the next extraction"
	}
	record := final || res.Covered || res.Retry
	if record && job.forced() {
		res.Reason = "force: " + res.Reason
	}
	return res, record, sweep
}

// commitOnce is one try of commit's unit of work; it returns the outcome and the files it
// wrote (the daily note first).
func (s *Service) commitOnce(ctx context.Context, l *lease.Lease, job Job, a *attempt, b batch, p plan, base *workspace.File, key string,
	res Result, record, sweep bool) (Result, []workspace.File, error) {
	var written []workspace.File
	err := s.d.Units.Do(ctx, func(tx *store.Tx) error {
		now := s.d.Now().UTC()
		written, res.FilesChanged = written[:0], slices.Clip(res.FilesChanged)
		if err := fence.Check(tx, job.AgentID, fence.TokenOf(l), now); err != nil {
			return err
		}
		if err := s.d.Messages.MoveWatermarks(tx, job.AgentID, moves(b.spans), now); err != nil {
			return err
		}
		ch := workspace.Change{Actor: store.ActorSummarizer, Ref: a.run.RunID}
		if p.entry != "" {
			daily := ch
			daily.EffectKey, daily.Base = key, base
			f, err := s.d.Workspace.AppendTx(tx, job.AgentID, p.file, p.entry+"\n", "# "+p.date+"\n\n", daily)
			switch {
			case errors.Is(err, workspace.ErrAlreadyApplied):
				s.d.Log.Info("daily entry already appended for these messages", "agent", job.AgentID, "key", key)
			case errors.Is(err, workspace.ErrConflict):
				return fmt.Errorf("%w: %w", errDailyRace, err)
			case err != nil:
				return err
			default:
				written = append(written, f)
				res.FilesChanged = append(res.FilesChanged, p.file)
			}
		}
		for _, w := range p.core {
			f, _, err := s.d.Workspace.WriteTx(tx, job.AgentID, w.name, w.text, w.expect, ch)
			if errors.Is(err, workspace.ErrConflict) {
				return fmt.Errorf("%w: %w", errCoreConflict, err)
			}
			if err != nil {
				return fmt.Errorf("write %s: %w", w.name, err)
			}
			written = append(written, f)
		}
		if len(p.archive) > 0 {
			notes, err := consolidate.ArchiveTx(tx, s.d.Workspace, job.AgentID, p.date, p.archive, ch)
			if err != nil {
				return err
			}
			for _, f := range notes {
				written = append(written, f)
				res.FilesChanged = append(res.FilesChanged, f.Filename)
			}
		}
		if sweep {
			if err := s.recordCoalesced(tx, job.AgentID, a); err != nil {
				return err
			}
		}
		if !record {
			return nil
		}
		// The outcome, and so the ledger row, is settled in the unit that records it.
		res = s.settle(job, a, res)
		_, err := s.d.Ledger.RecordTx(tx, a.run)
		return err
	})
	return res, written, err
}

// committed counts what an extraction's commit wrote and refused, and has the agent's
// cooldown written into its record as the lease is released.
func (s *Service) committed(a *attempt, p plan) {
	for _, w := range p.core {
		s.d.Metrics.CoreChanges.WithLabelValues(w.name, w.form, "written").Inc()
	}
	for _, r := range p.refusals {
		s.d.Metrics.CoreChanges.WithLabelValues(r.name, r.form, "refused").Inc()
	}
	if !p.next.IsZero() {
		a.cooldown, a.cooldownRun = p.next, a.run.RunID
	}
}

// moves are the watermark moves of a batch's spans.
func moves(spans []span) []conversation.Move {
	out := make([]conversation.Move, len(spans))
	for i, sp := range spans {
		out[i] = conversation.Move{Conv: sp.Conv, From: sp.From, To: sp.To, Redo: sp.Redo, New: sp.New}
	}
	return out
}
