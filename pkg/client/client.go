// Package client is a small typed client of MateMemory's REST API for chat services: store
// conversation messages, publish a completed conversation, assemble the context window,
// hand the memory tools to a model and run its calls, and read or change memory files.
//
//	c, err := client.New("http://memory:8080", os.Getenv("MATE_API_KEY"))
//	_, err = c.StoreMessages(ctx, agentID, convID,
//		client.Message{Role: "user", Content: question},
//		client.Message{Role: "assistant", Content: answer})
//	ack, err := c.PublishCompletion(ctx, &event.ConversationCompletedEvent{...})
//
// Every method takes ctx first and returns an *APIError when the API answers with an error
// envelope; errors.Is matches it against ErrNotFound, ErrConflict, ErrForbidden, ... (and
// IsNotFound, IsConflict, IsForbidden, IsRetryable classify it too). Safe requests are
// retried with backoff (WithRetry). WaitRun waits for an event's outcome. ExportAgent and
// ImportAgent move an agent's memory as a bundle (docs/bundle.md), streamed both ways;
// EraseAgent and EraseConversation erase and return the receipt. The package depends on the
// standard library, pkg/event and pkg/api (the wire types the server answers with, which
// this package's types are aliases of), both standard library only; the import report and
// the erasure receipts are declared here, held to the server's own types by a test
// (pkg/internal/test/goclient TestWireTypesMatchTheServers).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client calls one MateMemory API. It is safe for concurrent use.
type Client struct {
	base   *url.URL
	apiKey string
	hc     *http.Client
	// transfer sends exports and imports: hc without WithTimeout's bound on the whole
	// request, which a large bundle outlasts; timeout bounds each stall of theirs instead.
	transfer  *http.Client
	timeout   time.Duration
	retry     Retry
	userAgent string
}

// Option configures a Client.
type Option func(*options)

type options struct {
	hc        *http.Client
	timeout   time.Duration
	retry     *Retry
	userAgent string
}

// WithHTTPClient sends requests through hc (for its transport, proxies, TLS settings).
func WithHTTPClient(hc *http.Client) Option { return func(o *options) { o.hc = hc } }

// WithTimeout bounds every request, on top of any deadline of its ctx. Without it a request
// lasts as long as its ctx allows (a manual summarize waits for the LLM). An export or an
// import is bounded differently, as a transfer that may take long: it fails when no byte
// moves for d (an http.Client of WithHTTPClient keeps its own Timeout, which bounds them too).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// New builds a client of the API at baseURL (e.g. "http://127.0.0.1:8080"). apiKey is sent
// as a bearer token; leave it empty when the server runs without keys.
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("matememory client: base URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("matememory client: base URL %q must be http(s)://host[:port][/prefix]", baseURL)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	hc := o.hc
	if hc == nil {
		hc = &http.Client{}
	}
	transfer := hc
	if o.timeout > 0 {
		cp := *hc // never change the caller's client
		cp.Timeout = o.timeout
		hc = &cp
	}
	c := &Client{base: u, apiKey: apiKey, hc: hc, transfer: transfer, timeout: o.timeout, retry: DefaultRetry, userAgent: o.userAgent}
	if o.retry != nil {
		c.retry = *o.retry
		c.retry.Attempts = max(c.retry.Attempts, 1)
	}
	if c.userAgent == "" {
		c.userAgent = "matememory-go-client"
	}
	return c, nil
}

// APIError is an error answer of the API: the HTTP status and the envelope's code and msg.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Code is the envelope's code (normally equal to Status).
	Code int
	// Msg says what was wrong and, mostly, what to do.
	Msg string
	// Method and Path name the request, for logs.
	Method, Path string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("matememory: %s %s: %d %s", e.Method, e.Path, e.Code, e.Msg)
}

