package window

import (
	"sync"

	"github.com/matememory/matememory/pkg/internal/tokens"
)

// countCache remembers message token counts by content hash and encoding: exact BPE runs
// at about half a million tokens a second, so recounting a 10,000-message history on every
// request would dominate assembly. Two generations bound its size: when the current one is
// full it becomes the previous one, and entries still in use are promoted back.
type countCache struct {
	mu       sync.Mutex
	max      int
	cur, old map[countKey]int
}

type countKey struct {
	enc  string
	hash [32]byte
}

func newCountCache(max int) *countCache {
	return &countCache{max: max, cur: map[countKey]int{}, old: map[countKey]int{}}
}

func (c *countCache) count(tk tokens.Tokenizer, h [32]byte, m Message) int {
	k := countKey{tk.Name(), h}
	c.mu.Lock()
	n, ok := c.cur[k]
	if !ok {
		if n, ok = c.old[k]; ok {
			c.put(k, n)
		}
	}
	c.mu.Unlock()
	if ok {
		return n
	}
	n = tokens.MessageTokens(tk, counted(m))
	c.mu.Lock()
	c.put(k, n)
	c.mu.Unlock()
	return n
}

// text counts a bare text (the workspace injection) through the cache.
func (c *countCache) text(tk tokens.Tokenizer, s string) int {
	if s == "" {
		return 0
	}
	m := Message{Content: s}
	return c.count(tk, contentHash(m), m) - tokens.MessageTokens(tk, tokens.Message{})
}

// message counts a message that is not part of the history (system, summary, current).
func (c *countCache) message(tk tokens.Tokenizer, m Message) int {
	return c.count(tk, contentHash(m), m)
}

func (c *countCache) put(k countKey, n int) {
	if len(c.cur) >= c.max {
		c.old, c.cur = c.cur, make(map[countKey]int, c.max/4)
	}
	c.cur[k] = n
}
