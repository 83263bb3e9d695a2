package summarizer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/fence"
	"github.com/matememory/matememory/pkg/internal/lease"
	"github.com/matememory/matememory/pkg/internal/store"
)

// Watermarks. A conversation takes part in extraction once an event for it passed the
// pre-checks (or a manual request named it): that registers a watermark row at message 0.
// An extraction covers the messages above the watermarks of the agent's registered
// conversations, and moves each watermark to the last message it covered. Conversations
// never registered (cron conversations when skip-cron-conversations is on, say) are never
// extracted.

// span is the range (From, To] of one conversation's message ids an extraction covers.
type span struct {
	Conv string `json:"c"`
	From int64  `json:"f"`
	To   int64  `json:"t"`
	// Redo marks a forced re-extraction of a range already extracted: its watermark stays
	// where it is (at or past To) instead of moving from From.
	Redo bool `json:"r,omitempty"`
	// New marks the job's conversation when it was not registered yet: the commit inserts
	// its watermark (or moves it from 0, had it been registered meanwhile).
	New bool `json:"n,omitempty"`
}

// batch is what one extraction covers.
type batch struct {
	spans []span
	// msgs are the user and assistant messages of the transcript, grouped by conversation.
	msgs []store.Message
	// scanned counts every message covered (tool and system included).
	scanned int
	// firstFrom is the watermark of the job's conversation when the batch was read.
	firstFrom int64
	// partial is set when pending messages of the agent were left out (the transcript was
	// full, or the batch re-extracts one conversation only).
	partial bool
}

// covers reports whether, once the batch is committed, conversation conv is extracted up
// to message last.
func (b batch) covers(conv string, last int64) bool {
	wm := b.firstFrom
	for _, sp := range b.spans {
		if sp.Conv == conv && !sp.Redo {
			wm = max(wm, sp.To)
		}
	}
	return wm >= last
}

func (b batch) conversations() []string {
	out := make([]string, len(b.spans))
	for i, sp := range b.spans {
		out[i] = sp.Conv
	}
	return out
}

// convStats counts a conversation's stored messages, returns its last message id, and its
// watermark (registered is false when the conversation has none yet), in one statement.
func (s *Service) convStats(ctx context.Context, agentID int64, conv string) (count, last, wm int64, registered bool, erased *time.Time, err error) {
	var row struct {
		N      int64
		Last   *int64
		WM     *int64
		Erased *time.Time
	}
	// The agent's erasure tombstone comes with the same statement: no extra round trip per
	// event to refuse one from before an erasure.
	err = s.d.DB.WithContext(ctx).Raw("SELECT COUNT(*) AS n, MAX(id) AS last, "+
		"(SELECT w.last_message_id FROM mate_extraction_watermark AS w WHERE w.agent_id = ? AND w.conversation_id = ?) AS wm, "+
		"(SELECT e.erased_at FROM mate_agent_erasure AS e WHERE e.agent_id = ?) AS erased "+
		"FROM mate_message WHERE agent_id = ? AND conversation_id = ?", agentID, conv, agentID, agentID, conv).Scan(&row).Error
	if row.Last != nil {
		last = *row.Last
	}
	if row.WM != nil {
		wm, registered = *row.WM, true
	}
	return row.N, last, wm, registered, row.Erased, err
}

// register makes the conversation take part in extraction (a watermark row at message 0),
// when it does not yet: one statement. An extraction registers the conversation it extracts
// in its own commit instead (commitTx), so this is for a job that ends without extracting
// (it waits for the cooldown, is coalesced, finds the lease held, or is dead-lettered): the
// agent's next extraction covers its conversation.
func (s *Service) register(ctx context.Context, agentID int64, conv string) error {
	// A plain statement rather than gorm's builders (issue 14); a row already there is left
	// as it is.
	insert := "INSERT INTO mate_extraction_watermark (agent_id, conversation_id, last_message_id, update_time) VALUES (?, ?, 0, ?) "
	if s.d.DB.Dialector.Name() == "mysql" {
		insert += "ON DUPLICATE KEY UPDATE agent_id = agent_id"
	} else {
		insert += "ON CONFLICT DO NOTHING"
	}
	return s.d.DB.WithContext(ctx).Exec(insert, agentID, conv, s.d.Now().UTC()).Error
}

