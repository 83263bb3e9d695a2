package bundle

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/matememory/matememory/pkg/internal/fault"
	"io"
	"time"

	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// Service exports and imports agents' bundles.
type Service struct {
	db        *gorm.DB
	maxBytes  int
	now       func() time.Time
	generator string
	tempDir   string
	fileHook  workspace.ChangeHook
	convHook  func(ctx context.Context, agentID int64, conversationID string, lastID int64)
	page      int
}

// Option configures a Service.
type Option func(*Service)

// WithMaxFileBytes is the workspace's file size limit (default 1 MiB): an import refuses a
// file larger than the workspace would accept.
func WithMaxFileBytes(n int) Option { return func(s *Service) { s.maxBytes = n } }

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// WithGenerator names the software in the manifest ("matememory v1.2.3").
func WithGenerator(g string) Option { return func(s *Service) { s.generator = g } }

// WithTempDir is where imports spool their body ("" = the system's temporary directory).
func WithTempDir(dir string) Option { return func(s *Service) { s.tempDir = dir } }

// WithFileHook is told of every file an import created or changed, after it committed (the
// recall indexer's and MCP's workspace change hooks).
func WithFileHook(h workspace.ChangeHook) Option { return func(s *Service) { s.fileHook = h } }

// WithConversationHook is told of every conversation an import added messages to, after it
// committed (the recall indexer, when conversations are a search source).
func WithConversationHook(h func(ctx context.Context, agentID int64, conversationID string, lastID int64)) Option {
	return func(s *Service) { s.convHook = h }
}

// New builds the service.
func New(db *gorm.DB, opts ...Option) *Service {
	s := &Service{db: db, maxBytes: 1 << 20, now: time.Now, page: 64}
	for _, o := range opts {
		o(s)
	}
	return s
}

// ExportSummary says what an export wrote.
type ExportSummary struct {
	Counts Counts
	Bytes  int64
}

// Export writes agentID's bundle to w, reading the database a page at a time inside one
// read-only transaction, so the bundle is one consistent snapshot and memory stays bounded
// (a page of files at the workspace's size limit). A missing agent is an error before
// anything is written; an error after the first line leaves the bundle without its
// checksums line, which an import refuses as truncated.
func (s *Service) Export(ctx context.Context, w io.Writer, agentID int64, inc Includes) (ExportSummary, error) {
	var sum ExportSummary
	if agentID <= 0 {
		return sum, invalidf("agentId must be a positive number, got %d", agentID)
	}
	// A read-only transaction is a deferred one on SQLite (a WAL snapshot that blocks no
	// writer; the pool's other transactions are immediate) and a consistent read on MySQL.
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var a store.Agent
		res := tx.Raw("SELECT * FROM mate_agent WHERE id = ?", agentID).Scan(&a)
		if res.Error != nil {
			return fmt.Errorf("read agent %d: %w", agentID, res.Error)
		}
		if res.RowsAffected == 0 {
			return &Error{Kind: fault.ErrNotFound, Msg: fmt.Sprintf("agent %d not found: it has never been used, so there is nothing to export", agentID)}
		}
		counts, err := s.count(tx, agentID, inc)
		if err != nil {
			return err
		}
		e := &encoder{w: bufio.NewWriterSize(w, 64<<10), d: newDigests()}
		e.enc = json.NewEncoder(&e.buf)
		e.enc.SetEscapeHTML(false)
		if err := e.write(KindManifest, Manifest{Kind: KindManifest, Format: Format, Version: Version, AgentID: agentID,
			CreatedAt: s.now().UTC(), Generator: s.generator, Includes: inc, Counts: counts}); err != nil {
			return err
		}
		if err := e.write(KindAgent, Agent{Kind: KindAgent, Language: a.Language, Timezone: a.Timezone, CreateTime: a.CreateTime}); err != nil {
			return err
		}
		if err := s.exportFiles(tx, e, agentID, inc.History); err != nil {
			return err
		}
		if err := s.exportCron(tx, e, agentID); err != nil {
			return err
		}
		if inc.Messages {
			if err := s.exportMessages(tx, e, agentID); err != nil {
				return err
			}
		}
		if inc.Ledger {
			if err := s.exportRuns(tx, e, agentID); err != nil {
				return err
			}
		}
		if e.d.counts != counts { // the snapshot guarantees it; a mismatch is a defect
			return fmt.Errorf("export of agent %d: counted %+v, wrote %+v", agentID, counts, e.d.counts)
		}
		if err := e.write(KindChecksums, e.d.sums()); err != nil {
			return err
		}
		sum.Counts = e.d.counts
		sum.Bytes = e.n
		return e.w.Flush()
	}, &sql.TxOptions{ReadOnly: true})
	return sum, err
}

func (s *Service) count(tx *gorm.DB, agentID int64, inc Includes) (Counts, error) {
	c := Counts{Agent: 1}
	q := []struct {
		on  bool
		n   *int64
		sql string
	}{
		{true, &c.File, "SELECT COUNT(*) FROM mate_workspace_file WHERE agent_id = ? AND deleted = 0"},
		{inc.History, &c.History, "SELECT COUNT(*) FROM mate_workspace_file_history h JOIN mate_workspace_file f ON f.id = h.file_id " +
			"WHERE f.agent_id = ? AND f.deleted = 0"},
		{true, &c.Cron, "SELECT COUNT(*) FROM mate_cron_job WHERE agent_id = ? AND deleted = 0"},
		{inc.Messages, &c.Message, "SELECT COUNT(*) FROM mate_message WHERE agent_id = ?"},
		{inc.Ledger, &c.Run, "SELECT COUNT(*) FROM mate_memory_run WHERE agent_id = ?"},
	}
	for _, x := range q {
		if !x.on {
			continue
		}
		if err := tx.Raw(x.sql, agentID).Scan(x.n).Error; err != nil {
			return c, fmt.Errorf("count records of agent %d: %w", agentID, err)
		}
	}
	return c, nil
}

