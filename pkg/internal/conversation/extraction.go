package conversation

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/store"
)

// Extraction progress. A conversation takes part in memory extraction once it is registered:
// a watermark row (mate_extraction_watermark) at message 0. An extraction covers the
// messages above the watermarks of the agent's registered conversations and moves each
// watermark to the last message it covered. The Store owns both tables, so every read of
// the messages against their watermarks is here, and the watermark is read in one place
// (LastExtracted). The statements an extraction runs on every event are plain SQL
// (issue 14).

// Progress is a conversation's stored messages and how far they are extracted.
type Progress struct {
	// Count is how many messages are stored; Last is the newest one's id (0: none).
	Count, Last int64
	// Extracted is the watermark: the last message extracted (0: none yet). Registered is
	// false when the conversation has no watermark row yet.
	Extracted  int64
	Registered bool
	// ErasedAt is when the agent was last erased (nil: never). The tombstone
	// (mate_agent_erasure, store.ErasedAt) comes with the same statement so that refusing an
	// event from before an erasure costs no extra round trip per event.
	ErasedAt *time.Time
}

// Progress reads a conversation's Progress in one statement.
func (s *Store) Progress(ctx context.Context, agentID int64, conv string) (Progress, error) {
	var row struct {
		N      int64
		Last   *int64
		WM     *int64
		Erased *time.Time
	}
	err := s.db.WithContext(ctx).Raw("SELECT COUNT(*) AS n, MAX(id) AS last, "+
		"(SELECT w.last_message_id FROM mate_extraction_watermark AS w WHERE w.agent_id = ? AND w.conversation_id = ?) AS wm, "+
		"(SELECT e.erased_at FROM mate_agent_erasure AS e WHERE e.agent_id = ?) AS erased "+
		"FROM mate_message WHERE agent_id = ? AND conversation_id = ?", agentID, conv, agentID, agentID, conv).Scan(&row).Error
	if err != nil {
		return Progress{}, fmt.Errorf("count messages of conversation %s: %w", conv, err)
	}
	p := Progress{Count: row.N, ErasedAt: row.Erased}
	if row.Last != nil {
		p.Last = *row.Last
	}
	if row.WM != nil {
		p.Extracted, p.Registered = *row.WM, true
	}
	return p, nil
}

// LastExtracted is the conversation's watermark: the id of the last message extracted into
// long-term memory (0 when none). It implements window.Watermarks.
func (s *Store) LastExtracted(ctx context.Context, agentID int64, conv string) (int64, error) {
	var wm []int64
	if err := s.db.WithContext(ctx).Raw("SELECT last_message_id FROM mate_extraction_watermark WHERE agent_id = ? AND conversation_id = ?",
		agentID, conv).Scan(&wm).Error; err != nil {
		return 0, fmt.Errorf("read extraction watermark of %s: %w", conv, err)
	}
	if len(wm) == 0 {
		return 0, nil
	}
	return wm[0], nil
}

// Watermarks are the watermarks of every registered conversation of the agent.
func (s *Store) Watermarks(ctx context.Context, agentID int64) (map[string]int64, error) {
	var wms []store.ExtractionWatermark
	if err := s.db.WithContext(ctx).Raw("SELECT * FROM mate_extraction_watermark WHERE agent_id = ?", agentID).Scan(&wms).Error; err != nil {
		return nil, fmt.Errorf("read watermarks: %w", err)
	}
	out := make(map[string]int64, len(wms))
	for _, w := range wms {
		out[w.ConversationID] = w.LastMessageID
	}
	return out, nil
}

// Register makes the conversation take part in extraction (a watermark row at message 0),
// when it does not yet: one statement; a row already there is left as it is.
func (s *Store) Register(ctx context.Context, agentID int64, conv string, now time.Time) error {
	insert := "INSERT INTO mate_extraction_watermark (agent_id, conversation_id, last_message_id, update_time) VALUES (?, ?, 0, ?) "
	if s.db.Dialector.Name() == "mysql" {
		insert += "ON DUPLICATE KEY UPDATE agent_id = agent_id"
	} else {
		insert += "ON CONFLICT DO NOTHING"
	}
	return s.db.WithContext(ctx).Exec(insert, agentID, conv, now.UTC()).Error
}

// After reads up to limit of the conversation's messages with id > afterID, oldest first.
func (s *Store) After(ctx context.Context, agentID int64, conv string, afterID int64, limit int) ([]store.Message, error) {
	var rows []store.Message
	if err := s.db.WithContext(ctx).Raw("SELECT * FROM mate_message WHERE agent_id = ? AND conversation_id = ? AND id > ? ORDER BY id LIMIT ?",
		agentID, conv, afterID, limit).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read pending messages of %s: %w", conv, err)
	}
	return rows, nil
}