func (s *Service) watermark(ctx context.Context, agentID int64, conv string) (int64, error) {
	var rows []store.ExtractionWatermark
	if err := s.d.DB.WithContext(ctx).Where("agent_id = ? AND conversation_id = ?", agentID, conv).
		Limit(1).Find(&rows).Error; err != nil {
		return 0, err
	}
	if len(rows) == 0 {
		return 0, nil
	}
	return rows[0].LastMessageID, nil
}

// pageSize is how many pending messages one query reads while building a batch.
const pageSize = 200

// buildBatch collects the agent's pending messages, first conversation first, then the
// others oldest message first, until the transcript holds budget user/assistant messages.
func (s *Service) buildBatch(ctx context.Context, agentID int64, first string, budget int) (batch, error) {
	var b batch
	idx := map[string]int{}
	taken := 0
	full := false
	var grouped = map[string][]store.Message{}
	registered := true // whether the job's conversation has a watermark (set below)
	walk := func(rows []store.Message, from map[string]int64) {
		for _, m := range rows {
			if inTranscript(m) {
				if taken >= budget {
					full = true
					return
				}
				taken++
				grouped[m.ConversationID] = append(grouped[m.ConversationID], m)
			}
			i, ok := idx[m.ConversationID]
			if !ok {
				i = len(b.spans)
				idx[m.ConversationID] = i
				b.spans = append(b.spans, span{Conv: m.ConversationID, From: from[m.ConversationID], To: m.ID,
					New: m.ConversationID == first && !registered})
			}
			b.spans[i].To = m.ID
			b.scanned++
		}
	}
	var wms []store.ExtractionWatermark
	// Plain SQL on this path: every extraction runs it (issue 14).
	if err := s.d.DB.WithContext(ctx).Raw("SELECT * FROM mate_extraction_watermark WHERE agent_id = ?", agentID).Scan(&wms).Error; err != nil {
		return b, fmt.Errorf("read watermarks: %w", err)
	}
	from := make(map[string]int64, len(wms))
	for _, w := range wms {
		from[w.ConversationID] = w.LastMessageID
	}
	// The job's own conversation first; not registered yet, it starts at 0 and the commit
	// registers it.
	b.firstFrom = from[first]
	_, registered = from[first]
	{
		after := b.firstFrom
		for !full {
			var rows []store.Message
			if err := s.d.DB.WithContext(ctx).Raw("SELECT * FROM mate_message WHERE agent_id = ? AND conversation_id = ? AND id > ? ORDER BY id LIMIT ?",
				agentID, first, after, pageSize).Scan(&rows).Error; err != nil {
				return b, fmt.Errorf("read pending messages of %s: %w", first, err)
			}
			walk(rows, from)
			if len(rows) < pageSize {
				break
			}
			after = rows[len(rows)-1].ID
		}
	}
	// Then every other registered conversation, in message order (when there is one).
	others := len(from)
	if _, ok := from[first]; ok {
		others--
	}
	after := int64(0)
	for !full && others > 0 {
		var rows []store.Message
		err := s.d.DB.WithContext(ctx).Raw("SELECT m.* FROM mate_message AS m "+
			"JOIN mate_extraction_watermark AS w ON w.agent_id = m.agent_id AND w.conversation_id = m.conversation_id "+
			"WHERE m.agent_id = ? AND m.id > w.last_message_id AND m.id > ? AND m.conversation_id <> ? ORDER BY m.id LIMIT ?",
			agentID, after, first, pageSize).Scan(&rows).Error
		if err != nil {
			return b, fmt.Errorf("read pending messages: %w", err)
		}
		walk(rows, from)
		if len(rows) < pageSize {
			break
		}
		after = rows[len(rows)-1].ID
	}
	for _, sp := range b.spans {
		b.msgs = append(b.msgs, grouped[sp.Conv]...)
	}
	b.partial = full
	return b, nil
}

