package client

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Retry is how a Client retries a request that failed in a way worth retrying: a transport
// error, 429, 502, 503 or 504. Requests that are safe to repeat (GET, and publishing an
// event, which the server deduplicates by its id) are retried on all of these; others only
// on 429, which the server answers before doing anything.
type Retry struct {
	// Attempts is the total number of tries (1 = no retry).
	Attempts int
	// Base is the first backoff; each retry doubles it, with jitter, up to Max.
	Base, Max time.Duration
}

// DefaultRetry: 4 tries, 200 ms doubling up to 5 s. A Retry-After header is honoured up to Max.
var DefaultRetry = Retry{Attempts: 4, Base: 200 * time.Millisecond, Max: 5 * time.Second}

// WithRetry sets the retry policy; WithRetry(Retry{Attempts: 1}) turns retries off.
func WithRetry(r Retry) Option { return func(o *options) { o.retry = &r } }

// WithUserAgent sets the User-Agent sent with every request (default "matememory-go-client").
func WithUserAgent(ua string) Option { return func(o *options) { o.userAgent = ua } }

// shouldRetry decides whether attempt (1-based) of r may be retried after err.
func (c *Client) shouldRetry(r request, attempt int, err error) bool {
	if attempt >= c.retry.Attempts || err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ae *APIError
	if errors.As(err, &ae) {
		if ae.Status == http.StatusTooManyRequests {
			return true
		}
		return r.idempotent() && ae.Temporary()
	}
	return r.idempotent() && IsRetryable(err)
}

func (r request) idempotent() bool {
	return r.method == http.MethodGet || r.method == http.MethodHead || r.retrySafe
}

// backoff is the wait before retry number attempt (1-based), or the server's Retry-After
// when it sent one (capped at Max).
func (c *Client) backoff(attempt int, h http.Header) time.Duration {
	if d, ok := retryAfter(h); ok {
		return min(d, c.retry.Max)
	}
	d := c.retry.Base << (attempt - 1)
	if d <= 0 || d > c.retry.Max {
		d = c.retry.Max
	}
	// Full jitter over the upper half: retries of many clients spread out.
	return d/2 + rand.N(d/2+1)
}

func retryAfter(h http.Header) (time.Duration, bool) {
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
