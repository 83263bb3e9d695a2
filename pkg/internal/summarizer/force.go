package summarizer

import (
	"context"

	"github.com/matememory/matememory/pkg/internal/store"
)

// batchFor is the batch one extraction of job covers: the agent's pending messages, or, for
// a forced manual request whose conversation is extracted up to its last message, that
// conversation's last transcript again (forcedBatch).
func (s *Service) batchFor(ctx context.Context, job Job, last int64) (batch, error) {
	if job.forced() {
		wm, err := s.d.Messages.LastExtracted(ctx, job.AgentID, job.ConversationID)
		if err != nil {
			return batch{}, err
		}
		if wm >= last {
			b, err := s.forcedBatch(ctx, job.AgentID, job.ConversationID, last, s.set.Memory.MaxTranscriptMessages)
			b.firstFrom, b.partial = wm, true
			return b, err
		}
	}
	return s.buildBatch(ctx, job.AgentID, job.ConversationID, s.set.Memory.MaxTranscriptMessages)
}

// forcedBatch covers the conversation's messages up to last, newest first, until the
// transcript holds budget messages: one span (From, last], where From depends only on the
// stored messages. So forcing twice covers the same range, its effect key is the same, and
// the daily entry of that range is appended once; PROFILE.md and MEMORY.md are rewritten only
// when the model's answer differs from what they hold.
func (s *Service) forcedBatch(ctx context.Context, agentID int64, conv string, last int64, budget int) (batch, error) {
	var b batch
	var picked []store.Message
	from, before := int64(0), last+1
	done := false
	for !done {
		rows, err := s.d.Messages.Before(ctx, agentID, conv, before, pageSize)
		if err != nil {
			return b, err
		}
		for _, m := range rows {
			if inTranscript(m) {
				if len(picked) >= budget {
					from, done = m.ID, true
					break
				}
				picked = append(picked, m)
			}
			b.scanned++
		}
		if len(rows) < pageSize {
			break
		}
		before = rows[len(rows)-1].ID
	}
	if b.scanned == 0 {
		return b, nil
	}
	for i := len(picked) - 1; i >= 0; i-- {
		b.msgs = append(b.msgs, picked[i])
	}
	b.spans = []span{{Conv: conv, From: from, To: last, Redo: true}}
	return b, nil
}
