package window

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/event"
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
type FlushRequest = event.SummarizeRequest

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
	subject := event.SummarizeSubject(a.req.AgentID)
	// Not urgent (no reply subject): the summarizer honours the cooldown and coalesces it
	// like an event. The message id is the flush id itself (not agent-prefixed like
	// pkg/eventpub's), as every version has published it.
	_, err = bus.PublisherOn(s.js, s.tracing).PublishJSON(ctx, FlushRequest{RequestID: id, AgentID: a.req.AgentID,
		ConversationID: a.req.ConversationID, RequestedAt: s.now().UTC(), Reason: FlushReason},
		bus.Message{Subject: subject, MsgID: id, Stream: bus.StreamEvents, Watermill: true, Timeout: 5 * time.Second, NoRetry: true})
	r.FlushID = id
	if err != nil {
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			r.FlushReason = fmt.Sprintf("no stream accepts %s yet: messages up to id %d are not extracted (watermark %d) and no summarize request could be queued", subject, lastID, mark)
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
