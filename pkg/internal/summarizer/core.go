package summarizer

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/matememory/matememory/pkg/internal/archive"
	"github.com/matememory/matememory/pkg/internal/blame"
	"github.com/matememory/matememory/pkg/internal/consolidate"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// The core files' budget in an extraction (issue 22, docs/core-memory.md): before the model
// is asked, a core file past its high-water mark is consolidated (the model fits it to its
// budget; the extraction then sees the consolidated file); after the answer, every write of
// a core file is fitted to the budget (entries demoted when it is still over), and what left
// the file goes to the archive note, all in the extraction's one unit of work.

// core is the state of the core files through one round of an extraction.
type core struct {
	// read are the files as read (the versions the writes are checked against); budgets
	// the agent's budgets.
	read    map[string]workspace.File
	budgets workspace.AgentBudgets
	// consolidated holds, per file, the consolidation the model gave (what the extraction
	// saw); note says what the consolidation did, for the run's reason.
	consolidated map[string]string
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
// files as the model is to see them. A consolidation that fails or is refused is noted and
// left out: the fit after the answer keeps the budget all the same.
func (s *Service) consolidateFirst(ctx context.Context, job Job, a *attempt, language, date string, files map[string]workspace.File) (map[string]workspace.File, core, error) {
	c := core{read: files, budgets: a.budgets, consolidated: map[string]string{}}
	if s.d.LLM == nil {
		return files, c, nil
	}
	seen, copied := files, false
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
		ans, err := consolidate.Ask(ctx, s.d.LLM, s.d.Prompts, consolidate.Request{File: name, Content: f.Content, Tokens: n,
			Budget: budget, Language: language, Date: day})
		a.run.TokensIn += ans.TokensIn
		a.run.TokensOut += ans.TokensOut
		s.d.Metrics.Consolidations.WithLabelValues(name, consolidationResult(err)).Inc()
		if err != nil {
			if ctx.Err() != nil {
				return files, c, err
			}
			c.notes = append(c.notes, fmt.Sprintf("%s past %.0f%% of its budget (%d of %d tokens): consolidation not applied: %v",
				name, consolidate.HighWater*100, n, budget, err))
			continue
		}
		if !copied { // copy on the first change: files is the caller's
			copied, seen = true, make(map[string]workspace.File, len(files))
			for k, v := range files {
				seen[k] = v
			}
		}
		f.Content = ans.Content
		seen[name] = f
		c.consolidated[name] = ans.Content
		c.notes = append(c.notes, fmt.Sprintf("consolidated %s from %d to %d tokens first (budget %d)", name, n,
			s.d.Workspace.CountTokens(ans.Content), budget))
	}
	return seen, c, nil
}

func consolidationResult(err error) string {
	if err != nil {
		return "refused"
	}
	return "applied"
}

// fit completes the plan's core writes: a consolidated file the answer did not change is
// written as consolidated; every write is fitted to its budget; what left a file is
// rendered for the archive note.
func (s *Service) fit(ctx context.Context, job Job, a *attempt, c core, p *plan) {
	if len(c.notes) > 0 {
		p.res.Reason = strings.Join(c.notes, "; ") + "; " + p.res.Reason
	}
	for name, content := range c.consolidated {
		if !p.writes(name) {
			p.core = append(p.core, coreWrite{name: name, text: content, expect: c.read[name].Version, form: "consolidation"})
			p.res.FilesChanged = append(p.res.FilesChanged, name)
			if p.res.Status == store.RunSkipped {
				p.res.Status = store.RunCompleted
			}
		}
	}
	now := s.d.Now().UTC()
	var blocks []string
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
		reason := archive.ReasonRewrite
		switch {
		case c.consolidated[w.name] != "":
			reason = archive.ReasonConsolidation
		case w.form == "edits":
			reason = archive.ReasonEdit
		}
		if block := f.Archive(w.name, reason, a.run.RunID, now); block != "" {
			blocks = append(blocks, block)
		}
	}
	if len(blocks) > 0 {
		p.archive, p.archiveFile = strings.Join(blocks, "\n"), archive.Dir+p.date+".md"
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
