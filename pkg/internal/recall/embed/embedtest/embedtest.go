// Package embedtest serves a deterministic embedder over the OpenAI embeddings wire format,
// for tests and benchmarks. Its vectors are feature-hashed analysed terms: texts sharing
// words point the same way. That tests the plumbing (requests, batching, caching, cosine,
// ranking), not semantics: a paraphrase with no shared word is not "similar" here.
package embedtest

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"net/http/httptest"

	"sync/atomic"
	"testing"

	"github.com/matememory/matememory/pkg/internal/recall/embed"
	"github.com/matememory/matememory/pkg/internal/recall/lexical"
)

// Server is the fake endpoint.
type Server struct {
	URL  string
	Dims int
	// Calls counts requests; Texts counts texts embedded.
	Calls, Texts atomic.Int64
	down         atomic.Bool
	an           *lexical.Analyzer
	vector       func(string) []float32 // nil: feature hashing (Vector)
	srv          *httptest.Server
}

// New starts a server with dims-dimensional vectors; it stops when the test ends.
func New(t testing.TB, dims int) *Server {
	s := &Server{Dims: dims, an: lexical.NewAnalyzer()}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1/"
	t.Cleanup(s.srv.Close)
	return s
}

// NewWith starts a server whose vectors vector chooses (a test controlling cosines); it
// stops when the test ends.
func NewWith(t testing.TB, dims int, vector func(text string) []float32) *Server {
	s := New(t, dims)
	s.vector = vector
	return s
}

// SetDown makes the endpoint answer 503 (down=true) or work again.
func (s *Server) SetDown(down bool) { s.down.Store(down) }

// Config is an embed.Config pointing at the server.
func (s *Server) Config() embed.Config {
	return embed.Config{BaseURL: s.URL, APIKey: "test", Model: "hash-test", Dimensions: s.Dims}
}

// Vector is the deterministic embedding of text.
func (s *Server) Vector(text string) []float32 {
	if s.vector != nil {
		return s.vector(text)
	}
	return Vector(s.an, text, s.Dims)
}

// Vector feature-hashes the analysed terms of text into dims dimensions.
func Vector(an *lexical.Analyzer, text string, dims int) []float32 {
	v := make([]float32, dims)
	tf := map[string]float64{}
	for _, t := range an.Terms(text) {
		// Single CJK characters (the analyser's unigrams) are shared by most Chinese text:
		// noise for a vector, so only the bigrams count here.
		if r := []rune(t); len(r) == 1 && r[0] >= 0x2E80 {
			continue
		}
		tf[t]++
	}
	for t, n := range tf {
		h := fnv.New64a()
		h.Write([]byte(t))
		x := h.Sum64()
		sign := float32(1)
		if x>>63 == 1 {
			sign = -1
		}
		v[x%uint64(dims)] += sign * float32(1+math.Log(n)) // sublinear term frequency
	}
	return embed.Normalize(v)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if s.down.Load() {
		http.Error(w, `{"error":{"message":"embedding service unavailable","type":"server_error"}}`, http.StatusServiceUnavailable)
		return
	}
	var req struct {
		Input      json.RawMessage `json:"input"`
		Model      string          `json:"model"`
		Dimensions int             `json:"dimensions"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var texts []string
	if err := json.Unmarshal(req.Input, &texts); err != nil {
		var one string
		if err := json.Unmarshal(req.Input, &one); err != nil {
			http.Error(w, "input must be a string or a list of strings", http.StatusBadRequest)
			return
		}
		texts = []string{one}
	}
	s.Calls.Add(1)
	s.Texts.Add(int64(len(texts)))
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	resp := struct {
		Object string         `json:"object"`
		Model  string         `json:"model"`
		Data   []item         `json:"data"`
		Usage  map[string]int `json:"usage"`
	}{Object: "list", Model: req.Model, Usage: map[string]int{"prompt_tokens": 0, "total_tokens": 0}}
	for i, t := range texts {
		resp.Data = append(resp.Data, item{Object: "embedding", Index: i, Embedding: s.Vector(t)})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}
