// Package consolidate keeps a core memory file (MEMORY.md, PROFILE.md) within its token
// budget. Two tools, used by every pipeline change of a core file:
//
//   - Ask: when a file has passed its high-water mark (HighWater of its budget), the model is
//     asked to fit it to the budget (prompts memory/consolidate-*). Its answer is edits or the
//     whole file; it may shrink the file as much as it likes, because nothing it drops is
//     lost (below), but an empty or cut-off answer is refused.
//   - Fit: whatever the model did, the content committed is at or under the budget. Fit lists
//     what the change removed and, when the content is still over the budget, demotes whole
//     entries (least recently confirmed first, per the file's blame) until it fits. Both go
//     to the agent's archive (pkg/internal/archive) in the change's own transaction.
package consolidate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/matememory/matememory/pkg/internal/archive"
	"github.com/matememory/matememory/pkg/internal/blame"
	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/memedit"
	"github.com/matememory/matememory/pkg/internal/prompt"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// HighWater is the share of its budget past which a file is consolidated before the next
// extraction adds to it.
const HighWater = 0.9

// Target is the share of the budget a consolidation aims for, leaving room for the days after.
const Target = 0.7

// Over reports whether tokens have passed the high-water mark of budget (a budget of 0 or
// less means none).
func Over(tokens, budget int) bool { return budget > 0 && float64(tokens) > HighWater*float64(budget) }

// AskLimit is the most tokens a file the model is asked to consolidate may have: its answer
// (the file again, at worst) must fit a model's output, and the prompt its context. A file
// larger than that, or than AskFactor times its budget, is fitted by the service's demotion
// without a model call.
const (
	AskLimit  = 12000
	AskFactor = 4
)

// TooLargeToAsk reports whether a file of tokens is too large to ask the model to fit to
// budget (AskLimit, AskFactor).
func TooLargeToAsk(tokens, budget int) bool {
	return tokens > AskLimit || (budget > 0 && tokens > AskFactor*budget)
}

// Request is one consolidation to ask for.
type Request struct {
	File     string // MEMORY.md or PROFILE.md
	Content  string
	Tokens   int // the content's tokens
	Budget   int
	Language string
	Date     time.Time
}

// Answer is the model's consolidation.
type Answer struct {
	Reason  string
	Content string // the new file
	// Edits is how many edits the model sent (0 for a whole-file answer).
	Edits     int
	TokensIn  int
	TokensOut int
	Model     string
}

// ErrRefused is matched by a consolidation answer that cannot be used: empty, cut off, not
// the expected JSON, or edits whose anchors do not hold.
var ErrRefused = errors.New("consolidation refused")

// Ask asks the model to fit the file to its budget and applies its answer.
func Ask(ctx context.Context, client llm.Client, prompts *prompt.Loader, r Request) (Answer, error) {
	vars := map[string]string{
		"file": r.File, "content": r.Content, "date": r.Date.Format("2006-01-02"),
		"budget_tokens": strconv.Itoa(r.Budget), "current_tokens": strconv.Itoa(r.Tokens),
		"target_tokens": strconv.Itoa(int(Target * float64(r.Budget))),
	}
	system, err := prompts.Render(prompt.ConsolidateSystem, r.Language, vars)
	if err != nil {
		return Answer{}, err
	}
	user, err := prompts.Render(prompt.ConsolidateUser, r.Language, vars)
	if err != nil {
		return Answer{}, err
	}
	// The answer is at most the file again (a rewrite), with room for the JSON around it.
	resp, err := client.Complete(ctx, llm.Request{JSON: true, MaxTokens: r.Tokens + r.Tokens/4 + 256,
		Messages: []llm.Message{{Role: "system", Content: system}, {Role: "user", Content: user}}})
	if err != nil {
		return Answer{}, fmt.Errorf("consolidate %s: %w", r.File, err)
	}
	a, err := Parse(r.Content, resp.Content, resp.Truncated)
	a.TokensIn, a.TokensOut, a.Model = resp.TokensIn, resp.TokensOut, resp.Model
	return a, err
}

// Parse reads a consolidation answer and applies it to content.
func Parse(content, answer string, truncated bool) (Answer, error) {
	if truncated {
		return Answer{}, fmt.Errorf("%w: the model stopped at its output token limit, so the answer is cut off", ErrRefused)
	}
	s := strings.TrimSpace(answer)
	if i := strings.IndexByte(s, '{'); i >= 0 {
		s = s[i:]
	}
	var raw struct {
		Reason  string          `json:"reason"`
		Content *string         `json:"content"`
		Edits   json.RawMessage `json:"edits"`
	}
	if err := json.NewDecoder(strings.NewReader(s)).Decode(&raw); err != nil {
		return Answer{}, fmt.Errorf("%w: the answer is not the expected JSON object: %v", ErrRefused, err)
	}
	a := Answer{Reason: raw.Reason}
	switch {
	case raw.Content != nil && len(raw.Edits) > 0 && string(raw.Edits) != "[]" && string(raw.Edits) != "null":
		return Answer{}, fmt.Errorf("%w: the answer has both content and edits: send one", ErrRefused)
	case raw.Content != nil:
		a.Content = *raw.Content
	default:
		edits, err := memedit.Parse("edits", raw.Edits)
		if err != nil {
			return Answer{}, fmt.Errorf("%w: %v", ErrRefused, err)
		}
		if a.Content, err = memedit.Apply(content, edits); err != nil {
			return Answer{}, fmt.Errorf("%w: %v", ErrRefused, err)
		}
		a.Edits = len(edits)
	}
	switch strings.TrimSpace(a.Content) {
	case "":
		return Answer{}, fmt.Errorf("%w: the new content is empty", ErrRefused)
	case strings.TrimSpace(content):
		return Answer{}, fmt.Errorf("%w: the answer leaves the file as it is", ErrRefused)
	}
	return a, nil
}

