package recall

import (
	"container/list"
	"sync"

	"github.com/matememory/matememory/pkg/internal/recall/lexical"
)

// snapshot is one agent's chunks, BM25 index and vectors, as of a generation.
type snapshot struct {
	agentID    int64
	generation int64
	model      string
	chunks     []cachedChunk
	bm25       *lexical.Index
	// bytes is what the snapshot holds: chunks, vectors, the index's segments whole, and
	// dead: what removed chunks left in blocks kept chunks share (their vectors; their
	// strings too when the snapshot came from a file, whose strings share its bytes).
	bytes int64
	dead  int64
	// analysed is what the caches searches fill (sents, sets, noCue) hold, counted in the
	// cache's budget as they grow (guarded by the cache's mutex).
	analysed int64
	fromFile bool
	// epoch is the snapshot files' removal count for the agent when this snapshot's data
	// was read: it is written to a file only while that count has not moved.
	epoch uint64
	// files is the index state (mate_recall_file) each file's chunks were read at; a refresh
	// re-reads only the files whose state moved.
	files map[string]fileState
	// sents are chunks' sentences with their terms, analysed on a search's first need
	// (*cachedChunk -> []sentence): the best-fact steps read them again on every search.
	sents sync.Map
	// sets are chunks' content terms as sets (*cachedChunk -> []string), for the term
	// similarity of lexical MMR.
	sets sync.Map
	// noCue are the chunks whose text has no word saying that something changed
	// (*cachedChunk -> bool, true: none), known once a search has looked.
	noCue sync.Map
}

// sentence is a line or sentence of a chunk and its analysed terms.
type sentence struct {
	text  string
	terms []string
	// set is the content terms as a set (termSet), what a best fact is compared by.
	set []string
}

type fileState struct {
	fileID, version int64
	pending         bool
	format          int
}

// cache keeps snapshots of recently searched agents within a byte budget (LRU). The
// database stays the record: a snapshot is used only while its generation is the
// database's, and index messages drop it early on every replica.
type cache struct {
	mu     sync.Mutex
	budget int64
	used   int64
	ll     *list.List
	byID   map[int64]*list.Element
}

func newCache(budget int64) *cache {
	return &cache{budget: budget, ll: list.New(), byID: map[int64]*list.Element{}}
}

func (c *cache) get(agentID int64) *snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[agentID]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*snapshot)
	}
	return nil
}

// put stores s unless it is larger than the whole budget, evicting the least recently used.
func (c *cache) put(s *snapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(s)
}

func (c *cache) putLocked(s *snapshot) {
	if e, ok := c.byID[s.agentID]; ok {
		old := e.Value.(*snapshot)
		if old.generation > s.generation {
			return
		}
		c.used -= old.bytes + old.analysed
		c.ll.Remove(e)
		delete(c.byID, s.agentID)
	}
	if s.bytes > c.budget {
		return
	}
	for c.used+s.bytes > c.budget && c.ll.Len() > 0 {
		e := c.ll.Back()
		old := e.Value.(*snapshot)
		c.used -= old.bytes + old.analysed
		c.ll.Remove(e)
		delete(c.byID, old.agentID)
	}
	c.byID[s.agentID] = c.ll.PushFront(s)
	c.used += s.bytes + s.analysed
}

// grow counts n more bytes that a search's analysis added to s, if s is cached, evicting the
// least recently used other snapshots while the cache is over its budget.
func (c *cache) grow(s *snapshot, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byID[s.agentID]
	if !ok || e.Value.(*snapshot) != s {
		s.analysed += n // counted when it is put
		return
	}
	s.analysed += n
	c.used += n
	for c.used > c.budget && c.ll.Len() > 1 {
		b := c.ll.Back()
		if b == e {
			c.ll.MoveToFront(e)
			b = c.ll.Back()
		}
		old := b.Value.(*snapshot)
		c.used -= old.bytes + old.analysed
		c.ll.Remove(b)
		delete(c.byID, old.agentID)
	}
}

// replace puts s in the place of old if old is still the agent's snapshot (a compaction
// finished before a newer snapshot was cached, or the agent was forgotten), within the
// budget as put does, and reports whether it did.
func (c *cache) replace(old, s *snapshot) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[old.agentID]; ok && e.Value.(*snapshot) == old {
		c.putLocked(s)
		_, ok := c.byID[s.agentID]
		return ok
	}
	return false
}

// drop forgets an agent's snapshot.
func (c *cache) drop(agentID int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[agentID]; ok {
		c.used -= e.Value.(*snapshot).bytes + e.Value.(*snapshot).analysed
		c.ll.Remove(e)
		delete(c.byID, agentID)
	}
}

// stats reports entries and bytes used.
func (c *cache) stats() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len(), c.used
}
