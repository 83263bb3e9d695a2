package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ProvisionRetry is how provisioning (streams, consumers, KV buckets) waits for a cluster
// that does not answer yet: processes started together on a fresh cluster, a cluster
// electing its leaders, a node still catching up. Each attempt that fails for such a reason
// is logged and retried with exponential backoff until MaxWait has passed; a refusal that
// will not change (an invalid or conflicting configuration) fails at once.
type ProvisionRetry struct {
	Log *slog.Logger
	// MaxWait bounds the total wait of one provisioning call (default 2 minutes).
	MaxWait time.Duration
	// Attempt bounds one attempt (default 10 s).
	Attempt time.Duration
	// Initial and Max shape the backoff between attempts (defaults 250 ms and 10 s).
	Initial, Max time.Duration
}

type provisionKey struct{}

// WithProvisionRetry makes the provisioning calls made with ctx follow r.
func WithProvisionRetry(ctx context.Context, r ProvisionRetry) context.Context {
	return context.WithValue(ctx, provisionKey{}, r)
}

func provisionRetryOf(ctx context.Context) ProvisionRetry {
	r, _ := ctx.Value(provisionKey{}).(ProvisionRetry)
	if r.Log == nil {
		r.Log = slog.Default()
	}
	if r.MaxWait <= 0 {
		r.MaxWait = 2 * time.Minute
	}
	if r.Attempt <= 0 {
		r.Attempt = 10 * time.Second
	}
	if r.Initial <= 0 {
		r.Initial = 250 * time.Millisecond
	}
	if r.Max <= 0 {
		r.Max = 10 * time.Second
	}
	return r
}

// Unavailable reports whether err says the cluster did not answer or could not serve the
// request yet (no responders, timeouts, no quorum or leader, no peers for placement, a
// creation race with another process), as opposed to a refusal that will not change.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoHeartbeat) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrDisconnected) {
		return true
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		_, ok := unavailableCodes[api.ErrorCode]
		return ok
	}
	return false
}

// unavailableCodes are the JetStream API errors of a cluster that cannot serve a request
// yet (the HTTP-like status is no guide: an invalid update is a 500 too).
var unavailableCodes = map[jetstream.ErrorCode]struct{}{
	10004: {}, // incomplete results
	10005: {}, // no suitable peers for placement: nodes still joining
	10007: {}, // JetStream cluster not assigned to this server
	10008: {}, // JetStream system temporarily unavailable
	10009: {}, // JetStream cluster can not handle request (no leader)
	10023: {}, // insufficient resources (peers not up)
	10075: {}, // peer remap failed
	10118: {}, // stream is offline
	10119: {}, // consumer is offline
	10194: {}, // stream is offline: reason
	10195: {}, // consumer is offline: reason
	10202: {}, // cluster member change in progress
	// Another process created it between our lookup and our create: look again (an update
	// then either succeeds or fails with the real reason).
	jetstream.JSErrCodeStreamNameInUse: {},
	jetstream.JSErrCodeConsumerExists:  {},
}

// Retry runs fn until it succeeds, fails with an error that is not Unavailable, or the
// wait is over, logging each failed attempt; what names the thing for the log and errors.
func Retry[T any](ctx context.Context, what string, fn func(ctx context.Context) (T, error)) (T, error) {
	r := provisionRetryOf(ctx)
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = r.Initial, r.Max
	attempt := 0
	start := time.Now()
	var last error
	res, err := backoff.Retry(ctx, func() (T, error) {
		attempt++
		actx, cancel := context.WithTimeout(ctx, r.Attempt)
		defer cancel()
		v, err := fn(actx)
		if err != nil && !Unavailable(err) {
			return v, backoff.Permanent(err)
		}
		last = err
		return v, err
	}, backoff.WithBackOff(b), backoff.WithMaxElapsedTime(r.MaxWait), backoff.WithNotify(func(err error, next time.Duration) {
		r.Log.Warn("NATS not answering yet; retrying", "what", what, "attempt", attempt, "retry_in", next.Round(time.Millisecond),
			"waited", time.Since(start).Round(time.Millisecond), "max_wait", r.MaxWait, "err", err)
	}))
	if err != nil && Unavailable(last) && errors.Is(err, last) {
		return res, fmt.Errorf("%s: NATS did not answer in %d attempts over %s: %w", what, attempt,
			time.Since(start).Round(time.Second), err)
	}
	if err != nil {
		return res, fmt.Errorf("%s: %w", what, err)
	}
	return res, nil
}
