package recall

import (
	"strings"

	"github.com/matememory/matememory/pkg/internal/recall/lexical"
)

// A refresh after a change of a few files keeps the posting lists of every other file: the
// changed files' chunks form a new segment of the BM25 index, and the index is assembled
// again from the segments (lexical.Assemble: document numbers, no posting list rebuilt).
// Segments and removed documents add up; merging and compaction keep them bounded.
const (
	// maxSegments is how many segments an index may have before the small ones (all but
	// the largest) are merged into one, at the cost of re-indexing their chunks.
	maxSegments = 8
	// compactDocs is how many chunks may sit outside the largest segment, or be removed but
	// still held by the segments, before the whole snapshot is rebuilt in the background.
	compactDocs = 2048
)

// compareChunks orders chunks by file, then position in the file: the snapshot's order and
// its document numbers (search breaks ties of score by document number).
func compareChunks(a, b *cachedChunk) int {
	if c := strings.Compare(a.filename, b.filename); c != 0 {
		return c
	}
	return a.ordinal - b.ordinal
}

// update is old with the changed files' chunks replaced by fresh (every chunk of those
// files, as read from the database) and the chunks of files no longer in files dropped,
// at generation gen. old is not modified: searches may still be reading it.
func (old *snapshot) update(gen int64, files map[string]fileState, changed []string, fresh []cachedChunk) *snapshot {
	drop := old.dropped(files, changed)
	sortChunks(fresh)
	packVectors(fresh)
	if len(fresh) > 0 {
		sg := lexical.NewSegmentJoined(termsOf(fresh))
		for k := range fresh {
			fresh[k].doc = lexical.Doc{Seg: sg, N: uint32(k)}
		}
	}
	snap := &snapshot{agentID: old.agentID, generation: gen, model: old.model, files: files, dead: old.dead,
		fromFile: old.fromFile, epoch: old.epoch}
	// Merge the kept chunks (in order) with the fresh ones (in order).
	chunks := make([]cachedChunk, 0, len(old.chunks)+len(fresh))
	f := 0
	for k := range old.chunks {
		c := &old.chunks[k]
		if drop[c.filename] {
			snap.dead += int64(4 * len(c.vec)) // its vector stays in the old block
			if old.fromFile {
				snap.dead += int64(len(c.heading) + len(c.text) + len(c.terms) + len(c.hash))
			}
			continue
		}
		for f < len(fresh) && compareChunks(&fresh[f], c) < 0 {
			chunks = append(chunks, fresh[f])
			f++
		}
		chunks = append(chunks, *c)
	}
	chunks = append(chunks, fresh[f:]...)
	snap.chunks = chunks
	mergeSmallSegments(chunks)
	snap.assemble()
	return snap
}

// dropped are the files whose chunks in old give way: the changed ones (read again) and
// those no longer in files (deleted).
func (old *snapshot) dropped(files map[string]fileState, changed []string) map[string]bool {
	drop := make(map[string]bool, len(changed))
	for _, name := range changed {
		drop[name] = true
	}
	for name := range old.files {
		if _, live := files[name]; !live {
			drop[name] = true
		}
	}
	return drop
}

// mergeSmallSegments re-indexes the chunks outside the largest segment as one segment when
// there are more than maxSegments.
func mergeSmallSegments(chunks []cachedChunk) {
	live := segmentCounts(chunks)
	if len(live) <= maxSegments {
		return
	}
	var base *lexical.Segment
	for sg, n := range live {
		if base == nil || n > live[base] {
			base = sg
		}
	}
	var docs []string
	var at []int
	for k := range chunks {
		if chunks[k].doc.Seg != base {
			docs = append(docs, chunks[k].terms)
			at = append(at, k)
		}
	}
	sg := lexical.NewSegmentJoined(docs)
	for i, k := range at {
		chunks[k].doc = lexical.Doc{Seg: sg, N: uint32(i)}
	}
}

