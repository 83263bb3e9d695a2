// Package ledger records one row per summarize or emergence attempt (mate_memory_run):
// what was covered, the outcome and why, the model, tokens, latency and files changed.
package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/matememory/matememory/pkg/api"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/guard"
	"github.com/matememory/matememory/pkg/internal/store"
)

// Kinds of runs.
const (
	KindSummarize = "summarize"
	KindEmergence = "emergence"
)

// Run is one attempt.
type Run = api.Run

// Ledger writes and reads runs.
type Ledger struct {
	db  *gorm.DB
	now func() time.Time
}

// New builds a ledger.
func New(db *gorm.DB, now func() time.Time) *Ledger {
	if now == nil {
		now = time.Now
	}
	return &Ledger{db: db, now: now}
}

// Record stores r (assigning RunID and CreateTime when empty) and returns it.
func (l *Ledger) Record(ctx context.Context, r Run) (Run, error) {
	return l.record(l.db.WithContext(ctx), r)
}

// insertRun writes a store.MemoryRun row.
const insertRun = "INSERT INTO mate_memory_run (run_id, kind, agent_id, event_id, conversations, status, reason, model, " +
	"provider, tokens_in, tokens_out, latency_ms, files_changed, attempt, create_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

// RecordTx is Record inside tx, the unit of work of the effects the run reports (so the row
// and the effects commit together, or neither does).
func (l *Ledger) RecordTx(tx *store.Tx, r Run) (Run, error) { return l.record(tx.Join(), r) }

func (l *Ledger) record(tx *gorm.DB, r Run) (Run, error) {
	if r.RunID == "" {
		r.RunID = uuid.NewString()
	}
	if r.CreateTime.IsZero() {
		r.CreateTime = l.now().UTC()
	}
	if r.Conversations == nil {
		r.Conversations = []string{}
	}
	if r.FilesChanged == nil {
		r.FilesChanged = []string{}
	}
	r.Reason = guard.Redact(r.Reason)
	convs, _ := json.Marshal(r.Conversations)
	files, _ := json.Marshal(r.FilesChanged)
	// A plain statement rather than gorm's Create: every extraction writes one row, and the
	// row's id is never read back (issue 14).
	if err := tx.Exec(insertRun, r.RunID, r.Kind, r.AgentID, r.EventID, string(convs), r.Status, r.Reason, r.Model,
		r.Provider, r.TokensIn, r.TokensOut, r.LatencyMs, string(files), r.Attempt, r.CreateTime).Error; err != nil {
		return r, fmt.Errorf("record %s run for agent %d: %w", r.Kind, r.AgentID, err)
	}
	return r, nil
}

// Filter narrows List.
type Filter struct {
	AgentID int64
	// AgentIDs, when not nil, keeps runs of these agents (an empty slice matches none).
	AgentIDs []int64
	Kind     string
	EventID  string
	// Status, when set, keeps runs of that status; Since and Until (when not zero) bound
	// the creation time (Since inclusive, Until exclusive).
	Status       string
	Since, Until time.Time
	// BeforeRun, when set, keeps runs recorded before that run (the next page of a list).
	BeforeRun string
	Limit     int
}

// List returns runs, newest first.
func (l *Ledger) List(ctx context.Context, f Filter) ([]Run, error) {
	q := l.db.WithContext(ctx).Model(&store.MemoryRun{})
	if f.AgentID > 0 {
		q = q.Where("agent_id = ?", f.AgentID)
	}
	if f.AgentIDs != nil {
		if len(f.AgentIDs) == 0 {
			return []Run{}, nil
		}
		q = q.Where("agent_id IN ?", f.AgentIDs)
	}
	if f.Kind != "" {
		q = q.Where("kind = ?", f.Kind)
	}
	if f.EventID != "" {
		q = q.Where("event_id = ?", f.EventID)
	}
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if !f.Since.IsZero() {
		q = q.Where("create_time >= ?", f.Since.UTC())
	}
	if !f.Until.IsZero() {
		q = q.Where("create_time < ?", f.Until.UTC())
	}
	if f.BeforeRun != "" {
		q = q.Where("id < (?)", l.db.Model(&store.MemoryRun{}).Select("id").Where("run_id = ?", f.BeforeRun))
	}
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 100
	}
	var rows []store.MemoryRun
	if err := q.Order("id DESC").Limit(f.Limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	out := make([]Run, 0, len(rows))
	for _, r := range rows {
		out = append(out, fromRow(r))
	}
	return out, nil
}
