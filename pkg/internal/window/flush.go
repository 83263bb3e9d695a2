package window

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
)

// Watermarks tells which messages of a conversation the summarizer has already extracted
// into long-term memory.
// conversation.Store implements it.
type Watermarks interface {
	// LastExtracted is the id of the last extracted message (0 when none).
	LastExtracted(ctx context.Context, agentID int64, conversationID string) (int64, error)
}

// FlushRequest is the summarize request published when compaction evicts messages that
// long-term memory has not extracted yet (subject mate.memory.summarize.<agentId>).
type FlushRequest struct {
	AgentID        int64     `json:"agentId"`
	ConversationID string    `json:"conversationId"`
	Reason         string    `json:"reason"`
	RequestID      string    `json:"requestId"`
	RequestedAt    time.Time `json:"requestedAt"`
}

// watermillUUIDHeader is watermill-nats' WatermillUUIDHdr: consumers built on watermill take
// the message UUID from it.
const watermillUUIDHeader = "_watermill_message_uuid"

// FlushReason is the reason of a flush request.
const FlushReason = "context-eviction"

// flushID is deterministic for (conversation, last evicted message), so a request repeated
// by any replica is stored once (Nats-Msg-Id de-duplication).
func flushID(agentID int64, conversationID string, lastID int64) string {
	h := sha256.Sum256([]byte(conversationID))
	return fmt.Sprintf("ctx-evict-%d-%s-%d", agentID, hex.EncodeToString(h[:8]), lastID)
}

// flush asks the summarizer to extract the messages before hist[evicted] before they leave
// the window, unless the watermark shows it already has.
func (s *Service) flush(ctx context.Context, a *assembly, evicted int) {
	r := a.res
	switch {
	case a.offset+evicted == 0:
		return
	case a.req.Preview:
		r.FlushReason = "preview: nothing is published"
		return
	case a.req.Inline:
		r.FlushReason = "history was given inline: there are no stored messages for the summarizer to extract"
		return
	case s.marks == nil:
		r.FlushReason = "no extraction watermarks available"
		return
	case s.js == nil:
		r.FlushReason = "no JetStream connection"
		return
	}
	lastID := a.pre.lastIDOr(0)
	if evicted > 0 {
		lastID = a.hist[evicted-1].id
	}
	mark, err := s.marks.LastExtracted(ctx, a.req.AgentID, a.req.ConversationID)
	if err != nil {
		r.FlushReason = err.Error()
		return
	}
	if mark >= lastID {
		r.FlushReason = fmt.Sprintf("the evicted messages (up to id %d) are already extracted (watermark %d)", lastID, mark)
		return
	}
	id := flushID(a.req.AgentID, a.req.ConversationID, lastID)
	body, _ := json.Marshal(FlushRequest{AgentID: a.req.AgentID, ConversationID: a.req.ConversationID,
		Reason: FlushReason, RequestID: id, RequestedAt: s.now().UTC()})
	msg := nats.NewMsg(bus.AgentSubject(bus.SubjectSummarize, a.req.AgentID))
	msg.Data = body
	// The same headers as pkg/event's publisher, so watermill consumers read it alike.
	msg.Header.Set(watermillUUIDHeader, id)
	msg.Header.Set("Content-Type", "application/json")
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = s.tracing.PublishMsg(pctx, s.js, msg, jetstream.WithMsgID(id),
		jetstream.WithExpectStream(bus.StreamEvents), jetstream.WithRetryAttempts(0))
	r.FlushID = id
	if err != nil {
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			r.FlushReason = fmt.Sprintf("no stream accepts %s yet: messages up to id %d are not extracted (watermark %d) and no summarize request could be queued", msg.Subject, lastID, mark)
		} else {
			r.FlushReason = fmt.Sprintf("publish summarize request: %v", err)
		}
		s.metrics.flushes.WithLabelValues("failed").Inc()
		return
	}
	r.FlushRequested = true
	r.FlushReason = fmt.Sprintf("messages up to id %d were not extracted yet (watermark %d)", lastID, mark)
	s.stats.flushes.Add(1)
	s.metrics.flushes.WithLabelValues("published").Inc()
}

func (e *summaryEntry) lastIDOr(def int64) int64 {
	if e == nil {
		return def
	}
	return e.LastID
}
