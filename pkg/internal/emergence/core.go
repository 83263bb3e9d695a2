package emergence

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/matememory/matememory/pkg/internal/blame"
	"github.com/matememory/matememory/pkg/internal/config"
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
	// blocks are the archive's blocks of what left the file (none when nothing did), to
	// append to the archive notes of day (memory/archive/YYYY-MM-DD.md, …).
	blocks []string
	day    string
	// removed is what left the file, as the archive keeps it (for the rewrite guard).
	removed string
	// demoted counts the entries demoted to keep the budget.
	demoted int
}

// fit fits content, the model's MEMORY.md, to the agent's budget against before, the file as
// read for the model call; form is archive.ReasonRewrite or archive.ReasonEdit.
func (w *Worker) fit(ctx context.Context, p prepared, before workspace.File, content, form, runID string) fitted {
	loc, err := config.LoadLocation(p.agent.Timezone)
	if err != nil {
		loc = time.UTC
	}
	now := w.now().In(loc)
	f := consolidate.FitWrite(ctx, w.ws, w.log, consolidate.Write{AgentID: p.agent.ID, File: MemoryFile, Before: before, After: content,
		Budget: p.budgets.MemoryTokens, Count: w.ws.CountTokens,
		Change: blame.Change{Version: before.Version + 1, Actor: store.ActorEmergence, Action: "write", Ref: runID, Time: now}})
	var removed []string
	for _, e := range append(f.Removed[:len(f.Removed):len(f.Removed)], f.Demoted...) {
		removed = append(removed, e.Text)
	}
	return fitted{content: f.Content, blocks: f.Parts(MemoryFile, form, runID, now, consolidate.PartBytes(w.ws.MaxBytes())),
		day:     p.win.to, // the agent's today, as the daily notes are dated
		removed: strings.Join(removed, "\n"), demoted: len(f.Demoted)}
}

// demotedNote is what the run's reason says of a demotion.
func demotedNote(f fitted, budget int) string {
	if f.demoted == 0 {
		return ""
	}
	return fmt.Sprintf("; MEMORY.md over its budget of %d tokens: %d entries demoted to the archive", budget, f.demoted)
}

// archiveInTx appends f's blocks to the archive notes in the unit of work tx (MEMORY.md's
// write); it returns the notes written, none when there was nothing to archive.
func (w *Worker) archiveInTx(tx *store.Tx, agentID int64, f fitted, runID string) ([]workspace.File, error) {
	if len(f.blocks) == 0 {
		return nil, nil
	}
	notes, err := consolidate.ArchiveTx(tx, w.ws, agentID, f.day, f.blocks, workspace.Change{Actor: store.ActorEmergence, Ref: runID})
	if err != nil {
		return nil, &archiveError{day: f.day, err: err}
	}
	return notes, nil
}

// archiveError is a failed append to the archive notes: the write of MEMORY.md rolls back
// with it, and it is retried as a transient failure (never read as MEMORY.md having changed).
type archiveError struct {
	day string
	err error
}

func (e *archiveError) Error() string { return fmt.Sprintf("archive of %s: %v", e.day, e.err) }
func (e *archiveError) Unwrap() error { return e.err }
