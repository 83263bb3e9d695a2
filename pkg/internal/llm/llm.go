// Package llm calls an OpenAI-compatible chat-completions endpoint (OpenAI, DeepSeek,
// Qwen/DashScope compatible mode, Ollama, vLLM) through openai-go, and classifies its
// failures as transient (retry later) or permanent.
package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Message is one chat message.
type Message struct {
	Role    string // system, user, assistant
	Content string
}

// Request is one completion.
type Request struct {
	Messages  []Message
	MaxTokens int
	// JSON asks for a JSON object answer (response_format json_object) where supported.
	JSON bool
	// Temperature, when non-nil, is sent.
	Temperature *float64
}

// Response is the model's answer and what it cost.
type Response struct {
	Content   string
	Model     string
	TokensIn  int
	TokensOut int
	Latency   time.Duration
	// Truncated is true when the model stopped at the token limit.
	Truncated bool
}

// Client completes chat requests.
type Client interface {
	Complete(ctx context.Context, req Request) (Response, error)
	// Model names the model used.
	Model() string
}

// Config configures the OpenAI-compatible client.
type Config struct {
	BaseURL  string
	APIKey   string
	Model    string
	Timeout  time.Duration
	JSONMode bool
}

// OpenAI is a Client over openai-go.
type OpenAI struct {
	c        openai.Client
	model    string
	jsonMode atomic.Bool
}

// NewOpenAI builds a client. Base URL and key are always set explicitly so that ambient
// OPENAI_* variables never override the configuration; openai-go's own retries are off
// (the pipeline retries through JetStream redelivery with backoff).
func NewOpenAI(cfg Config) *OpenAI {
	base := cfg.BaseURL
	if base == "" {
		base = "https://api.openai.com/v1/"
	}
	key := cfg.APIKey
	if key == "" {
		key = "none" // local servers (Ollama, vLLM) accept any key
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
	}
	if cfg.Timeout > 0 {
		opts = append(opts, option.WithRequestTimeout(cfg.Timeout))
	}
	o := &OpenAI{c: openai.NewClient(opts...), model: cfg.Model}
	o.jsonMode.Store(cfg.JSONMode)
	return o
}

// Model implements Client.
func (o *OpenAI) Model() string { return o.model }

// Complete implements Client. When the endpoint rejects response_format, JSON mode is
// turned off for this client and the request is sent again without it.
func (o *OpenAI) Complete(ctx context.Context, req Request) (Response, error) {
	useJSON := req.JSON && o.jsonMode.Load()
	resp, err := o.complete(ctx, req, useJSON)
	if err != nil && useJSON && rejectsResponseFormat(err) {
		o.jsonMode.Store(false)
		resp, err = o.complete(ctx, req, false)
	}
	return resp, err
}

// chatPath is the chat-completions endpoint, relative to the base URL.
const chatPath = "chat/completions"

// wireRequest is the chat-completions request body. Field order and encoding (no HTML
// escaping) follow what openai-go's ChatCompletionNewParams.MarshalJSON writes for the
// fields this client sets, so the bytes on the wire are the same as when the client went
// through Chat.Completions.New; building it with encoding/json on this small struct costs
// a fraction of openai-go's reflection over the full params type.
type wireRequest struct {
	Messages       []wireMessage `json:"messages,omitempty"`
	Model          string        `json:"model"`
	MaxTokens      int           `json:"max_tokens,omitempty"`
	Temperature    *float64      `json:"temperature,omitempty"`
	ResponseFormat *wireFormat   `json:"response_format,omitempty"`
}

type wireMessage struct {
	Content string `json:"content"`
	Role    string `json:"role"`
}

type wireFormat struct {
	Type string `json:"type"`
}

var jsonObjectFormat = &wireFormat{Type: "json_object"}

