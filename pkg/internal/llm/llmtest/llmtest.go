// Package llmtest is a fake OpenAI-compatible chat-completions server for tests: a real
// HTTP server speaking the wire format, whose answers the test scripts. New runs it in the
// test process; NewExternal runs it in a child process (see MaybeServe), for benchmarks
// that measure their own process's CPU.
package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/internal/llm"
)

// Received is a request as the server saw it.
type Received struct {
	Model     string        `json:"model"`
	Messages  []llm.Message `json:"-"`
	MaxTokens int           `json:"max_tokens"`
	// MaxCompletionTokens is the newer name of the limit (0 when the client sent
	// max_tokens instead).
	MaxCompletionTokens int `json:"max_completion_tokens"`
	// Temperature is nil when the client sent none.
	Temperature    *float64 `json:"temperature"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
}

// Reply scripts one answer.
type Reply struct {
	// Status other than 0/200 answers an OpenAI-style error with that status.
	Status int
	// Content is the assistant message content.
	Content string
	// Delay waits before answering (or until the client gives up).
	Delay time.Duration
	// Hang never answers until the client disconnects.
	Hang bool
	// FinishReason defaults to "stop".
	FinishReason string
	TokensIn     int
	TokensOut    int
	// Header is added to the answer (Retry-After, say).
	Header http.Header
}

// Server is the fake endpoint.
type Server struct {
	*httptest.Server
	// Handler decides each answer; it may be swapped between phases of a test.
	handler atomic.Value // func(Received) Reply

	Calls    atomic.Int64
	inFlight atomic.Int64
	// MaxInFlight is the highest number of concurrent requests seen.
	MaxInFlight atomic.Int64

	mu       sync.Mutex
	received []Received
	forget   atomic.Bool
}

// Transcript is the transcript of the request's last user message (between <transcript>
// and </transcript>, as the extraction prompts send it), and whether it has one.
func (r Received) Transcript() (string, bool) {
	user := ""
	for _, m := range r.Messages {
		if m.Role == "user" {
			user = m.Content
		}
	}
	_, t, ok := strings.Cut(user, "<transcript>")
	t, _, _ = strings.Cut(t, "</transcript>")
	return t, ok
}

// Forget stops keeping the requests (Received then returns those seen before): a long
// benchmark's prompts would otherwise all stay in memory.
func (s *Server) Forget() { s.forget.Store(true) }

// New starts a fake server answering with h; it stops at test cleanup.
func New(t testing.TB, h func(Received) Reply) *Server {
	s := &Server{}
	s.SetHandler(h)
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// config is the llm.Config of a fake server at url.
func config(url string) llm.Config {
	return llm.Config{BaseURL: url + "/v1/", APIKey: "test-key", Model: "fake-model", Timeout: 5 * time.Second, JSONMode: true}
}

// SetHandler replaces the answer script.
func (s *Server) SetHandler(h func(Received) Reply) { s.handler.Store(h) }

// Received returns the requests seen so far.
func (s *Server) Received() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.received...)
}

// Config returns an llm.Config pointing at the server.
func (s *Server) Config() llm.Config { return config(s.URL) }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		m := s.MaxInFlight.Load()
		if n <= m || s.MaxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	s.Calls.Add(1)
	var raw struct {
		Received
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	rec := raw.Received
	for _, m := range raw.Messages {
		content := ""
		switch c := m.Content.(type) {
		case string:
			content = c
		case []any:
			for _, part := range c {
				if p, ok := part.(map[string]any); ok {
					if t, ok := p["text"].(string); ok {
						content += t
					}
				}
			}
		}
		rec.Messages = append(rec.Messages, llm.Message{Role: m.Role, Content: content})
	}
	if !s.forget.Load() {
		s.mu.Lock()
		s.received = append(s.received, rec)
		s.mu.Unlock()
	}
	rep := s.handler.Load().(func(Received) Reply)(rec)
	if rep.Hang {
		<-r.Context().Done()
		return
	}
	if rep.Delay > 0 {
		select {
		case <-time.After(rep.Delay):
		case <-r.Context().Done():
			return
		}
	}
	for k, v := range rep.Header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	if rep.Status != 0 && rep.Status != 200 {
		w.WriteHeader(rep.Status)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"test_error","code":"test_error","param":null}}`, rep.Content)
		return
	}
	fr := rep.FinishReason
	if fr == "" {
		fr = "stop"
	}
	if rep.TokensIn == 0 {
		rep.TokensIn = 100
	}
	if rep.TokensOut == 0 {
		rep.TokensOut = 50
	}
	body := map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion", "created": time.Now().Unix(), "model": rec.Model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": fr,
			"message": map[string]any{"role": "assistant", "content": rep.Content}}},
		"usage": map[string]any{"prompt_tokens": rep.TokensIn, "completion_tokens": rep.TokensOut,
			"total_tokens": rep.TokensIn + rep.TokensOut},
	}
	_ = json.NewEncoder(w).Encode(body)
}
