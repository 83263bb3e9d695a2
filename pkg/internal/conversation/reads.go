package conversation

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/matememory/matememory/pkg/internal/store"
)

// The reads of mate_message that the context window and memory search make.

// Chat returns a conversation's messages with id > afterID, oldest first, at most limit
// (0 = all), with the columns a chat message needs (not CreateTime), scanned without
// reflection: the context window reads a 10,000-message conversation on every request
// that cannot start from a cached summary.
func (s *Store) Chat(ctx context.Context, agentID int64, conv string, afterID int64, limit int) ([]Message, error) {
	q := "SELECT id, role, content, tool_calls, tool_call_id, name FROM mate_message WHERE agent_id = ? AND conversation_id = ? AND id > ? ORDER BY id"
	args := []any{agentID, conv, afterID}
	if limit > 0 {
		q += " LIMIT ?"
		args = append(args, limit)
	}
	rows, err := s.db.WithContext(ctx).Raw(q, args...).Rows()
	if err != nil {
		return nil, fmt.Errorf("list messages of %s: %w", conv, err)
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		var m Message
		var content, calls, callID, name sql.NullString
		if err := rows.Scan(&m.ID, &m.Role, &content, &calls, &callID, &name); err != nil {
			return nil, fmt.Errorf("list messages of %s: %w", conv, err)
		}
		m.AgentID, m.ConversationID = agentID, conv
		m.Content, m.ToolCallID, m.Name = content.String, callID.String, name.String
		if calls.String != "" {
			m.ToolCalls = json.RawMessage(calls.String)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list messages of %s: %w", conv, err)
	}
	return out, nil
}

// FirstID is the conversation's first stored message id (0: none), an index seek.
func (s *Store) FirstID(ctx context.Context, agentID int64, conv string) (int64, error) {
	var first sql.NullInt64
	err := s.db.WithContext(ctx).Raw("SELECT MIN(id) FROM mate_message WHERE agent_id = ? AND conversation_id = ?",
		agentID, conv).Row().Scan(&first)
	if err != nil {
		return 0, fmt.Errorf("first message of %s: %w", conv, err)
	}
	return first.Int64, nil
}

// CountUpTo counts the conversation's messages with id <= lastID.
func (s *Store) CountUpTo(ctx context.Context, agentID int64, conv string, lastID int64) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&store.Message{}).
		Where("agent_id = ? AND conversation_id = ? AND id <= ?", agentID, conv, lastID).Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("count messages of %s: %w", conv, err)
	}
	return n, nil
}

// Dialogue returns the conversation's user and assistant messages in id order, with their
// id, role, content and time (memory search indexes a conversation as a transcript).
func (s *Store) Dialogue(ctx context.Context, agentID int64, conv string) ([]store.Message, error) {
	var rows []store.Message
	if err := s.db.WithContext(ctx).Select("id", "role", "content", "create_time").
		Where("agent_id = ? AND conversation_id = ? AND role IN ?", agentID, conv, []string{"user", "assistant"}).
		Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read conversation %s of agent %d: %w", conv, agentID, err)
	}
	return rows, nil
}

// Stored is a message as the memory-search reconciler pages through them.
type Stored struct {
	ID, AgentID    int64
	ConversationID string
	CreateTime     time.Time
}

// StoredAfter pages through every agent's messages in (create_time, id) order: up to limit
// of those stored after t, or at t with an id above id.
func (s *Store) StoredAfter(ctx context.Context, t time.Time, id int64, limit int) ([]Stored, error) {
	var rows []store.Message
	if err := s.db.WithContext(ctx).Select("id", "agent_id", "conversation_id", "create_time").
		Where("create_time > ? OR (create_time = ? AND id > ?)", t, t, id).
		Order("create_time, id").Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("scan messages: %w", err)
	}
	out := make([]Stored, len(rows))
	for i, r := range rows {
		out[i] = Stored{ID: r.ID, AgentID: r.AgentID, ConversationID: r.ConversationID, CreateTime: r.CreateTime}
	}
	return out, nil
}