// wireResponse is the part of a chat-completions answer the client reads.
type wireResponse struct {
	Model   string       `json:"model"`
	Choices []wireChoice `json:"choices"`
	Usage   struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

type wireChoice struct {
	Message struct {
		Content string `json:"content"`
	} `json:"message"`
	FinishReason string `json:"finish_reason"`
}

// UnmarshalJSON decodes a well-formed answer with encoding/json. An answer with a field of
// an unexpected type (a numeric content or model, a string token count) is decoded again
// by openai-go's own, lenient decoder, which coerces or skips such fields, so that every
// answer reads as it did when the client decoded into openai.ChatCompletion.
func (r *wireResponse) UnmarshalJSON(b []byte) error {
	type plain wireResponse
	err := json.Unmarshal(b, (*plain)(r))
	var typeErr *json.UnmarshalTypeError
	if !errors.As(err, &typeErr) {
		return err
	}
	var c openai.ChatCompletion
	if err := c.UnmarshalJSON(b); err != nil {
		return err
	}
	*r = wireResponse{Model: c.Model, Choices: make([]wireChoice, len(c.Choices))}
	for i, ch := range c.Choices {
		r.Choices[i].Message.Content = ch.Message.Content
		r.Choices[i].FinishReason = ch.FinishReason
	}
	r.Usage.PromptTokens, r.Usage.CompletionTokens = c.Usage.PromptTokens, c.Usage.CompletionTokens
	return nil
}

// encodeRequest writes the request body.
func (o *OpenAI) encodeRequest(req Request, useJSON bool) ([]byte, error) {
	size := 128 + len(o.model)
	var msgs []wireMessage // nil when there are none: openai-go left the field out
	if len(req.Messages) > 0 {
		msgs = make([]wireMessage, len(req.Messages))
	}
	for i, m := range req.Messages {
		role := m.Role
		if role != "system" && role != "assistant" {
			role = "user" // as before: anything else is sent as a user message
		}
		msgs[i] = wireMessage{Content: m.Content, Role: role}
		size += 32 + len(m.Content) + len(m.Content)/8 // room for some escapes
	}
	w := wireRequest{Messages: msgs, Model: o.model, MaxTokens: max(req.MaxTokens, 0), Temperature: req.Temperature}
	if useJSON {
		w.ResponseFormat = jsonObjectFormat
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&w); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// complete sends one request through openai-go's request pipeline (base URL, bearer auth,
// default headers, request timeout, no retries, API error decoding) with a body this
// package encodes and an answer it decodes into a small struct.
func (o *OpenAI) complete(ctx context.Context, req Request, useJSON bool) (Response, error) {
	body, err := o.encodeRequest(req, useJSON)
	if err != nil {
		return Response{}, fmt.Errorf("llm %s: encoding the request: %w", o.model, err)
	}
	var c wireResponse
	start := time.Now()
	err = o.c.Post(ctx, chatPath, body, &c)
	lat := time.Since(start)
	if err != nil {
		return Response{Latency: lat}, fmt.Errorf("llm %s: %w", o.model, err)
	}
	if len(c.Choices) == 0 {
		return Response{Latency: lat}, &Error{Transient: true, Msg: "llm answered with no choices"}
	}
	return Response{
		Content:   c.Choices[0].Message.Content,
		Model:     c.Model,
		TokensIn:  int(c.Usage.PromptTokens),
		TokensOut: int(c.Usage.CompletionTokens),
		Latency:   lat,
		Truncated: c.Choices[0].FinishReason == "length",
	}, nil
}

func rejectsResponseFormat(err error) bool {
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 {
		return false
	}
	s := strings.ToLower(apiErr.Message + " " + apiErr.Param + " " + apiErr.RawJSON())
	return strings.Contains(s, "response_format") || strings.Contains(s, "json_object") || strings.Contains(s, "json mode")
}

// Error is a classified LLM failure.
type Error struct {
	Transient bool
	Msg       string
}

func (e *Error) Error() string { return e.Msg }

// StatusCode returns the HTTP status of an API error, or 0.
func StatusCode(err error) int {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode
	}
	return 0
}

// ContextLengthExceeded reports whether the model refused the prompt as too long.
func ContextLengthExceeded(err error) bool {
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		return false
	}
	s := strings.ToLower(apiErr.Code + " " + apiErr.Message)
	return strings.Contains(s, "context_length_exceeded") || strings.Contains(s, "maximum context length")
}

// RetryAfter is how long the endpoint asked the client to wait before trying again (the
// Retry-After header of a 429 or 503, in seconds or as an HTTP date, or OpenAI's
// retry-after-ms), if it said.
func RetryAfter(err error) (time.Duration, bool) {
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.Response == nil {
		return 0, false
	}
	h := apiErr.Response.Header
	if ms, perr := strconv.ParseFloat(strings.TrimSpace(h.Get("Retry-After-Ms")), 64); perr == nil && ms >= 0 {
		return time.Duration(ms * float64(time.Millisecond)), true
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, perr := strconv.ParseFloat(v, 64); perr == nil && secs >= 0 {
		return time.Duration(secs * float64(time.Second)), true
	}
	if t, perr := http.ParseTime(v); perr == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

// Transient reports whether a failure is worth retrying later: timeouts, network errors,
// 408/409/429 and 5xx answers, and auth errors (a key being rotated). A 400 is permanent.
func Transient(err error) bool {
	if err == nil {
		return false
	}
	var le *Error
	if errors.As(err, &le) {
		return le.Transient
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	switch code := StatusCode(err); {
	case code == 0:
		return true // transport failure without a status
	case code == 408 || code == 409 || code == 429 || code >= 500:
		return true
	case code == 401 || code == 403 || code == 404:
		return true
	default:
		return false
	}
}
