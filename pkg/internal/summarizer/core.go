package summarizer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/matememory/matememory/pkg/internal/archive"
	"github.com/matememory/matememory/pkg/internal/blame"
	"github.com/matememory/matememory/pkg/internal/consolidate"
	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// The core files' budget in an extraction (issue 22, issue 29, docs/core-memory.md): before
// the model is asked, a core file past its high-water mark is consolidated (the model fits it
// to its budget; the extraction then sees the consolidated file), or, when the model cannot
// be asked (the file is too large for a prompt, the model refused it lately, or the model
// answered that the prompt exceeds its context), fitted by the service's own demotion; after
// the answer, every write of a core file is fitted to the budget (entries demoted when it is
// still over), and what left the file goes to the archive notes, all in the extraction's one
// unit of work.

// core is the state of the core files through one round of an extraction.
type core struct {
	// read are the files as read (the versions the writes are checked against); budgets
	// the agent's budgets; loc the agent's time zone (the archive's dates).
	read    map[string]workspace.File
	budgets workspace.AgentBudgets
	loc     *time.Location
	// consolidated holds, per file, the consolidation (the model's, or the service's
	// demotion) the extraction saw; form is the archive's reason for what it dropped;
	// notes say what was done, for the run's reason.
	consolidated map[string]string
	form         map[string]string
	notes        []string
}

func (c core) budget(name string) int {
	switch name {
	case MemoryFile:
		return c.budgets.MemoryTokens
	case ProfileFile:
		return c.budgets.ProfileTokens
	}
	return 0
}

// consolidateFirst consolidates each core file past its high-water mark and returns the
// files as the model is to see them. A file the model cannot be asked about (too large for
// a prompt, consolidations refused lately) or whose consolidation the model refused is
// fitted by demotion instead; a consolidation that fails otherwise is noted and left out:
// the fit after the answer keeps the budget all the same.
func (s *Service) consolidateFirst(ctx context.Context, job Job, a *attempt, agent store.Agent, date string, files map[string]workspace.File) (map[string]workspace.File, core, error) {
	c := core{read: files, budgets: a.budgets, loc: agentLocation(agent), consolidated: map[string]string{}, form: map[string]string{}}
	if s.d.LLM == nil {
		return files, c, nil
	}
	seen := copyFiles(files)
	day, _ := time.Parse("2006-01-02", date)
	for _, name := range []string{MemoryFile, ProfileFile} {
		f, ok := files[name]
		budget := c.budget(name)
		if !ok || budget <= 0 {
			continue
		}
		n := s.d.Workspace.FileTokens(ctx, &f) // stored with the version: not tokenized per extraction
		if !consolidate.Over(n, budget) {
			continue
		}
		if consolidate.TooLargeToAsk(n, budget) {
			s.demoteFirst(ctx, job, a, &c, seen, name, fmt.Sprintf("%s of %d tokens is too large to ask the model to consolidate (budget %d)", name, n, budget))
			continue
		}
		if until, ok := s.consBackoff.until(job.AgentID, name, s.d.Now()); ok {
			s.demoteFirst(ctx, job, a, &c, seen, name, fmt.Sprintf("%s past %.0f%% of its budget (%d of %d tokens), its consolidation refused lately (the model is asked again after %s)",
				name, consolidate.HighWater*100, n, budget, until.UTC().Format(time.RFC3339)))
			continue
		}
		ans, err := consolidate.Ask(ctx, s.d.LLM, s.d.Prompts, consolidate.Request{File: name, Content: f.Content, Tokens: n,
			Budget: budget, Language: agent.Language, Date: day})
		a.run.TokensIn += ans.TokensIn
		a.run.TokensOut += ans.TokensOut
		s.d.Metrics.Consolidations.WithLabelValues(name, consolidationResult(err)).Inc()
		if err != nil {
			if ctx.Err() != nil {
				return files, c, err
			}
			note := fmt.Sprintf("%s past %.0f%% of its budget (%d of %d tokens): consolidation not applied: %v",
				name, consolidate.HighWater*100, n, budget, err)
			if errors.Is(err, consolidate.ErrRefused) || llm.ContextLengthExceeded(err) {
				// Asking again next time would most likely get the same answer: the service
				// fits the file now, and the model is not asked about it for a while.
				s.consBackoff.refused(job.AgentID, name, s.d.Now())
				s.demoteFirst(ctx, job, a, &c, seen, name, note)
				continue
			}
			c.notes = append(c.notes, note)
			continue
		}
		s.consBackoff.applied(job.AgentID, name)
		f.Content = ans.Content
		seen[name] = f
		c.consolidated[name] = ans.Content
		c.form[name] = archive.ReasonConsolidation
		c.notes = append(c.notes, fmt.Sprintf("consolidated %s from %d to %d tokens first (budget %d)", name, n,
			s.d.Workspace.CountTokens(ans.Content), budget))
	}
	return seen, c, nil
}

// demoteFirst fits name, as the extraction is to see it (in seen), to its budget by the
// service's demotion, without the model; the extraction then sees (in seen) and writes the
// fitted file. It reports whether anything was demoted.
func (s *Service) demoteFirst(ctx context.Context, job Job, a *attempt, c *core, seen map[string]workspace.File, name, why string) bool {
	g := seen[name]
	budget := c.budget(name)
	fit := consolidate.FitWrite(ctx, s.d.Workspace, s.d.Log, consolidate.Write{AgentID: job.AgentID, File: name, Before: c.read[name], After: g.Content,
		Budget: budget, Count: s.d.Workspace.CountTokens,
		Change: blame.Change{Version: c.read[name].Version + 1, Actor: store.ActorSummarizer, Action: "write", Ref: a.run.RunID, Time: s.d.Now()}})
	if len(fit.Demoted) == 0 {
		c.notes = append(c.notes, why)
		return false
	}
	g.Content = fit.Content
	seen[name] = g
	c.consolidated[name] = fit.Content
	c.form[name] = archive.ReasonDemotion
	c.notes = append(c.notes, fmt.Sprintf("%s: demoted %d entries to the archive first, %s now %d tokens (budget %d)", why, len(fit.Demoted), name,
		s.d.Workspace.CountTokens(fit.Content), budget))
	return true
}

