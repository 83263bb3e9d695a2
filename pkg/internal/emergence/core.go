package emergence

import (
	"context"
	"fmt"

	"github.com/matememory/matememory/pkg/internal/archive"
	"github.com/matememory/matememory/pkg/internal/blame"
	"github.com/matememory/matememory/pkg/internal/consolidate"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// MEMORY.md's budget in an emergence (issue 22, docs/emergence.md): the prompt says how many
// tokens the file has and its budget; whatever the model answers, the content written is
// fitted to the budget (entries demoted, least recently confirmed then introduced first, when
// it is still over), and what left the file, dropped by the model or demoted, is appended
// verbatim to the day's archive note in the transaction that writes MEMORY.md.

// fitted is MEMORY.md as an emergence commits it.
type fitted struct {
	content string
	// block is the archive's block of what left the file ("" when nothing did), to append
	// to file (memory/archive/YYYY-MM-DD.md) under header when the note is new.
	block, file, header string
	// demoted counts the entries demoted to keep the budget.
	demoted int
}

// fit fits content, the model's MEMORY.md, to the agent's budget against before, the file as
// read for the model call; form is archive.ReasonRewrite or archive.ReasonEdit.
func (w *Worker) fit(ctx context.Context, p prepared, before workspace.File, content, form, runID string) fitted {
	now := w.now().UTC()
	f := consolidate.FitWrite(ctx, w.ws, w.log, consolidate.Write{AgentID: p.agent.ID, File: MemoryFile, Before: before, After: content,
		Budget: p.budgets.MemoryTokens, Count: w.ws.CountTokens,
		Change: blame.Change{Version: before.Version + 1, Actor: store.ActorEmergence, Action: "write", Ref: runID, Time: now}})
	day := p.win.to // the agent's today, as the daily notes are dated
	return fitted{content: f.Content, block: f.Archive(MemoryFile, form, runID, now),
		file: archive.Dir + day + ".md", header: archive.Header(day), demoted: len(f.Demoted)}
}

// demotedNote is what the run's reason says of a demotion.
func demotedNote(f fitted, budget int) string {
	if f.demoted == 0 {
		return ""
	}
	return fmt.Sprintf("; MEMORY.md over its budget of %d tokens: %d entries demoted to the archive", budget, f.demoted)
}

// archiveInTx appends f's block to the archive note in the unit of work tx (MEMORY.md's
// write); it returns the note written, nil when there was nothing to archive.
func (w *Worker) archiveInTx(tx *store.Tx, agentID int64, f fitted, runID string) (*workspace.File, error) {
	if f.block == "" {
		return nil, nil
	}
	note, err := w.ws.AppendTx(tx, agentID, f.file, f.block, f.header, workspace.Change{Actor: store.ActorEmergence, Ref: runID})
	if err != nil {
		return nil, &archiveError{file: f.file, err: err}
	}
	return &note, nil
}

// archiveError is a failed append to the archive note: the write of MEMORY.md rolls back with
// it, and it is retried as a transient failure (never read as MEMORY.md having changed).
type archiveError struct {
	file string
	err  error
}

func (e *archiveError) Error() string { return fmt.Sprintf("append to %s: %v", e.file, e.err) }
func (e *archiveError) Unwrap() error { return e.err }