// advance moves watermarks forward to the spans' ends (never backwards), in one transaction.
func (s *Service) advance(ctx context.Context, agentID int64, spans []span) error {
	now := s.d.Now().UTC()
	return s.d.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, sp := range spans {
			if err := tx.Model(&store.ExtractionWatermark{}).
				Where("agent_id = ? AND conversation_id = ? AND last_message_id < ?", agentID, sp.Conv, sp.To).
				Updates(map[string]any{"last_message_id": sp.To, "update_time": now}).Error; err != nil {
				return fmt.Errorf("advance watermark of %s: %w", sp.Conv, err)
			}
		}
		return nil
	})
}

// errStale means a batch's messages were extracted meanwhile: a watermark is no longer
// where the batch started (another holder of the lease committed an overlapping batch).
var errStale = errors.New("the messages were extracted meanwhile by another extraction (a watermark moved); nothing written")

// commitTx, in the transaction of an extraction's writes, checks the lease's fencing token
// and moves each watermark from exactly the batch's start to its end: two batches that
// overlap can never both commit, whatever their keys.
func (s *Service) commitTx(tx *gorm.DB, l *lease.Lease, agentID int64, spans []span) error {
	now := s.d.Now().UTC()
	if err := fence.Check(tx, agentID, fence.TokenOf(l), now); err != nil {
		return err
	}
	for _, sp := range spans {
		if sp.Redo {
			// A forced re-extraction moves nothing; the range must still be extracted.
			var n int64
			if err := tx.Model(&store.ExtractionWatermark{}).
				Where("agent_id = ? AND conversation_id = ? AND last_message_id >= ?", agentID, sp.Conv, sp.To).
				Count(&n).Error; err != nil {
				return fmt.Errorf("check watermark of %s: %w", sp.Conv, err)
			}
			if n != 1 {
				return fmt.Errorf("%w: conversation %s is not extracted up to message #%d", errStale, sp.Conv, sp.To)
			}
			continue
		}
		var res *gorm.DB
		switch {
		case sp.New && tx.Dialector.Name() == "mysql":
			// 1 row inserted, 2 moved from 0, 0 left alone (it moved meanwhile).
			res = tx.Exec("INSERT INTO mate_extraction_watermark (agent_id, conversation_id, last_message_id, update_time) VALUES (?, ?, ?, ?) "+
				"ON DUPLICATE KEY UPDATE update_time = IF(last_message_id = 0, VALUES(update_time), update_time), "+
				"last_message_id = IF(last_message_id = 0, VALUES(last_message_id), last_message_id)", agentID, sp.Conv, sp.To, now)
		case sp.New:
			res = tx.Exec("INSERT INTO mate_extraction_watermark (agent_id, conversation_id, last_message_id, update_time) VALUES (?, ?, ?, ?) "+
				"ON CONFLICT (agent_id, conversation_id) DO UPDATE SET last_message_id = excluded.last_message_id, update_time = excluded.update_time "+
				"WHERE mate_extraction_watermark.last_message_id = 0", agentID, sp.Conv, sp.To, now)
		default:
			res = tx.Exec("UPDATE mate_extraction_watermark SET last_message_id = ?, update_time = ? "+
				"WHERE agent_id = ? AND conversation_id = ? AND last_message_id = ?", sp.To, now, agentID, sp.Conv, sp.From)
		}
		if res.Error != nil {
			return fmt.Errorf("advance watermark of %s: %w", sp.Conv, res.Error)
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("%w: conversation %s is no longer at message #%d", errStale, sp.Conv, sp.From)
		}
	}
	return nil
}

