package summarizer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/matememory/matememory/pkg/internal/store"
)

// Batches over watermarks (conversation.Store keeps both). A conversation takes part in
// extraction once an event for it passed the pre-checks (or a request named it): that
// registers a watermark row at message 0. An extraction covers the messages above the
// watermarks of the agent's registered conversations, and moves each watermark to the last
// message it covered. Conversations never registered (cron conversations when
// skip-cron-conversations is on, say) are never extracted.

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
	from, err := s.d.Messages.Watermarks(ctx, agentID)
	if err != nil {
		return b, err
	}
	// The job's own conversation first; not registered yet, it starts at 0 and the commit
	// registers it.
	b.firstFrom = from[first]
	_, registered = from[first]
	{
		after := b.firstFrom
		for !full {
			rows, err := s.d.Messages.After(ctx, agentID, first, after, pageSize)
			if err != nil {
				return b, err
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
		rows, err := s.d.Messages.PendingElsewhere(ctx, agentID, first, after, pageSize)
		if err != nil {
			return b, err
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