// PendingElsewhere reads up to limit of the agent's messages above their conversation's
// watermark, in registered conversations other than except, with id > afterID, in id order.
func (s *Store) PendingElsewhere(ctx context.Context, agentID int64, except string, afterID int64, limit int) ([]store.Message, error) {
	var rows []store.Message
	err := s.db.WithContext(ctx).Raw("SELECT m.* FROM mate_message AS m "+
		"JOIN mate_extraction_watermark AS w ON w.agent_id = m.agent_id AND w.conversation_id = m.conversation_id "+
		"WHERE m.agent_id = ? AND m.id > w.last_message_id AND m.id > ? AND m.conversation_id <> ? ORDER BY m.id LIMIT ?",
		agentID, afterID, except, limit).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("read pending messages: %w", err)
	}
	return rows, nil
}

// Before reads up to limit of the conversation's messages with id < beforeID, newest first.
func (s *Store) Before(ctx context.Context, agentID int64, conv string, beforeID int64, limit int) ([]store.Message, error) {
	var rows []store.Message
	if err := s.db.WithContext(ctx).Where("agent_id = ? AND conversation_id = ? AND id < ?", agentID, conv, beforeID).
		Order("id DESC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read messages of %s: %w", conv, err)
	}
	return rows, nil
}

// LastUserMessage is the conversation's last stored user message (ok false: none).
func (s *Store) LastUserMessage(ctx context.Context, agentID int64, conv string) (string, bool, error) {
	var row store.Message
	err := s.db.WithContext(ctx).Select("content").
		Where("agent_id = ? AND conversation_id = ? AND role = ?", agentID, conv, "user").
		Order("id DESC").Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read the last user message of conversation %s: %w", conv, err)
	}
	return row.Content, true, nil
}

// PendingConversation is a registered conversation with messages above its watermark.
type PendingConversation struct {
	ConversationID string
	// Extracted is the watermark; Messages counts those above it, First and Last are the
	// first and last of them, and Since is the first one's time.
	Extracted, Messages, First, Last int64
	Since                            time.Time
}

// PendingConversations lists up to limit of the agent's registered conversations with
// messages above their watermark, oldest pending message first.
func (s *Store) PendingConversations(ctx context.Context, agentID int64, limit int) ([]PendingConversation, error) {
	var rows []struct {
		ConversationID string
		Wm             int64
		N              int64
		First          int64
		Last           int64
	}
	err := s.db.WithContext(ctx).Raw("SELECT w.conversation_id AS conversation_id, w.last_message_id AS wm, COUNT(*) AS n, MIN(m.id) AS first, MAX(m.id) AS last "+
		"FROM mate_extraction_watermark AS w JOIN mate_message AS m "+
		"ON m.agent_id = w.agent_id AND m.conversation_id = w.conversation_id AND m.id > w.last_message_id "+
		"WHERE w.agent_id = ? GROUP BY w.conversation_id, w.last_message_id ORDER BY MIN(m.id) LIMIT ?",
		agentID, limit).Scan(&rows).Error
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	// The first pending message's time, read by id: an aggregate over a time column comes
	// back as text from SQLite.
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.First
	}
	var firsts []struct {
		ID         int64
		CreateTime time.Time
	}
	if err := s.db.WithContext(ctx).Raw("SELECT id, create_time FROM mate_message WHERE id IN ?", ids).Scan(&firsts).Error; err != nil {
		return nil, err
	}
	since := make(map[int64]time.Time, len(firsts))
	for _, f := range firsts {
		since[f.ID] = f.CreateTime
	}
	out := make([]PendingConversation, len(rows))
	for i, r := range rows {
		out[i] = PendingConversation{ConversationID: r.ConversationID, Extracted: r.Wm, Messages: r.N, First: r.First,
			Last: r.Last, Since: since[r.First].UTC()}
	}
	return out, nil
}

// Move is one conversation's watermark move in an extraction's commit: from exactly From to
// To, the range (From, To] the extraction covered.
type Move struct {
	Conv     string
	From, To int64
	// Redo: a forced re-extraction of a range already extracted; the watermark stays where
	// it is, which must be at or past To.
	Redo bool
	// New: the conversation was not registered when the extraction read it; the move
	// inserts its watermark (or moves it from 0, had it been registered meanwhile).
	New bool
}

// ErrStale means a batch's messages were extracted meanwhile: a watermark is no longer where
// the batch started (another holder of the lease committed an overlapping batch).
var ErrStale = errors.New("the messages were extracted meanwhile by another extraction (a watermark moved); nothing written")