// effectKey names the daily entry of one batch: the same message ranges always give the
// same key, so an extraction re-run after a crash cannot append them twice.
func effectKey(agentID int64, spans []span) string {
	parts := make([]string, len(spans))
	for i, sp := range spans {
		parts[i] = fmt.Sprintf("%s\x00%d\x00%d", sp.Conv, sp.From, sp.To)
	}
	sort.Strings(parts)
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x01")))
	return fmt.Sprintf("summarize:daily:%d:%s", agentID, hex.EncodeToString(sum[:16]))
}

// Intents. Versions before the fenced commit appended the daily entry (with its effect key)
// and moved the watermarks in two transactions, recording in between, under the lease,
// which spans the entry covered. The daily append and the watermarks now commit in one
// transaction and no intent is written; a record left by an older worker that crashed
// between the two is still completed: if its effect key was applied the watermarks are
// moved as the crashed worker would have, otherwise nothing was written and it is dropped.
type intent struct {
	RunID string `json:"runId"`
	Key   string `json:"key"`
	Daily string `json:"daily"`
	Spans []span `json:"spans"`
}

func agentKey(agentID int64) string { return strconv.FormatInt(agentID, 10) }

func (s *Service) recoverIntent(ctx context.Context, agentID int64) error {
	e, err := s.d.Intents.Get(ctx, agentKey(agentID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read intent: %w", err)
	}
	var it intent
	if err := json.Unmarshal(e.Value(), &it); err != nil {
		s.d.Log.Warn("dropping unreadable extraction intent", "agent", agentID, "err", err)
		return s.d.Intents.Delete(ctx, agentKey(agentID))
	}
	var n int64
	if err := s.d.DB.WithContext(ctx).Model(&store.AppliedEffect{}).Where(&store.AppliedEffect{Key: it.Key}).Count(&n).Error; err != nil {
		return fmt.Errorf("check effect %s: %w", it.Key, err)
	}
	if n > 0 {
		s.d.Log.Info("completing an interrupted extraction: daily entry was appended, moving watermarks",
			"agent", agentID, "run", it.RunID, "key", it.Key)
		if err := s.advance(ctx, agentID, it.Spans); err != nil {
			return err
		}
	}
	return s.d.Intents.Delete(ctx, agentKey(agentID), jetstream.LastRevision(e.Revision()))
}

// Cooldown: the time an agent's next LLM extraction may start, kept in the agent's lease
// record (pkg/internal/lease) and written as the extraction's lease is released.

// minDeferral is added to a cooldown deferral so that the redelivery lands after the end.
const minDeferral = 20 * time.Millisecond

func (s *Service) cooldownResult(agentID int64, until time.Time) (Result, bool) {
	wait := time.Until(until)
	if wait <= 0 {
		return Result{}, false
	}
	return deferred("cooldown", fmt.Sprintf("agent %d is in its extraction cooldown until %s",
		agentID, until.UTC().Format(time.RFC3339Nano)), wait+jitter(minDeferral)), true
}

// ingest stores an event's inline messages once: the effect key of the event, scoped by
// agent (messagesKey), is inserted in the same transaction, so a redelivered or replayed
// event stores nothing again, and another agent's event with the same id is not mistaken
// for it.
func (s *Service) ingest(ctx context.Context, ev *event.ConversationCompletedEvent) error {
	now := s.d.Now().UTC()
	return s.d.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// Checked again in the transaction that stores: an erasure that committed since
		// the check at admission is seen here (and one that commits after this deletes
		// what this stores).
		if err := store.CheckNotErasedSince(ctx, tx, ev.AgentID, ev.OccurredAt); err != nil {
			return err
		}
		if done, err := legacyIngested(tx, ev); err != nil || done {
			return err
		}
		if err := tx.Create(&store.AppliedEffect{Key: messagesKey(ev.AgentID, ev.EventID), CreateTime: now}).Error; err != nil {
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

// messagesKey is the effect key of an event's inline messages: "event:messages:<agentId>:<eventId>".
func messagesKey(agentID int64, eventID string) string {
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
