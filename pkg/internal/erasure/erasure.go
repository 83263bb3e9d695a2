// Package erasure removes every trace of an agent from every store MateMemory writes: the
// database (files and their history, messages, watermarks, effect keys, ledger rows, cron
// jobs, the recall index and the embeddings only it used), the NATS KV buckets (its lease and
// cooldown record, its context summaries, its manual-emergence key) and the JetStream streams
// (every message on its subjects, dead letters included), down to the bytes on disk: SQLite
// deletes overwrite with zeros (secure_delete) and the database is vacuumed and its WAL
// truncated; JetStream messages are erased with the server's secure delete, which overwrites
// them in the file store. A tombstone (store.AgentErasure) keeps an event from before the
// erasure, in flight, delayed or replayed, from bringing anything back, and holds the
// erasure's receipt (counts, no content).
package erasure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/api"
	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/emergence"
	"github.com/matememory/matememory/pkg/internal/fence"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/scheduler"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/window"
)

// Receipt says what an erasure removed from each store, with counts, and nothing else: the
// wire type the REST port answers with and pkg/client decodes.
type Receipt = api.ErasureReceipt

// Deps are what an erasure reaches.
type Deps struct {
	DB *gorm.DB
	// JS is nil in a process without the bus (only the database is erased then).
	JS jetstream.JetStream
	// Replicas of MATE_ERASURES, where the erasure's notice goes (mate.nats.replicas).
	Replicas int
	// Leases is the per-agent lease bucket: the erasure holds the agent's lease while it
	// deletes, so no extraction or emergence of the agent commits meanwhile.
	Leases *lease.Manager
	// CloseSessions closes the agent's MCP sessions in this process and says how many.
	CloseSessions func(agentID int64) int
	// ForgetSearch drops the agent's memory search snapshot in this process: the cached one
	// and its snapshot file (recall.Searcher.Forget; nil: none).
	ForgetSearch func(agentID int64) error
	// Forget drops the rest of what this process caches of the agent (that it was seeded,
	// its context-window memos) once its rows are gone. The other processes drop theirs on
	// the erasure's notice (Listen); this one does at once, so its next request for the id
	// starts it anew.
	Forget func(agentID int64)
	Log    *slog.Logger
	Now    func() time.Time
	// LeaseWait bounds the wait for a lease held by a worker (default 2 minutes).
	LeaseWait time.Duration
}

// Service erases agents.
type Service struct{ d Deps }

// New returns an erasure service.
func New(d Deps) *Service {
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.LeaseWait <= 0 {
		d.LeaseWait = 2 * time.Minute
	}
	return &Service{d: d}
}

// ErrLeaseHeld: the agent's lease stayed held by a worker for the whole wait.
var ErrLeaseHeld = errors.New("the agent's memory is being written by a worker; try the erasure again in a minute")

