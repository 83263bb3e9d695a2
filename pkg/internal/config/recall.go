package config

import "strings"

// validateRecall checks mate.embedding.* and mate.memory.search.*.
func validateRecall(m Mate, bad func(key, format string, args ...any)) {
	e := m.Embedding
	if e.BaseURL != "" && !strings.HasPrefix(e.BaseURL, "http://") && !strings.HasPrefix(e.BaseURL, "https://") {
		bad("mate.embedding.base-url", "%q; accepted: an http:// or https:// URL, or empty for lexical-only search", e.BaseURL)
	}
	if e.BaseURL != "" && e.Model == "" {
		bad("mate.embedding.model", "must not be empty when base-url is set (e.g. text-embedding-3-small, bge-m3)")
	}
	if e.Dimensions < 0 {
		bad("mate.embedding.dimensions", "%d; accepted: 0 (the model's own) or more", e.Dimensions)
	}
	if e.TimeoutSeconds <= 0 {
		bad("mate.embedding.timeout-seconds", "%v; accepted: a number greater than 0", e.TimeoutSeconds)
	}
	s := m.Memory.Search
	files := false
	for _, src := range s.Sources {
		switch src {
		case "files":
			files = true
		case "conversations":
		default:
			bad("mate.memory.search.sources", "%q is not a source; accepted: files, conversations (comma-separated in the environment)", src)
		}
	}
	if s.Enabled && !files {
		bad("mate.memory.search.sources", "%v; files must be a source (the memory files are what the recall tools search and read)", s.Sources)
	}
	if s.ChunkTokens < 50 || s.ChunkTokens > 8000 {
		bad("mate.memory.search.chunk-tokens", "%d; accepted: 50 to 8000", s.ChunkTokens)
	}
	if s.OverlapTokens < 0 || s.OverlapTokens >= s.ChunkTokens {
		bad("mate.memory.search.overlap-tokens", "%d; accepted: 0 up to less than chunk-tokens", s.OverlapTokens)
	}
	if s.VectorWeight < 0 || s.TextWeight < 0 || s.VectorWeight+s.TextWeight == 0 {
		bad("mate.memory.search.vector-weight", "%v and text-weight %v; accepted: weights of 0 or more, not both 0", s.VectorWeight, s.TextWeight)
	}
	if s.DecayFloor <= 0 || s.DecayFloor > 1 {
		bad("mate.memory.search.decay-floor", "%v; accepted: more than 0 up to 1 (1 = no decay)", s.DecayFloor)
	}
	if s.MMRLambda <= 0 || s.MMRLambda > 1 {
		bad("mate.memory.search.mmr-lambda", "%v; accepted: more than 0 up to 1 (1 = no diversity)", s.MMRLambda)
	}
	if s.MinScore < 0 || s.MinScore >= 1 {
		bad("mate.memory.search.min-score", "%v; accepted: 0 up to less than 1", s.MinScore)
	}
	if s.MinCoverage < 0 || s.MinCoverage > 1 {
		bad("mate.memory.search.min-coverage", "%v; accepted: 0 (no floor) to 1", s.MinCoverage)
	}
	if s.MinCosine < 0 || s.MinCosine > 1 {
		bad("mate.memory.search.min-cosine", "%v; accepted: 0 (never on the cosine alone) to 1", s.MinCosine)
	}
	if s.MaxResults < 1 || s.MaxResults > 1000 {
		bad("mate.memory.search.max-results", "%d; accepted: 1 to 1000", s.MaxResults)
	}
	if s.MaxQueryBytes < 16 {
		bad("mate.memory.search.max-query-bytes", "%d; accepted: 16 or more", s.MaxQueryBytes)
	}
	if s.CacheMB <= 0 {
		bad("mate.memory.search.cache-mb", "%v; accepted: a number greater than 0", s.CacheMB)
	}
	if s.ReconcileSeconds <= 0 {
		bad("mate.memory.search.reconcile-seconds", "%v; accepted: a number greater than 0", s.ReconcileSeconds)
	}
	if s.SnapshotMinChunks < 0 {
		bad("mate.memory.search.snapshot-min-chunks", "%d; accepted: 0 (no snapshot files) or more", s.SnapshotMinChunks)
	}
}
