package recall

import (
	"context"
	"time"
)

// SearchWithFullRebuild makes every refresh rebuild the agent's whole index, as before
// segments: the benchmarks' baseline.
func SearchWithFullRebuild() SearcherOption { return func(s *Searcher) { s.fullRebuild = true } }

// Segments is the number of segments of the agent's cached index (0 when not cached) and
// the bytes its snapshot accounts for.
func (s *Searcher) Segments(agentID int64) (int, int64) {
	if snap := s.cache.get(agentID); snap != nil {
		return snap.bm25.Segments(), snap.bytes
	}
	return 0, 0
}

// InOrder reports whether the agent's cached chunks are in file order and numbered so
// (search breaks ties by document number: a cold build's order).
func (s *Searcher) InOrder(agentID int64) bool {
	snap := s.cache.get(agentID)
	if snap == nil {
		return false
	}
	for k := range snap.chunks {
		if snap.chunks[k].ix != k || (k > 0 && compareChunks(&snap.chunks[k-1], &snap.chunks[k]) >= 0) {
			return false
		}
	}
	return true
}

// ColdSteps times the steps of a cold load of the agent, without caching it: reading the
// chunk rows, reading the vectors, building the snapshot (posting lists, vector block).
func (s *Searcher) ColdSteps(ctx context.Context, agentID int64) (rows, vectors, build time.Duration, err error) {
	db := s.db.WithContext(ctx)
	st := time.Now()
	files, err := readFileStates(db, agentID)
	if err != nil {
		return 0, 0, 0, err
	}
	rs, err := readChunkRows(db, agentID, true, nil)
	if err != nil {
		return 0, 0, 0, err
	}
	rows = time.Since(st)
	st = time.Now()
	vecs, err := s.readVectors(db, agentID, s.model(), true, rs)
	if err != nil {
		return 0, 0, 0, err
	}
	vectors = time.Since(st)
	st = time.Now()
	chunks := make([]cachedChunk, len(rs))
	for k, r := range rs {
		chunks[k] = cachedChunk{filename: r.Filename, ordinal: r.Ordinal, terms: r.Terms, text: r.Text, vec: vecs[r.Hash]}
	}
	_ = newSnapshot(agentID, 0, s.model(), chunks, files)
	build = time.Since(st)
	return rows, vectors, build, nil
}

// FromFile reports whether the searcher loaded a snapshot from a file.
func (s *Searcher) FromFile(int64) bool { return s.fileLoads.Load() > 0 }

// StaleFiles is how many snapshot files the searcher loaded and found behind the database.
func (s *Searcher) StaleFiles() int64 { return s.fileStale.Load() }

// SnapshotPath is the agent's snapshot file in dir.
func SnapshotPath(dir string, agentID int64) string {
	return (&snapshotFiles{dir: dir}).path(agentID)
}

// Compact rebuilds the agent's cached snapshot whole now, as the background compaction
// does, and reports whether it replaced the cached one.
func (s *Searcher) Compact(agentID int64) bool {
	snap := s.cache.get(agentID)
	return snap != nil && s.cache.replace(snap, snap.compacted())
}