// fitToContext fits every core file over its budget to it by demotion, after the model
// answered that the prompt exceeds its context; it reports whether a file shrank (the
// extraction then asks again with seen).
func (s *Service) fitToContext(ctx context.Context, job Job, a *attempt, c *core, seen map[string]workspace.File) bool {
	shrank := false
	for _, name := range []string{MemoryFile, ProfileFile} {
		if _, ok := seen[name]; ok && c.budget(name) > 0 {
			shrank = s.demoteFirst(ctx, job, a, c, seen, name, "the model answered that the prompt exceeds its context") || shrank
		}
	}
	return shrank
}

func copyFiles(files map[string]workspace.File) map[string]workspace.File {
	out := make(map[string]workspace.File, len(files))
	for k, v := range files {
		out[k] = v
	}
	return out
}

func consolidationResult(err error) string {
	if err != nil {
		return "refused"
	}
	return "applied"
}

// fit completes the plan's core writes: a consolidated file the answer did not change is
// written as consolidated; every write is fitted to its budget; what left a file is
// rendered for the archive notes.
func (s *Service) fit(ctx context.Context, job Job, a *attempt, c core, p *plan) {
	if len(c.notes) > 0 {
		p.res.Reason = strings.Join(c.notes, "; ") + "; " + p.res.Reason
	}
	for _, name := range []string{ProfileFile, MemoryFile} {
		content, ok := c.consolidated[name]
		if ok && !p.writes(name) {
			p.core = append(p.core, coreWrite{name: name, text: content, expect: c.read[name].Version, form: "consolidation"})
			p.res.FilesChanged = append(p.res.FilesChanged, name)
			if p.res.Status == store.RunSkipped {
				p.res.Status = store.RunCompleted
			}
		}
	}
	loc := c.loc
	if loc == nil {
		loc = time.UTC
	}
	now := s.d.Now().In(loc)
	kept := p.core[:0]
	defer func() { p.core = kept }()
	for i := range p.core {
		w := &p.core[i]
		budget := c.budget(w.name)
		f := consolidate.FitWrite(ctx, s.d.Workspace, s.d.Log, consolidate.Write{AgentID: job.AgentID, File: w.name, Before: c.read[w.name],
			After: w.text, Budget: budget, Count: s.d.Workspace.CountTokens,
			Change: blame.Change{Version: c.read[w.name].Version + 1, Actor: store.ActorSummarizer, Action: "write", Ref: a.run.RunID, Time: now}})
		if len(f.Demoted) > 0 {
			s.d.Metrics.Demotions.WithLabelValues(w.name).Add(float64(len(f.Demoted)))
			p.res.Reason += fmt.Sprintf("; %s over its budget of %d tokens: %d entries demoted to the archive", w.name, budget, len(f.Demoted))
		}
		w.text = f.Content
		if max := s.d.Workspace.MaxBytes(); len(w.text) > max {
			// Fitted to its tokens and still over the byte cap (a budget of more tokens than
			// the cap holds): refused, as an answer over the cap without a budget is.
			p.refusals = append(p.refusals, refusal{name: w.name, form: w.form,
				reason: fmt.Sprintf("%s: the new content is %d bytes; at most %d allowed", w.name, len(w.text), max)})
			continue
		}
		kept = append(kept, *w)
		reason := archive.ReasonRewrite
		switch {
		case c.form[w.name] != "":
			reason = c.form[w.name]
		case w.form == "edits":
			reason = archive.ReasonEdit
		}
		p.archive = append(p.archive, f.Parts(w.name, reason, a.run.RunID, now, consolidate.PartBytes(s.d.Workspace.MaxBytes()))...)
	}
}

// writes reports whether the plan writes name.
func (p *plan) writes(name string) bool {
	for _, w := range p.core {
		if w.name == name {
			return true
		}
	}
	return false
}

// consolidationBackoff remembers, per agent and core file, until when the model is not asked
// to consolidate it after it refused to: the service fits the file by demotion meanwhile.
// The first refusal backs off an hour, each next one twice as long, up to a day; a
// consolidation applied resets it.
type consolidationBackoff struct {
	mu sync.Mutex
	m  map[backoffKey]backoffState
}

type backoffKey struct {
	agent int64
	file  string
}

type backoffState struct {
	until time.Time
	wait  time.Duration
}

const (
	consolidationBackoffFirst = time.Hour
	consolidationBackoffMax   = 24 * time.Hour
)

func (b *consolidationBackoff) until(agent int64, file string, now time.Time) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	st, ok := b.m[backoffKey{agent, file}]
	return st.until, ok && now.Before(st.until)
}

func (b *consolidationBackoff) refused(agent int64, file string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[backoffKey]backoffState{}
	}
	k := backoffKey{agent, file}
	st := b.m[k]
	st.wait = min(max(2*st.wait, consolidationBackoffFirst), consolidationBackoffMax)
	st.until = now.Add(st.wait)
	b.m[k] = st
}

func (b *consolidationBackoff) applied(agent int64, file string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, backoffKey{agent, file})
}