// Temporary reports whether the same request may succeed later unchanged (rate limited,
// JetStream or the database briefly unavailable, a gateway timeout).
func (e *APIError) Temporary() bool {
	switch e.Status {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

func statusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// IsNotFound reports a 404 (no such file, conversation or route).
func IsNotFound(err error) bool { return statusOf(err) == http.StatusNotFound }

// IsConflict reports a 409: the file changed since the version sent in If-Match (re-read and
// retry), or a create-only write found it already there.
func IsConflict(err error) bool { return statusOf(err) == http.StatusConflict }

// IsForbidden reports a 403: the API key may not act for that agent (or needs admin).
func IsForbidden(err error) bool { return statusOf(err) == http.StatusForbidden }

// IsUnauthorized reports a 401: the API key is missing or unknown.
func IsUnauthorized(err error) bool { return statusOf(err) == http.StatusUnauthorized }

// IsBadRequest reports a 400: the request is invalid and will stay so; the message says why.
func IsBadRequest(err error) bool { return statusOf(err) == http.StatusBadRequest }

// IsRetryable reports whether err is worth retrying unchanged: a temporary API error, or a
// transport failure that was not the caller's own cancellation.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Temporary()
	}
	var ue *url.Error
	return errors.As(err, &ue)
}

// maxResponseBytes bounds what is read of a response (files are at most a few MiB).
const maxResponseBytes = 64 << 20

type request struct {
	method string
	path   string // already escaped
	query  url.Values
	body   any
	header http.Header
	// retrySafe: repeating the request cannot apply it twice (publishing an event with its
	// id), so it is retried like a GET.
	retrySafe bool
}

type envelope struct {
	Code *int            `json:"code"`
	Msg  string          `json:"msg"`
	Data json.RawMessage `json:"data"`
}

// do sends r, retrying as the client's Retry allows, and decodes the envelope's data into out
// (when out is not nil). It returns the response headers.
func (c *Client) do(ctx context.Context, r request, out any) (http.Header, error) {
	for attempt := 1; ; attempt++ {
		h, err := c.doOnce(ctx, r, out)
		if !c.shouldRetry(r, attempt, err) {
			return h, err
		}
		if serr := sleep(ctx, c.backoff(attempt, h)); serr != nil {
			return h, err
		}
	}
}

func (c *Client) doOnce(ctx context.Context, r request, out any) (http.Header, error) {
	var body io.Reader
	if r.body != nil {
		var b []byte
		switch v := r.body.(type) {
		case json.RawMessage:
			b = v
		case []byte:
			b = v
		default:
			var err error
			if b, err = json.Marshal(v); err != nil {
				return nil, fmt.Errorf("matememory: %s %s: encode body: %w", r.method, r.path, err)
			}
		}
		body = bytes.NewReader(b)
	}
	resp, err := c.open(ctx, c.hc, r, body, "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return resp.Header, decode(r, resp, out)
}

// open sends r with body (nil for none, of contentType) through hc and returns the response,
// whatever its status.
func (c *Client) open(ctx context.Context, hc *http.Client, r request, body io.Reader, contentType string) (*http.Response, error) {
	target := c.base.String() + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return nil, fmt.Errorf("matememory: %s %s: %w", r.method, r.path, err)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("matememory: %s %s: %w", r.method, r.path, err)
	}
	return resp, nil
}

// decode reads resp, the answer to r, and decodes the envelope's data into out (when out is
// not nil), or returns the *APIError of an error answer.
func decode(r request, resp *http.Response, out any) error {
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return fmt.Errorf("matememory: %s %s: read response: %w", r.method, r.path, err)
	}
	var env envelope
	jsonErr := json.Unmarshal(raw, &env)
	code := resp.StatusCode
	if jsonErr == nil && env.Code != nil {
		code = *env.Code
	}
	if resp.StatusCode >= 300 || code >= 300 {
		msg := env.Msg
		if jsonErr != nil || msg == "" {
			msg = strings.TrimSpace(string(raw))
			if len(msg) > 512 {
				msg = msg[:512] + "…"
			}
			if msg == "" {
				msg = http.StatusText(resp.StatusCode)
			}
		}
		status := resp.StatusCode
		if status < 300 { // an error envelope behind a 200
			status = code
		}
		return &APIError{Status: status, Code: code, Msg: msg, Method: r.method, Path: r.path}
	}
	if jsonErr != nil {
		return fmt.Errorf("matememory: %s %s: response is not the API's JSON envelope: %w", r.method, r.path, jsonErr)
	}
	if out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			return fmt.Errorf("matememory: %s %s: decode data: %w", r.method, r.path, err)
		}
	}
	return nil
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }

// filePath escapes a workspace filename segment by segment: its '/' separate folders.
func filePath(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

func agentPath(agentID int64) string {
	return "/api/v1/agents/" + itoa(agentID)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
