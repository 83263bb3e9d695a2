package window

import (
	"sync"
	"time"
)

// DefaultPrefixRecheck is how long a stored prefix checked against its cached summary is
// trusted without counting it again (WithPrefixRecheck).
const DefaultPrefixRecheck = 5 * time.Minute

// prefixMemo remembers which cached summaries this process has seen to describe the stored
// prefix of their conversation exactly, so that a warm request need not count the prefix's
// rows again (an index range scan as long as the conversation: 87 % of a request's CPU at
// 100,000 messages).
//
// The invariant that makes the memo sound: the service only appends to mate_message, and a
// row's id is larger than every id committed before it in its conversation (SQLite by
// construction: one writer, the id assigned inside the write lock; MySQL/MariaDB as long as
// one conversation's messages are not stored by two transactions at the same moment, as a
// chat service storing its turns one after another does). A prefix that was exact once
// therefore stays exact. What the service does not do, an operator might: deleting the
// oldest messages (a retention job) is seen at once, by the conversation's first id; any
// other out-of-band change (a row deleted or edited in the middle, a late commit of a
// concurrent insert on MySQL) is seen by the count made again once recheck has passed.
type prefixMemo struct {
	mu       sync.Mutex
	max      int
	cur, old map[prefixKey]prefixSeen
}

// prefixKey names a cached summary: the agent and conversation (its cache key), the last message id
// and count it covers, and the chained hash of the covered contents.
type prefixKey struct {
	agent  int64
	ck     string
	lastID int64
	covers int
	chain  string
}

type prefixSeen struct {
	// at is when the prefix was last known exact (counted, or read in full).
	at time.Time
	// firstID is the conversation's first message id then (0 when not known).
	firstID int64
}

func newPrefixMemo(max int) *prefixMemo {
	return &prefixMemo{max: max, cur: map[prefixKey]prefixSeen{}, old: map[prefixKey]prefixSeen{}}
}

func (m *prefixMemo) get(k prefixKey) (prefixSeen, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.cur[k]; ok {
		return v, true
	}
	v, ok := m.old[k]
	return v, ok
}

// put records that k was exact at v.at; an older sighting never replaces a newer one.
func (m *prefixMemo) put(k prefixKey, v prefixSeen) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev, ok := m.cur[k]; ok && prev.at.After(v.at) {
		return
	}
	if len(m.cur) >= m.max {
		m.old, m.cur = m.cur, map[prefixKey]prefixSeen{}
	}
	m.cur[k] = v
}

func (m *prefixMemo) forget(k prefixKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.cur, k)
	delete(m.old, k)
}

// forgetAgent drops every entry of the agent (its erasure).
func (m *prefixMemo) forgetAgent(agentID int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, gen := range []map[prefixKey]prefixSeen{m.cur, m.old} {
		for k := range gen {
			if k.agent == agentID {
				delete(gen, k)
			}
		}
	}
}
