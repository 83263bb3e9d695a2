package window

import (
	"context"
	"encoding/hex"
	"sort"

	"github.com/matememory/matememory/pkg/internal/conversation"
)

// PrefixCounter is implemented by a History that can count a conversation's stored
// messages up to an id. With it, a request whose early history is covered by a cached
// summary reads only the messages after that summary.
type PrefixCounter interface {
	CountUpTo(ctx context.Context, agentID int64, conversationID string, lastID int64) (int64, error)
}

// StoreHistory is the window's History over the stored messages (conversation.Store owns
// mate_message): their chat columns in id order, the first id and the prefix count.
type StoreHistory struct {
	Messages *conversation.Store
}

// List implements History (CreateTime is not read).
func (h StoreHistory) List(ctx context.Context, agentID int64, conversationID string, afterID int64, limit int) ([]conversation.Message, error) {
	return h.Messages.Chat(ctx, agentID, conversationID, afterID, limit)
}

// FirstIDer is implemented by a History that can tell a conversation's first stored
// message id cheaply (an index seek). With it, a memorised prefix is checked on every
// request against the oldest messages being deleted.
type FirstIDer interface {
	FirstID(ctx context.Context, agentID int64, conversationID string) (int64, error)
}

// FirstID implements FirstIDer: 0 for a conversation with no messages.
func (h StoreHistory) FirstID(ctx context.Context, agentID int64, conversationID string) (int64, error) {
	return h.Messages.FirstID(ctx, agentID, conversationID)
}

// CountUpTo implements PrefixCounter.
func (h StoreHistory) CountUpTo(ctx context.Context, agentID int64, conversationID string, lastID int64) (int64, error) {
	return h.Messages.CountUpTo(ctx, agentID, conversationID, lastID)
}

// resume loads only the stored messages after the latest cached summary of the
// conversation, when that summary still describes the stored prefix exactly (same number of
// messages up to its last id: mate_message is append-only, so a changed count means the
// prefix changed and the full history is read instead), was counted with the same
// tokenizer, and the full history would still need compaction. It reports whether it did.
func (s *Service) resume(ctx context.Context, a *assembly, base, trigger int) bool {
	pc, ok := s.history.(PrefixCounter)
	if !ok || s.cache == nil || a.req.Inline {
		return false
	}
	hd, _, err := s.cache.head(ctx, a.ck)
	if err != nil || len(hd.Entries) == 0 {
		return false
	}
	sort.Slice(hd.Entries, func(i, j int) bool { return hd.Entries[i].N > hd.Entries[j].N })
	he := hd.Entries[0]
	e, ok, err := s.cache.get(ctx, a.ck, he.H)
	if err != nil || !ok || e.Covers != he.N || e.LastID <= 0 || e.Encoding != a.tk.Name() || len(e.Chain) != 64 {
		return false
	}
	chain, err := hex.DecodeString(e.Chain)
	if err != nil || hex.EncodeToString(chain[:16]) != he.H {
		return false
	}
	seen, ok := s.prefixExact(ctx, a, pc, e)
	if !ok {
		return false
	}
	rows, err := s.history.List(ctx, a.req.AgentID, a.req.ConversationID, e.LastID, 0)
	if err != nil {
		return false
	}
	hist := make([]item, 0, len(rows))
	for _, row := range rows {
		m, err := fromStored(row)
		if err != nil {
			return false // the full read reports it
		}
		hist = append(hist, item{Message: m, id: row.ID})
	}
	if len(hist) > 0 && hist[0].Role == RoleTool {
		return false // the summary would end inside a tool call's unit
	}
	a.res.HistorySource = "store"
	a.hist = a.dedupeCurrent(hist)
	a.countHistory(s.counts)
	if base+e.PrefixTokens+a.tokensOf(0, len(a.hist)) <= trigger {
		a.hist, a.lay = nil, layout{}
		a.res.CurrentFromHistory = false
		return false // the whole history fits now (a larger budget): read it all
	}
	a.offset, a.pre, a.offsetTokens = e.Covers, &e, e.PrefixTokens
	a.exactAt, a.firstID = seen.at, seen.firstID
	copy(a.preChain[:], chain)
	return true
}

// prefixExact reports whether the stored messages up to e.LastID are still exactly the
// e.Covers messages e summarizes. A prefix this process found exact within the recheck
// interval is trusted (prefixMemo says why that is sound) as long as the conversation's
// first message is unchanged: one index seek instead of counting the whole prefix.
// Otherwise the rows up to e.LastID are counted.
func (s *Service) prefixExact(ctx context.Context, a *assembly, pc PrefixCounter, e summaryEntry) (prefixSeen, bool) {
	key := prefixKey{agent: a.req.AgentID, ck: a.ck, lastID: e.LastID, covers: e.Covers, chain: e.Chain}
	fi, hasFirst := s.history.(FirstIDer)
	first := func() (int64, error) {
		if !hasFirst {
			return 0, nil
		}
		return fi.FirstID(ctx, a.req.AgentID, a.req.ConversationID)
	}
	now := s.now()
	if seen, ok := s.prefixes.get(key); ok && now.Sub(seen.at) < s.recheck {
		if id, err := first(); err == nil && id == seen.firstID {
			s.stats.prefixTrusted.Add(1)
			return seen, true
		}
	}
	s.stats.prefixCounted.Add(1)
	firstID, err := first()
	if err != nil {
		return prefixSeen{}, false
	}
	n, err := pc.CountUpTo(ctx, a.req.AgentID, a.req.ConversationID, e.LastID)
	if err != nil || n != int64(e.Covers) {
		s.prefixes.forget(key)
		return prefixSeen{}, false
	}
	seen := prefixSeen{at: now, firstID: firstID}
	s.prefixes.put(key, seen)
	return seen, true
}

// rememberExact records a summary computed here from stored history as exact as of when
// that history was known exact (read in full, or resumed from an exact prefix).
func (s *Service) rememberExact(a *assembly, e summaryEntry) {
	if a.req.Inline || a.exactAt.IsZero() || a.res.SkippedMessages > 0 || e.LastID <= 0 || s.recheck <= 0 {
		return
	}
	s.prefixes.put(prefixKey{agent: a.req.AgentID, ck: a.ck, lastID: e.LastID, covers: e.Covers, chain: e.Chain},
		prefixSeen{at: a.exactAt, firstID: a.firstID})
}