// Fitted is what a change of a core file commits: the content and the archive's block.
type Fitted struct {
	Content string
	// Removed are the entries the change itself dropped; Demoted those the service demoted
	// to keep the budget.
	Removed, Demoted []archive.Entry
}

// Archive renders the archive block of f for file, or "" when nothing left the file.
func (f Fitted) Archive(file, reason, run string, at time.Time) string {
	return strings.Join(f.Parts(file, reason, run, at, 0), "\n")
}

// Parts renders the archive blocks of f for file, each at most max bytes (0: no limit), nil
// when nothing left the file: what the change removed (for reason), then what was demoted.
func (f Fitted) Parts(file, reason, run string, at time.Time, max int) []string {
	return append(archive.Parts(f.Removed, file, reason, run, at, max),
		archive.Parts(f.Demoted, file, archive.ReasonDemotion, run, at, max)...)
}

// Fit takes a change of a core file from before to after and makes it fit budget tokens
// (counted by count; 0 or less: no budget). history gives the file's revisions up to before
// (read only when something left the file or after does not fit: the blame that dates the
// archived entries and orders the demotion); change is what produces after. A content over
// the budget is demoted down to Target, not just under the budget, so that the next
// extractions have room before the file passes its high-water mark again; an entry of more
// than archive.BigShare of the budget goes first (archive.Demote gives the order).
func Fit(before, after string, count func(string) int, budget int, history func() []blame.Revision, change blame.Change) Fitted {
	var revs []blame.Revision
	read := false
	revisions := func() []blame.Revision {
		if !read {
			revs, read = history(), true
		}
		return revs
	}
	f := Fitted{Content: after, Removed: archive.Removed(before, after, func() []blame.Line { return blame.Annotate(revisions()) })}
	if budget > 0 && count(after) > budget {
		r := revisions()
		lines := blame.Annotate(append(r[:len(r):len(r)], blame.Revision{Content: after, Change: change}))
		f.Content, f.Demoted = archive.Demote(after, lines, archive.Limits{Count: count,
			Tokens: int(Target * float64(budget)), Big: int(archive.BigShare * float64(budget))})
	}
	return f
}

// Histories reads a file's earlier versions (the workspace).
type Histories interface {
	History(ctx context.Context, agentID int64, name string) ([]workspace.HistoryEntry, error)
}

// Write is a pipeline write of a core file: File's content goes from Before (as read for the
// model call; a zero File when the file is new) to After, against Budget tokens counted by
// Count, made by Change.
type Write struct {
	AgentID int64
	File    string
	Before  workspace.File
	After   string
	Budget  int
	Count   func(string) int
	Change  blame.Change
}

// FitWrite is Fit for a pipeline write, as the summarizer and emergence make them: the seeded
// template counts as empty (nothing of it is archived), and the file's history is read from
// h only when Fit needs it (a history that cannot be read is logged, and the archive then
// says less about where entries came from). With After equal to Before's content it is the
// service's own fit of a file over its budget, without the model.
func FitWrite(ctx context.Context, h Histories, log *slog.Logger, w Write) Fitted {
	history := func() []blame.Revision {
		if w.Before.Version == 0 {
			return nil
		}
		hist, err := h.History(ctx, w.AgentID, w.File)
		if err != nil {
			log.Warn("read history for the archive's provenance", "agent", w.AgentID, "file", w.File, "err", err)
			return []blame.Revision{{Content: w.Before.Content, Change: blame.Change{Version: w.Before.Version}}}
		}
		return blame.Revisions(w.Before, hist)
	}
	was := w.Before.Content
	if workspace.IsSeed(w.File, was) {
		was = ""
	}
	return Fit(was, w.After, w.Count, w.Budget, history, w.Change)
}

// Appender appends to a workspace file in a unit of work (the workspace).
type Appender interface {
	AppendTx(tx *store.Tx, agentID int64, name, text, header string, ch workspace.Change) (workspace.File, error)
	MaxBytes() int
}

// PartBytes is the most an archive block may hold of a note's size cap: a block never makes
// a note refuse it, and a note keeps room for the next ones.
func PartBytes(maxBytes int) int { return max(maxBytes/4, 4096) }

// maxNotesADay bounds the notes of one day an append looks through.
const maxNotesADay = 10000

// ArchiveTx appends blocks (Fitted.Parts, each at most PartBytes of the cap) to the archive
// notes of day in the unit tx: to the day's note while it has room, then to the next note of
// the day (archive.PartFile), so that the archive never fails a commit for its size. It
// returns the notes written, for Committed after the unit commits (one per note, the last
// write of it).
func ArchiveTx(tx *store.Tx, a Appender, agentID int64, day string, blocks []string, ch workspace.Change) ([]workspace.File, error) {
	var out []workspace.File
	part := 1
	for _, b := range blocks {
		for {
			if part > maxNotesADay {
				return out, fmt.Errorf("the archive of %s has %d notes, each full", day, maxNotesADay)
			}
			name := archive.PartFile(day, part)
			f, err := a.AppendTx(tx, agentID, name, b, archive.Header(day), ch)
			if errors.Is(err, workspace.ErrTooLarge) {
				part++
				continue
			}
			if err != nil {
				return out, fmt.Errorf("append to %s: %w", name, err)
			}
			if len(out) > 0 && out[len(out)-1].Filename == f.Filename {
				out[len(out)-1] = f
			} else {
				out = append(out, f)
			}
			break
		}
	}
	return out, nil
}