// EraseAgent removes every trace of the agent and returns the receipt, also recorded in the
// agent's tombstone. It is idempotent: erasing an erased agent again finds nothing more.
func (s *Service) EraseAgent(ctx context.Context, agentID int64, actor string) (Receipt, error) {
	r := Receipt{AgentID: agentID, Actor: actor, Rows: map[string]int64{}, Messages: map[string]int64{}}
	var l *lease.Lease
	if s.d.Leases != nil {
		var err error
		if l, err = s.acquire(ctx, agentID); err != nil {
			return r, err
		}
		defer func() {
			// Released as an empty record (no cooldown, waiter or coalesced events: they name
			// the agent's events and conversations), then every earlier revision is erased.
			// A record a worker writes after the release is newer and stays.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := l.Release(rctx, func(rec *lease.Record) { *rec = lease.Record{V: rec.V} }); err != nil {
				s.d.Log.Warn("erasure: release the agent's lease", "agent", agentID, "err", err)
				return
			}
			if s.d.JS == nil {
				return
			}
			st, err := s.d.Leases.Read(rctx, agentID)
			if err != nil {
				return
			}
			n, err := s.eraseSubjectBefore(rctx, "KV_"+bus.BucketLease, "$KV."+bus.BucketLease+"."+strconv.FormatInt(agentID, 10), st.Revision)
			if err != nil {
				s.d.Log.Warn("erasure: erase the agent's earlier lease records", "agent", agentID, "err", err)
			}
			r.Messages["KV_"+bus.BucketLease] += n
		}()
	}
	r.ErasedAt = s.d.Now().UTC()
	convs, langs, err := s.conversations(ctx, agentID)
	if err != nil {
		return r, err
	}
	if err := s.eraseRows(ctx, agentID, l, &r); err != nil {
		return r, err
	}
	s.forget(agentID)
	if err := s.forgetSearch(agentID); err != nil {
		return r, err
	}
	if s.d.DB.Dialector.Name() == "sqlite" {
		if err := s.compact(ctx); err != nil {
			return r, fmt.Errorf("erase agent %d: rows deleted, but compacting the SQLite file failed (run the erasure again): %w", agentID, err)
		}
		r.Vacuumed = true
	}
	if s.d.JS != nil {
		if err := s.eraseStreams(ctx, agentID, convs, langs, &r); err != nil {
			return r, fmt.Errorf("erase agent %d: database erased, JetStream not completely (run the erasure again): %w", agentID, err)
		}
	}
	if s.d.CloseSessions != nil {
		r.MCPSessions = s.d.CloseSessions(agentID)
	}
	if err := s.announce(ctx, Notice{AgentID: agentID, Scope: ScopeAgent, ErasedAt: r.ErasedAt}); err != nil {
		return r, fmt.Errorf("erase agent %d: every store erased, but %w (run the erasure again)", agentID, err)
	}
	r.Kept = []string{
		"mate_agent_erasure: the tombstone (agent id, time, actor, this receipt's counts) that refuses the agent's events from before the erasure",
		"mate_agent_fence: the agent's fencing token (two numbers), so a write from a lease held before the erasure still fails",
	}
	receipt, _ := json.Marshal(r)
	if err := s.d.DB.WithContext(ctx).Model(&store.AgentErasure{}).Where("agent_id = ?", agentID).
		Update("receipt", string(receipt)).Error; err != nil {
		return r, fmt.Errorf("record the receipt of agent %d's erasure: %w", agentID, err)
	}
	s.d.Log.Info("agent erased", "agent", agentID, "actor", actor, "rows", r.Rows, "messages", r.Messages)
	return r, nil
}

func (s *Service) forget(agentID int64) {
	if s.d.Forget != nil {
		s.d.Forget(agentID)
	}
}

// forgetSearch drops the agent's search snapshot, after its rows are gone (a refresh then
// finds nothing to put back).
func (s *Service) forgetSearch(agentID int64) error {
	if s.d.ForgetSearch == nil {
		return nil
	}
	if err := s.d.ForgetSearch(agentID); err != nil {
		return fmt.Errorf("erase agent %d: rows deleted, but its search snapshot file stays (run the erasure again): %w", agentID, err)
	}
	return nil
}

