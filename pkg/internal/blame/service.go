package blame

import (
	"context"
	"fmt"
	"sort"

	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// Files is what blame reads of a file: its current version and the versions before it.
type Files interface {
	Get(ctx context.Context, agentID int64, name string) (workspace.File, error)
	History(ctx context.Context, agentID int64, name string) ([]workspace.HistoryEntry, error)
}

// Runs finds the pipeline runs (the ledger) behind changes, by run id.
type Runs interface {
	Runs(ctx context.Context, agentID int64, runIDs []string) (map[string]ledger.Run, error)
}

// Service answers blame for an agent's files.
type Service struct {
	files Files
	runs  Runs
}

// New builds the service over the workspace's files and the ledger's runs.
func New(files Files, runs Runs) *Service { return &Service{files: files, runs: runs} }

// Origin is a change with the run behind it, when a pipeline run made it.
type Origin struct {
	Change
	// EventID and Conversations are the run's event and conversations (extractions).
	EventID       string   `json:"eventId,omitempty"`
	Conversations []string `json:"conversations,omitempty"`
	RunKind       string   `json:"runKind,omitempty"`
}

// AnnotatedLine is a line with the origins of its introduction and last confirmation.
type AnnotatedLine struct {
	Number     int    `json:"number"`
	Text       string `json:"text"`
	Introduced Origin `json:"introduced"`
	Confirmed  Origin `json:"confirmed"`
}

// File is a file's blame: every line of its current version.
type File struct {
	AgentID  int64           `json:"agentId"`
	Filename string          `json:"filename"`
	Version  int64           `json:"version"`
	Lines    []AnnotatedLine `json:"lines"`
}

// Blame annotates every line of the file's current version.
func (s *Service) Blame(ctx context.Context, agentID int64, name string) (File, error) {
	cur, err := s.files.Get(ctx, agentID, name)
	if err != nil {
		return File{}, err
	}
	hist, err := s.files.History(ctx, agentID, name)
	if err != nil {
		return File{}, err
	}
	revs := Revisions(cur, hist)
	lines := Annotate(revs)
	runs, err := s.runsOf(ctx, agentID, lines)
	if err != nil {
		return File{}, err
	}
	out := File{AgentID: agentID, Filename: cur.Filename, Version: cur.Version, Lines: make([]AnnotatedLine, len(lines))}
	for i, l := range lines {
		out.Lines[i] = AnnotatedLine{Number: l.Number, Text: l.Text, Introduced: origin(l.Introduced, runs), Confirmed: origin(l.Confirmed, runs)}
	}
	return out, nil
}

// Revisions orders a file's versions oldest first with the change that produced each. A
// history row keeps a replaced version's content together with the change that replaced it,
// so version k's producer is recorded on the row of version k-1; the first version's
// producer is the file's creation.
func Revisions(cur workspace.File, hist []workspace.HistoryEntry) []Revision {
	sort.Slice(hist, func(i, j int) bool { return hist[i].Version < hist[j].Version })
	revs := make([]Revision, 0, len(hist)+1)
	produced := Change{Version: 1, Action: "create", Time: cur.CreateTime}
	for _, h := range hist {
		c := produced
		c.Version = h.Version
		revs = append(revs, Revision{Content: h.Content, Change: c})
		produced = Change{Version: h.Version + 1, Actor: h.Actor, Action: h.Action, Ref: h.Ref, Time: h.ReplacedAt}
	}
	produced.Version = cur.Version
	return append(revs, Revision{Content: cur.Content, Change: produced})
}

func (s *Service) runsOf(ctx context.Context, agentID int64, lines []Line) (map[string]ledger.Run, error) {
	seen := map[string]bool{}
	var ids []string
	for _, l := range lines {
		for _, ref := range []string{l.Introduced.Ref, l.Confirmed.Ref} {
			if ref != "" && !seen[ref] {
				seen[ref] = true
				ids = append(ids, ref)
			}
		}
	}
	if len(ids) == 0 || s.runs == nil {
		return nil, nil
	}
	runs, err := s.runs.Runs(ctx, agentID, ids)
	if err != nil {
		return nil, fmt.Errorf("runs behind the lines of agent %d's file: %w", agentID, err)
	}
	return runs, nil
}

func origin(c Change, runs map[string]ledger.Run) Origin {
	o := Origin{Change: c}
	if r, ok := runs[c.Ref]; ok {
		o.EventID, o.Conversations, o.RunKind = r.EventID, r.Conversations, r.Kind
	}
	return o
}