// termsOf is the chunks' terms, as stored.
func termsOf(chunks []cachedChunk) []string {
	out := make([]string, len(chunks))
	for k := range chunks {
		out[k] = chunks[k].terms
	}
	return out
}

// segmentCounts is how many of the chunks each segment holds.
func segmentCounts(chunks []cachedChunk) map[*lexical.Segment]int {
	live := map[*lexical.Segment]int{}
	var last *lexical.Segment
	run := 0
	for k := range chunks {
		if sg := chunks[k].doc.Seg; sg != last {
			if last != nil {
				live[last] += run
			}
			last, run = sg, 0
		}
		run++
	}
	if last != nil {
		live[last] += run
	}
	return live
}

// assemble numbers the chunks in order, assembles the index from their segments and counts
// the bytes held.
func (snap *snapshot) assemble() {
	refs := make([]lexical.Doc, len(snap.chunks))
	snap.bytes = snap.dead
	for k := range snap.chunks {
		c := &snap.chunks[k]
		c.ix = k
		refs[k] = c.doc
		snap.bytes += chunkBytes(c)
	}
	snap.bm25 = lexical.Assemble(refs)
	snap.bytes += int64(snap.bm25.Bytes())
}

// chunkBytes estimates a cached chunk's memory (its strings, vector and struct).
func chunkBytes(c *cachedChunk) int64 {
	return int64(len(c.filename) + len(c.heading) + len(c.text) + len(c.terms) + 4*len(c.vec) + 64 + 200)
}

// stale reports whether the snapshot holds enough that is no longer, or not yet, in its
// main segment that it should be rebuilt whole: chunks outside the largest segment, removed
// chunks the segments still hold, vectors of removed chunks still in shared blocks.
func (snap *snapshot) stale() bool {
	if snap.bm25.Segments() <= 1 && snap.dead == 0 && snap.bm25.Held() == snap.bm25.Len() {
		return false
	}
	most := 0
	for _, n := range segmentCounts(snap.chunks) {
		most = max(most, n)
	}
	outside := len(snap.chunks) - most
	removed := snap.bm25.Held() - snap.bm25.Len()
	vecBytes := int64(0)
	for k := range snap.chunks {
		vecBytes += int64(4 * len(snap.chunks[k].vec))
	}
	return outside > max(compactDocs, len(snap.chunks)/8) || removed > max(compactDocs, len(snap.chunks)/4) ||
		snap.dead > max(vecBytes/4, 4<<20)
}

// compacted is the snapshot rebuilt whole: one segment, one vector block, its own strings
// (not a file's), nothing removed held.
func (snap *snapshot) compacted() *snapshot {
	chunks := append([]cachedChunk(nil), snap.chunks...)
	if snap.fromFile {
		for k := range chunks {
			c := &chunks[k]
			c.heading, c.text, c.terms, c.hash = strings.Clone(c.heading), strings.Clone(c.text), strings.Clone(c.terms), strings.Clone(c.hash)
			c.filename = strings.Clone(c.filename)
		}
	}
	out := newSnapshot(snap.agentID, snap.generation, snap.model, chunks, snap.files)
	out.epoch = snap.epoch
	return out
}

// compact rebuilds a stale snapshot in the background and puts it in the cache in the
// place of snap, unless snap is no longer the agent's cached snapshot by then (one
// compaction per agent at a time); then it writes the agent's file (persist).
func (s *Searcher) compact(snap *snapshot) {
	if s.cache.get(snap.agentID) != snap {
		return // not cached (larger than the budget), or already replaced
	}
	if _, busy := s.compacting.LoadOrStore(snap.agentID, true); busy {
		return
	}
	s.guard.Go("recall.compact", func() {
		defer s.compacting.Delete(snap.agentID)
		c := snap.compacted()
		c.analysed = c.inherit(snap)
		if s.cache.replace(snap, c) {
			s.persist(c)
		}
	}, "agent", snap.agentID)
}
