// Package conversation stores conversation messages (mate_message), the short-term history
// that chat services write and that the summarizer and the context window read.
package conversation

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/matememory/matememory/pkg/api"
	"github.com/matememory/matememory/pkg/internal/fault"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/store"
)

// Roles accepted for messages.
var Roles = []string{"user", "assistant", "system", "tool"}

// MaxConversationIDBytes matches the column size.
const MaxConversationIDBytes = 128

// Message is one stored message.
type Message = api.StoredMessage

// InvalidError is bad input: fault's one invalid-input error.
type InvalidError = fault.Invalid

// Store reads and writes messages.
type Store struct {
	db  *gorm.DB
	now func() time.Time
	// added, when set, runs after messages of a conversation were committed.
	added func(ctx context.Context, agentID int64, conversationID string, lastID int64)
}

// OnAdded sets a hook run after every committed Add, once per conversation in it (the
// memory-search indexer listens, when conversations are a search source).
func (s *Store) OnAdded(fn func(ctx context.Context, agentID int64, conversationID string, lastID int64)) {
	s.added = fn
}

// New builds a store.
func New(db *gorm.DB) *Store { return &Store{db: db, now: time.Now} }

// ValidateConversationID checks a conversation id.
func ValidateConversationID(id string) error {
	switch {
	case strings.TrimSpace(id) == "":
		return &InvalidError{Msg: "conversationId is empty"}
	case len(id) > MaxConversationIDBytes:
		return &InvalidError{Msg: fmt.Sprintf("conversationId is %d bytes; at most %d allowed", len(id), MaxConversationIDBytes)}
	case !utf8.ValidString(id):
		return &InvalidError{Msg: "conversationId is not valid UTF-8"}
	}
	return nil
}

// Validate checks a message before it is stored.
func Validate(m Message) error {
	if m.AgentID <= 0 {
		return &InvalidError{Msg: fmt.Sprintf("agentId must be a positive number, got %d", m.AgentID)}
	}
	if err := ValidateConversationID(m.ConversationID); err != nil {
		return err
	}
	ok := false
	for _, r := range Roles {
		ok = ok || m.Role == r
	}
	if !ok {
		return &InvalidError{Msg: fmt.Sprintf("role %q is not supported; accepted: %s", m.Role, strings.Join(Roles, ", "))}
	}
	if m.Role == "tool" && m.ToolCallID == "" {
		return &InvalidError{Msg: "a tool message needs toolCallId (the id of the call it answers)"}
	}
	if err := event.ValidateToolCalls(m.ToolCalls); err != nil {
		return &InvalidError{Msg: err.Error()}
	}
	if !utf8.ValidString(m.Content) {
		return &InvalidError{Msg: "content is not valid UTF-8"}
	}
	return nil
}

// Add stores messages in order, in one transaction, and returns them with ids.
func (s *Store) Add(ctx context.Context, msgs ...Message) ([]Message, error) {
	for i, m := range msgs {
		if err := Validate(m); err != nil {
			if len(msgs) > 1 {
				return nil, &InvalidError{Msg: fmt.Sprintf("message %d: %s", i, err.Error())}
			}
			return nil, err
		}
	}
	rows := make([]store.Message, len(msgs))
	now := s.now().UTC()
	for i, m := range msgs {
		rows[i] = store.Message{AgentID: m.AgentID, ConversationID: m.ConversationID, Role: m.Role,
			Content: m.Content, ToolCalls: string(m.ToolCalls), ToolCallID: m.ToolCallID, Name: m.Name, CreateTime: now}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	if err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		return tx.CreateInBatches(&rows, 500).Error
	}); err != nil {
		return nil, fmt.Errorf("store messages: %w", err)
	}
	out := make([]Message, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	if s.added != nil {
		type conv struct {
			agentID int64
			id      string
		}
		last := map[conv]Message{}
		for _, m := range out {
			last[conv{m.AgentID, m.ConversationID}] = m
		}
		for _, m := range last {
			s.added(ctx, m.AgentID, m.ConversationID, m.ID)
		}
	}
	return out, nil
}

// List returns a conversation's messages of one agent with id > afterID, oldest first, at
// most limit (0 = all).
func (s *Store) List(ctx context.Context, agentID int64, conversationID string, afterID int64, limit int) ([]Message, error) {
	var rows []store.Message
	q := s.db.WithContext(ctx).Where("agent_id = ? AND conversation_id = ? AND id > ?", agentID, conversationID, afterID).Order("id")
	if limit > 0 {
		q = q.Limit(limit)
	}
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list messages of %s: %w", conversationID, err)
	}
	out := make([]Message, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}

// Count returns how many messages a conversation has.
func (s *Store) Count(ctx context.Context, agentID int64, conversationID string) (int64, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&store.Message{}).
		Where("agent_id = ? AND conversation_id = ?", agentID, conversationID).Count(&n).Error
	return n, err
}

func fromRow(r store.Message) Message {
	m := Message{ID: r.ID, AgentID: r.AgentID, ConversationID: r.ConversationID, Role: r.Role,
		Content: r.Content, ToolCallID: r.ToolCallID, Name: r.Name, CreateTime: r.CreateTime}
	if r.ToolCalls != "" {
		m.ToolCalls = json.RawMessage(r.ToolCalls)
	}
	return m
}
