package recall

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