func (s *Service) acquire(ctx context.Context, agentID int64) (*lease.Lease, error) {
	deadline := time.Now().Add(s.d.LeaseWait)
	for {
		l, err := s.d.Leases.Acquire(ctx, agentID, "erasure")
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, lease.ErrHeld) {
			return nil, fmt.Errorf("take agent %d's lease for the erasure: %w", agentID, err)
		}
		if time.Now().After(deadline) {
			return nil, ErrLeaseHeld
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// conversations are the agent's conversation ids and languages, read before the rows go:
// the summary cache's keys are derived from them.
func (s *Service) conversations(ctx context.Context, agentID int64) ([]string, []string, error) {
	var convs []string
	err := s.d.DB.WithContext(ctx).Raw(`SELECT DISTINCT conversation_id FROM mate_message WHERE agent_id = ?
		UNION SELECT conversation_id FROM mate_extraction_watermark WHERE agent_id = ?`, agentID, agentID).Scan(&convs).Error
	if err != nil {
		return nil, nil, fmt.Errorf("list agent %d's conversations: %w", agentID, err)
	}
	langs := []string{"zh", "en"}
	var lang []string
	if err := s.d.DB.WithContext(ctx).Raw("SELECT language FROM mate_agent WHERE id = ?", agentID).Scan(&lang).Error; err != nil {
		return nil, nil, err
	}
	for _, l := range lang {
		if l != "zh" && l != "en" {
			langs = append(langs, l)
		}
	}
	return convs, langs, nil
}

// eraseRows deletes the agent's rows in one transaction that also writes the tombstone: a
// write of the agent that checks the tombstone in its own transaction (the pipeline's) either
// commits before and is deleted here, or sees the tombstone and fails. The same transaction
// raises the agent's fence to the erasure's lease (l; nil without the lease bucket), so a
// worker whose lease from before the erasure ran out writes nothing after it (the fence row
// stays for that).
func (s *Service) eraseRows(ctx context.Context, agentID int64, l *lease.Lease, r *Receipt) error {
	id := strconv.FormatInt(agentID, 10)
	stmts := []struct {
		table, sql string
		args       []any
	}{
		// Embeddings first, while the chunks still say which hashes were the agent's: an
		// embedding another agent's chunk shares stays (it is that agent's too).
		{"mate_recall_embedding", `DELETE FROM mate_recall_embedding WHERE hash IN (SELECT hash FROM mate_recall_chunk WHERE agent_id = ?)
			AND NOT EXISTS (SELECT 1 FROM mate_recall_chunk c WHERE c.hash = mate_recall_embedding.hash AND c.agent_id <> ?)`, []any{agentID, agentID}},
		{"mate_recall_chunk", "DELETE FROM mate_recall_chunk WHERE agent_id = ?", []any{agentID}},
		{"mate_recall_file", "DELETE FROM mate_recall_file WHERE agent_id = ?", []any{agentID}},
		{"mate_recall_agent", "DELETE FROM mate_recall_agent WHERE agent_id = ?", []any{agentID}},
		{"mate_workspace_file_history", "DELETE FROM mate_workspace_file_history WHERE agent_id = ?", []any{agentID}},
		{"mate_workspace_file", "DELETE FROM mate_workspace_file WHERE agent_id = ?", []any{agentID}},
		{"mate_message", "DELETE FROM mate_message WHERE agent_id = ?", []any{agentID}},
		{"mate_extraction_watermark", "DELETE FROM mate_extraction_watermark WHERE agent_id = ?", []any{agentID}},
		{"mate_applied_effect", "DELETE FROM mate_applied_effect WHERE `key` LIKE ? OR `key` LIKE ?",
			[]any{"event:messages:" + id + ":%", "summarize:daily:" + id + ":%"}},
		{"mate_memory_run", "DELETE FROM mate_memory_run WHERE agent_id = ?", []any{agentID}},
		{"mate_cron_job", "DELETE FROM mate_cron_job WHERE agent_id = ?", []any{agentID}},
		{"mate_agent_budget", "DELETE FROM mate_agent_budget WHERE agent_id = ?", []any{agentID}},
		{"mate_agent", "DELETE FROM mate_agent WHERE id = ?", []any{agentID}},
	}
	return s.d.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := raiseFence(tx, agentID, l, r.ErasedAt); err != nil {
			return err
		}
		res := tx.Exec("UPDATE mate_agent_erasure SET erased_at = ?, actor = ?, erasures = erasures + 1 WHERE agent_id = ?", r.ErasedAt, r.Actor, agentID)
		if res.Error != nil {
			return fmt.Errorf("write agent %d's tombstone: %w", agentID, res.Error)
		}
		if res.RowsAffected == 0 {
			if err := tx.Create(&store.AgentErasure{AgentID: agentID, ErasedAt: r.ErasedAt, Actor: r.Actor, Erasures: 1}).Error; err != nil {
				return fmt.Errorf("write agent %d's tombstone: %w", agentID, err)
			}
		}
		for _, st := range stmts {
			res := tx.Exec(st.sql, st.args...)
			if res.Error != nil {
				return fmt.Errorf("erase agent %d's rows of %s: %w", agentID, st.table, res.Error)
			}
			r.Rows[st.table] = res.RowsAffected
		}
		return nil
	})
}

// raiseFence raises the agent's fence to l's token in tx (nothing when l is nil).
func raiseFence(tx *gorm.DB, agentID int64, l *lease.Lease, now time.Time) error {
	if l == nil {
		return nil
	}
	if err := fence.Check(store.InTx(tx), agentID, fence.TokenOf(l), now); err != nil {
		return fmt.Errorf("raise agent %d's fence for the erasure: %w", agentID, err)
	}
	return nil
}