// exportFiles writes the live files in id order, each followed by its history when asked.
func (s *Service) exportFiles(tx *gorm.DB, e *encoder, agentID int64, history bool) error {
	var last int64
	for {
		var rows []store.WorkspaceFile
		if err := tx.Where("agent_id = ? AND deleted = 0 AND id > ?", agentID, last).Order("id").Limit(s.page).Find(&rows).Error; err != nil {
			return fmt.Errorf("read files of agent %d: %w", agentID, err)
		}
		for _, r := range rows {
			last = r.ID
			if err := e.write(KindFile, File{Kind: KindFile, Filename: r.Filename, Content: r.Content, FileSize: r.FileSize,
				Enabled: r.Enabled, SortOrder: r.SortOrder, Version: r.Version, CreateTime: r.CreateTime, UpdateTime: r.UpdateTime}); err != nil {
				return err
			}
			if history {
				if err := s.exportHistory(tx, e, r); err != nil {
					return err
				}
			}
		}
		if len(rows) < s.page {
			return nil
		}
	}
}

// exportHistory writes a file's history oldest version first (an import checks that order,
// which keeps it from holding a file's versions in memory).
func (s *Service) exportHistory(tx *gorm.DB, e *encoder, f store.WorkspaceFile) error {
	var lastVer, last int64
	for {
		var rows []store.WorkspaceFileHistory
		if err := tx.Where("file_id = ? AND (version > ? OR (version = ? AND id > ?))", f.ID, lastVer, lastVer, last).
			Order("version, id").Limit(s.page).Find(&rows).Error; err != nil {
			return fmt.Errorf("read history of %s of agent %d: %w", f.Filename, f.AgentID, err)
		}
		for _, r := range rows {
			lastVer, last = r.Version, r.ID
			if err := e.write(KindHistory, History{Kind: KindHistory, Filename: f.Filename, Version: r.Version, Content: r.Content,
				Enabled: r.Enabled, Action: r.Action, Actor: r.Actor, Ref: r.Ref, CreateTime: r.CreateTime}); err != nil {
				return err
			}
		}
		if len(rows) < s.page {
			return nil
		}
	}
}

func (s *Service) exportCron(tx *gorm.DB, e *encoder, agentID int64) error {
	return pages(tx, s.page, "mate_cron_job", "agent_id = ? AND deleted = 0", agentID, func(r store.CronJob) (int64, error) {
		return r.ID, e.write(KindCron, Cron{Kind: KindCron, Name: r.Name, CronExpression: r.CronExpression, Timezone: r.Timezone,
			TaskType: r.TaskType, TriggerMessage: r.TriggerMessage, RequestBody: r.RequestBody, Enabled: r.Enabled,
			NextRunTime: r.NextRunTime, LastRunTime: r.LastRunTime, CreateTime: r.CreateTime, UpdateTime: r.UpdateTime})
	})
}

func (s *Service) exportMessages(tx *gorm.DB, e *encoder, agentID int64) error {
	return pages(tx, s.page, "mate_message", "agent_id = ?", agentID, func(r store.Message) (int64, error) {
		return r.ID, e.write(KindMessage, Message{Kind: KindMessage, ConversationID: r.ConversationID, Role: r.Role, Content: r.Content,
			ToolCalls: r.ToolCalls, ToolCallID: r.ToolCallID, Name: r.Name, CreateTime: r.CreateTime})
	})
}

func (s *Service) exportRuns(tx *gorm.DB, e *encoder, agentID int64) error {
	return pages(tx, s.page, "mate_memory_run", "agent_id = ?", agentID, func(r store.MemoryRun) (int64, error) {
		return r.ID, e.write(KindRun, Run{Kind: KindRun, RunID: r.RunID, RunKind: r.Kind, EventID: r.EventID, Conversations: r.Conversations,
			Status: r.Status, Reason: r.Reason, Model: r.Model, Provider: r.Provider, TokensIn: r.TokensIn, TokensOut: r.TokensOut,
			LatencyMs: r.LatencyMs, FilesChanged: r.FilesChanged, Attempt: r.Attempt, CreateTime: r.CreateTime})
	})
}

// pages reads table's rows matching where (with agentID) in id order, size at a time, and
// hands each to fn, which returns the row's id.
func pages[T any](tx *gorm.DB, size int, table, where string, agentID int64, fn func(T) (int64, error)) error {
	var last int64
	for {
		var rows []T
		if err := tx.Table(table).Where(where+" AND id > ?", agentID, last).Order("id").Limit(size).Find(&rows).Error; err != nil {
			return fmt.Errorf("read %s of agent %d: %w", table, agentID, err)
		}
		for _, r := range rows {
			id, err := fn(r)
			if err != nil {
				return err
			}
			last = id
		}
		if len(rows) < size {
			return nil
		}
	}
}

// encoder writes records as lines and keeps their checksums.
type encoder struct {
	w   *bufio.Writer
	buf bytes.Buffer
	enc *json.Encoder
	d   *digests
	n   int64
}

// ErrWrite wraps a failure to write the bundle to its destination (a client that went
// away), as opposed to a failure to read the database.
var ErrWrite = errors.New("write bundle")

func (e *encoder) write(kind string, v any) error {
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil { // Encode appends the "\n"
		return fmt.Errorf("encode %s record: %w", kind, err)
	}
	b := e.buf.Bytes()
	if kind != KindChecksums {
		e.d.line(kind, b)
	}
	n, err := e.w.Write(b)
	e.n += int64(n)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	return nil
}