// MoveWatermarks, in the extraction's unit of work, moves each watermark from exactly its
// move's From to its To: two batches that overlap can never both commit, whatever their
// keys. It fails with ErrStale when one is no longer where the batch started.
func (s *Store) MoveWatermarks(unit *store.Tx, agentID int64, moves []Move, now time.Time) error {
	tx := unit.Join()
	now = now.UTC()
	for _, mv := range moves {
		if mv.Redo {
			var n int64
			if err := tx.Raw("SELECT COUNT(*) FROM mate_extraction_watermark WHERE agent_id = ? AND conversation_id = ? AND last_message_id >= ?",
				agentID, mv.Conv, mv.To).Scan(&n).Error; err != nil {
				return fmt.Errorf("check watermark of %s: %w", mv.Conv, err)
			}
			if n != 1 {
				return fmt.Errorf("%w: conversation %s is not extracted up to message #%d", ErrStale, mv.Conv, mv.To)
			}
			continue
		}
		var res *gorm.DB
		switch {
		case mv.New && unit.MySQL():
			// 1 row inserted, 2 moved from 0, 0 left alone (it moved meanwhile).
			res = tx.Exec("INSERT INTO mate_extraction_watermark (agent_id, conversation_id, last_message_id, update_time) VALUES (?, ?, ?, ?) "+
				"ON DUPLICATE KEY UPDATE update_time = IF(last_message_id = 0, VALUES(update_time), update_time), "+
				"last_message_id = IF(last_message_id = 0, VALUES(last_message_id), last_message_id)", agentID, mv.Conv, mv.To, now)
		case mv.New:
			res = tx.Exec("INSERT INTO mate_extraction_watermark (agent_id, conversation_id, last_message_id, update_time) VALUES (?, ?, ?, ?) "+
				"ON CONFLICT (agent_id, conversation_id) DO UPDATE SET last_message_id = excluded.last_message_id, update_time = excluded.update_time "+
				"WHERE mate_extraction_watermark.last_message_id = 0", agentID, mv.Conv, mv.To, now)
		default:
			res = tx.Exec("UPDATE mate_extraction_watermark SET last_message_id = ?, update_time = ? "+
				"WHERE agent_id = ? AND conversation_id = ? AND last_message_id = ?", mv.To, now, agentID, mv.Conv, mv.From)
		}
		if res.Error != nil {
			return fmt.Errorf("advance watermark of %s: %w", mv.Conv, res.Error)
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("%w: conversation %s is no longer at message #%d", ErrStale, mv.Conv, mv.From)
		}
	}
	return nil
}

// Ingest stores an event's inline messages once: the event's effect key, scoped by agent
// (MessagesKey), is inserted in the same transaction, so a redelivered or replayed event
// stores nothing again, and another agent's event with the same id is not mistaken for it.
// It fails with store.ErrErased for an event from before the agent's erasure. The OnAdded
// hook does not run (the recall reconciler finds these messages).
func (s *Store) Ingest(ctx context.Context, ev *event.ConversationCompletedEvent, now time.Time) error {
	now = now.UTC()
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// Checked again in the transaction that stores: an erasure that committed since
		// the check at admission is seen here (and one that commits after this deletes
		// what this stores).
		if err := store.CheckNotErasedSince(ctx, tx, ev.AgentID, ev.OccurredAt); err != nil {
			return err
		}
		if done, err := legacyIngested(tx, ev); err != nil || done {
			return err
		}
		if err := tx.Create(&store.AppliedEffect{Key: MessagesKey(ev.AgentID, ev.EventID), CreateTime: now}).Error; err != nil {
			if store.IsDuplicate(err) {
				return nil
			}
			return err
		}
		rows := make([]store.Message, len(ev.Messages))
		for i, m := range ev.Messages {
			rows[i] = store.Message{AgentID: ev.AgentID, ConversationID: ev.ConversationID, Role: m.Role,
				Content: m.Content, ToolCalls: string(m.ToolCalls), ToolCallID: m.ToolCallID, Name: m.Name, CreateTime: now}
		}
		return tx.CreateInBatches(&rows, 500).Error
	})
}

// MessagesKey is the effect key of an event's inline messages: "event:messages:<agentId>:<eventId>".
func MessagesKey(agentID int64, eventID string) string {
	return "event:messages:" + strconv.FormatInt(agentID, 10) + ":" + eventID
}

// legacyIngested recognises an event stored before the key was scoped by agent: its key was
// "event:messages:<eventId>", shared by every agent. The messages were inserted in the same
// transaction with the key's create time, so the key is this event's only if this agent's
// conversation has messages with exactly that time; another agent's key is ignored.
func legacyIngested(tx *gorm.DB, ev *event.ConversationCompletedEvent) (bool, error) {
	var eff store.AppliedEffect
	err := tx.Where(&store.AppliedEffect{Key: "event:messages:" + ev.EventID}).Limit(1).Find(&eff).Error
	if err != nil || eff.Key == "" {
		return false, err
	}
	var n int64
	err = tx.Model(&store.Message{}).Where("agent_id = ? AND conversation_id = ? AND create_time = ?",
		ev.AgentID, ev.ConversationID, eff.CreateTime).Count(&n).Error
	return n > 0, err
}