// compact rewrites the SQLite database without the free pages the deletes left (zeroed by
// secure_delete already; a database written before secure_delete was on may still hold
// older rows' bytes in them) and truncates the WAL, whose frames held the rows too.
func (s *Service) compact(ctx context.Context) error {
	db := s.d.DB.WithContext(ctx)
	if err := db.Exec("VACUUM").Error; err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	for i := 0; ; i++ {
		var busy, logFrames, checkpointed int
		row := db.Raw("PRAGMA wal_checkpoint(TRUNCATE)").Row()
		if err := row.Scan(&busy, &logFrames, &checkpointed); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if busy == 0 {
			return nil
		}
		if i >= 50 {
			return errors.New("checkpoint: readers kept the WAL busy")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// eraseStreams erases the agent's messages in every stream and its KV records.
func (s *Service) eraseStreams(ctx context.Context, agentID int64, convs, langs []string, r *Receipt) error {
	agentSubjects := []struct{ stream, subject string }{
		{bus.StreamEvents, bus.AgentSubject(bus.SubjectCompleted, agentID)},
		{bus.StreamEvents, bus.AgentSubject(bus.SubjectSummarize, agentID)},
		{emergence.Stream, bus.AgentSubject(bus.SubjectEmergence, agentID)},
		{scheduler.TriggerStream, bus.AgentSubject(bus.SubjectAgentTrigger, agentID)},
		{recall.Stream, bus.AgentSubject(recall.SubjectIndex, agentID)},
	}
	for _, as := range agentSubjects {
		n, err := s.eraseSubject(ctx, as.stream, as.subject)
		if err != nil {
			return err
		}
		r.Messages[as.stream] += n
		n, err = s.eraseSubject(ctx, bus.StreamDLQ, bus.SubjectDeadLetter+"."+as.subject)
		if err != nil {
			return err
		}
		r.Messages[bus.StreamDLQ] += n
	}
	id := strconv.FormatInt(agentID, 10)
	n, err := s.eraseKV(ctx, bus.BucketManualEmergence, id)
	if err != nil {
		return err
	}
	r.Messages["KV_"+bus.BucketManualEmergence] += n
	for _, c := range convs {
		for _, lang := range langs {
			n, err := s.eraseKV(ctx, window.Bucket, window.CacheKeyPrefix(agentID, c, lang)+">")
			if err != nil {
				return err
			}
			r.Messages["KV_"+window.Bucket] += n
		}
	}
	return nil
}

// eraseKV erases every revision of the bucket's keys matching key (a NATS subject token
// pattern): the KV's own delete and purge leave the values' bytes in the file store, so its
// messages are erased like any other stream's.
func (s *Service) eraseKV(ctx context.Context, bucket, key string) (int64, error) {
	return s.eraseSubject(ctx, "KV_"+bucket, "$KV."+bucket+"."+key)
}

// eraseSubject erases, with the server's secure delete (the message is overwritten in the
// file store, not only marked deleted), every message of stream on subject. A stream that
// does not exist here (a part not enabled) holds nothing.
func (s *Service) eraseSubject(ctx context.Context, streamName, subject string) (int64, error) {
	return s.eraseSubjectBefore(ctx, streamName, subject, 0)
}

// eraseSubjectBefore is eraseSubject for the messages before sequence before (0: all).
func (s *Service) eraseSubjectBefore(ctx context.Context, streamName, subject string, before uint64) (int64, error) {
	return s.eraseWhere(ctx, streamName, subject, before, nil)
}

// eraseWhere erases the messages of stream on subject before sequence before (0: all) whose
// payload match says is one (nil: every one).
func (s *Service) eraseWhere(ctx context.Context, streamName, subject string, before uint64, match func([]byte) bool) (int64, error) {
	st, err := s.d.JS.Stream(ctx, streamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("open stream %s: %w", streamName, err)
	}
	var n int64
	for seq := uint64(1); ; {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("find %s messages on %s: %w", streamName, subject, err)
		}
		if before > 0 && m.Sequence >= before {
			return n, nil
		}
		if match == nil || match(m.Data) {
			if err := st.SecureDeleteMsg(ctx, m.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
				return n, fmt.Errorf("erase %s message %d: %w", streamName, m.Sequence, err)
			}
			n++
		}
		seq = m.Sequence + 1
	}
}

// ConversationReceipt says what the erasure of one conversation removed, and which memory
// file versions the extractions that read it wrote (pkg/api's wire type).
type ConversationReceipt = api.ErasureConversationReceipt

// DerivedVersion is a memory file version a run that covered an erased conversation wrote.
type DerivedVersion = api.ErasureDerivedVersion

// EraseConversation removes one conversation of an agent: its messages, watermark, recall
// chunks, context summaries, the ledger rows of the runs that covered it, and its events
// (completed events, summarize requests, and their dead letters) on the streams, by secure
// delete. It lists the memory file versions those runs wrote, for review.
func (s *Service) EraseConversation(ctx context.Context, agentID int64, conv, actor string) (ConversationReceipt, error) {
	r := ConversationReceipt{AgentID: agentID, ConversationID: conv, Actor: actor, Rows: map[string]int64{}, Messages: map[string]int64{}}
	var l *lease.Lease
	if s.d.Leases != nil {
		var release func()
		var err error
		if l, release, err = s.holdForConversation(ctx, agentID, conv); err != nil {
			return r, err
		}
		defer release()
	}
	r.ErasedAt = s.d.Now().UTC()
	db := s.d.DB.WithContext(ctx)
	runIDs, derived, err := conversationRuns(db, agentID, conv)
	if err != nil {
		return r, err
	}
	// Always a list on the wire ([] when no run covered the conversation), as documented.
	r.Derived = append([]DerivedVersion{}, derived...)
	if err := deleteConversationRows(db, agentID, conv, runIDs, l, r.ErasedAt, r.Rows); err != nil {
		return r, err
	}
	// The agent's search snapshot file holds the conversation's chunks too.
	if err := s.forgetSearch(agentID); err != nil {
		return r, err
	}
	if s.d.DB.Dialector.Name() == "sqlite" {
		if err := s.compact(ctx); err != nil {
			return r, err
		}
	}
	if s.d.JS != nil {
		if err := s.eraseConversationMessages(ctx, agentID, conv, r.Messages); err != nil {
			return r, err
		}
	}
	// Other processes' search snapshots hold the conversation's chunks too.
	if err := s.announce(ctx, Notice{AgentID: agentID, Scope: ScopeConversation, ErasedAt: r.ErasedAt}); err != nil {
		return r, fmt.Errorf("erase conversation %s: every store erased, but %w (run the erasure again)", conv, err)
	}
	s.d.Log.Info("conversation erased", "agent", agentID, "actor", actor, "rows", r.Rows, "messages", r.Messages, "derived", len(r.Derived))
	return r, nil
}

// holdForConversation takes the agent's lease for a conversation's erasure; release gives
// it back, taking the conversation's coalesced events out of the agent's record.
func (s *Service) holdForConversation(ctx context.Context, agentID int64, conv string) (*lease.Lease, func(), error) {
	l, err := s.acquire(ctx, agentID)
	if err != nil {
		return nil, nil, err
	}
	return l, func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		// The coalesced events of the conversation leave the agent's record.
		_ = l.Release(rctx, func(rec *lease.Record) {
			kept := rec.Coalesced[:0]
			for _, c := range rec.Coalesced {
				if c.ConversationID != conv {
					kept = append(kept, c)
				}
			}
			rec.Coalesced = kept
		})
	}, nil
}

// conversationRuns are the ledger's runs that covered the conversation, and the file
// versions they wrote (listed in the receipt for review).
func conversationRuns(db *gorm.DB, agentID int64, conv string) (runIDs []string, derived []DerivedVersion, err error) {
	var runs []struct {
		RunID         string
		Conversations string
		FilesChanged  string
	}
	if err := db.Raw("SELECT run_id, conversations, files_changed FROM mate_memory_run WHERE agent_id = ? AND INSTR(conversations, ?) > 0", agentID, conv).Scan(&runs).Error; err != nil {
		return nil, nil, fmt.Errorf("find the runs of conversation %s: %w", conv, err)
	}
	for _, run := range runs {
		var convs, files []string
		if json.Unmarshal([]byte(run.Conversations), &convs) != nil || !slices.Contains(convs, conv) {
			continue
		}
		runIDs = append(runIDs, run.RunID)
		_ = json.Unmarshal([]byte(run.FilesChanged), &files)
		for _, f := range files {
			d := DerivedVersion{Filename: f, RunID: run.RunID}
			// A change keeps the version it replaced in history, with the change's run: the
			// run wrote the next one. (A file the run created has no history row yet.)
			var prev []int64
			if err := db.Raw("SELECT version FROM mate_workspace_file_history WHERE agent_id = ? AND filename = ? AND ref = ?", agentID, f, run.RunID).Scan(&prev).Error; err != nil {
				return nil, nil, fmt.Errorf("list what the runs of conversation %s wrote: %w", conv, err)
			}
			if len(prev) > 0 {
				d.Version, d.Action = prev[0]+1, "changed"
			} else {
				d.Action = "created or changed"
			}
			derived = append(derived, d)
		}
	}
	return runIDs, derived, nil
}

// deleteConversationRows deletes, in one transaction, the conversation's messages,
// watermark, recall chunks and the runs that covered it; rows counts each table's. It raises
// the agent's fence to the erasure's lease l, as eraseRows does: a worker that read the
// conversation under an earlier lease writes nothing of it.
func deleteConversationRows(db *gorm.DB, agentID int64, conv string, runIDs []string, l *lease.Lease, now time.Time, rows map[string]int64) error {
	type stmt struct {
		table, sql string
		args       []any
	}
	return db.Transaction(func(tx *gorm.DB) error {
		if err := raiseFence(tx, agentID, l, now); err != nil {
			return err
		}
		stmts := []stmt{
			{"mate_message", "DELETE FROM mate_message WHERE agent_id = ? AND conversation_id = ?", []any{agentID, conv}},
			{"mate_extraction_watermark", "DELETE FROM mate_extraction_watermark WHERE agent_id = ? AND conversation_id = ?", []any{agentID, conv}},
			{"mate_recall_chunk", "DELETE FROM mate_recall_chunk WHERE agent_id = ? AND filename = ?", []any{agentID, recall.ConversationPrefix + conv}},
			{"mate_recall_file", "DELETE FROM mate_recall_file WHERE agent_id = ? AND filename = ?", []any{agentID, recall.ConversationPrefix + conv}},
		}
		if len(runIDs) > 0 {
			stmts = append(stmts, stmt{"mate_memory_run", "DELETE FROM mate_memory_run WHERE agent_id = ? AND run_id IN ?", []any{agentID, runIDs}})
		}
		for _, st := range stmts {
			res := tx.Exec(st.sql, st.args...)
			if res.Error != nil {
				return fmt.Errorf("erase conversation %s from %s: %w", conv, st.table, res.Error)
			}
			rows[st.table] = res.RowsAffected
		}
		return nil
	})
}

// eraseConversationMessages securely deletes the conversation's events and summarize
// requests (and their dead letters) from JetStream and its context summaries from KV;
// messages counts them by stream or bucket.
func (s *Service) eraseConversationMessages(ctx context.Context, agentID int64, conv string, messages map[string]int64) error {
	for _, as := range []struct{ stream, subject string }{
		{bus.StreamEvents, bus.AgentSubject(bus.SubjectCompleted, agentID)},
		{bus.StreamEvents, bus.AgentSubject(bus.SubjectSummarize, agentID)},
		{bus.StreamDLQ, bus.SubjectDeadLetter + "." + bus.AgentSubject(bus.SubjectCompleted, agentID)},
		{bus.StreamDLQ, bus.SubjectDeadLetter + "." + bus.AgentSubject(bus.SubjectSummarize, agentID)},
	} {
		n, err := s.eraseWhere(ctx, as.stream, as.subject, 0, func(data []byte) bool {
			var m struct {
				ConversationID string `json:"conversationId"`
			}
			return json.Unmarshal(data, &m) == nil && m.ConversationID == conv
		})
		if err != nil {
			return err
		}
		messages[as.stream] += n
	}
	for _, lang := range []string{"zh", "en"} {
		n, err := s.eraseKV(ctx, window.Bucket, window.CacheKeyPrefix(agentID, conv, lang)+">")
		if err != nil {
			return err
		}
		messages["KV_"+window.Bucket] += n
	}
	return nil
}
