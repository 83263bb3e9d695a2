package emergence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/matememory/matememory/pkg/internal/fault"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/singleflight"

	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/tracing"
)

// Trigger is the manual trigger: it puts a request on MATE_EMERGENCE, so it goes through
// the same worker path as a cron slot (the same lease, guard and ledger), and waits for the
// worker's outcome on a request/reply inbox.
type Trigger struct {
	js      jetstream.JetStream
	nc      *nats.Conn
	timeout time.Duration
	now     func() time.Time
	publish []tracing.PublishOption
	// limit, when set, holds one key per agent for the cooldown between manual requests
	// (a bucket whose TTL is the cooldown; shared by every API replica).
	limit jetstream.KeyValue
	// flight coalesces concurrent requests for one agent in this process.
	flight singleflight.Group
	// runs, when set, is read while the outcome is awaited, in case the answer is lost.
	runs *ledger.Ledger
}

// WithLedger makes the trigger read the run ledger once a second while it waits: the
// worker's answer is a core NATS message, lost when it crosses a cluster before the
// caller's interest did or while a connection reconnects, and the run's row is committed
// before the answer is sent.
func (t *Trigger) WithLedger(l *ledger.Ledger) *Trigger { t.runs = l; return t }

// WithRateLimit makes the trigger accept one manual request per agent per the bucket's TTL
// (ManualLimitBucket); concurrent requests for the agent share one run, later ones within
// the TTL get 429 with Retry-After.
func (t *Trigger) WithRateLimit(kv jetstream.KeyValue) *Trigger { t.limit = kv; return t }

// ManualLimitBucket is the KV bucket of the manual trigger's per-agent cooldown.
func ManualLimitBucket(replicas int, cooldown time.Duration) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: bus.BucketManualEmergence,
		Description: "MateMemory: the last manual emergence request per agent (the TTL is the per-agent cooldown)",
		TTL:         cooldown, History: 1, Storage: jetstream.FileStorage, Replicas: max(replicas, 1)}
}

// Wait is how long a request waits for the outcome unless the caller says otherwise.
func (t *Trigger) Wait() time.Duration { return t.timeout }

// DefaultWait is how long the manual trigger waits for the outcome by default.
const DefaultWait = 150 * time.Second

// NewTrigger builds the manual trigger; wait is how long a request waits for the outcome
// (DefaultWait when 0). js must be on nc. opts apply to each request's publish
// (tracing.With for a producer span).
func NewTrigger(js jetstream.JetStream, wait time.Duration, opts ...tracing.PublishOption) *Trigger {
	if wait <= 0 {
		wait = DefaultWait
	}
	return &Trigger{js: js, nc: js.Conn(), timeout: wait, now: time.Now, publish: opts}
}

// Result is the manual trigger's answer.
type Result struct {
	// Status is completed, skipped (refused rewrites included, with the reason), or pending
	// when the wait ran out before the worker finished.
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// RunStatus is the ledger status (completed, skipped, refused).
	RunStatus string `json:"runStatus,omitempty"`
	RunID     string `json:"runId,omitempty"`
	RequestID string `json:"requestId"`
}

// ErrFailed is matched by the manual trigger's failure (HTTP 500 "记忆整合失败: ...").
var ErrFailed = errors.New("emergence failed")

// Run publishes a manual request for agentID and waits up to wait for the first final
// outcome. A failed attempt returns an error wrapping ErrFailed, whose text is the spec's
// "记忆整合失败: <reason>".
func (t *Trigger) Run(ctx context.Context, agentID int64, wait time.Duration) (Result, error) {
	v, err, _ := t.flight.Do(strconv.FormatInt(agentID, 10), func() (any, error) {
		// Shared by every waiter: one caller hanging up does not cancel the others' run.
		return t.run(context.WithoutCancel(ctx), agentID, wait)
	})
	res, _ := v.(Result)
	return res, err
}

func (t *Trigger) run(ctx context.Context, agentID int64, wait time.Duration) (Result, error) {
	if wait <= 0 {
		wait = t.timeout
	}
	req := Request{RequestID: "manual:" + uuid.NewString(), AgentID: agentID, Source: SourceManual,
		ReplyTo: t.nc.NewRespInbox(), CreatedAt: t.now().UTC()}
	res := Result{RequestID: req.RequestID}
	if err := t.admit(ctx, agentID, req.RequestID); err != nil {
		return Result{}, err
	}
	// Subscribe before publishing, so the outcome cannot arrive unheard.
	sub, err := t.nc.SubscribeSync(req.ReplyTo)
	if err != nil {
		return res, failedf("subscribe for the outcome: %v", err)
	}
	defer sub.Unsubscribe()
	if _, err := Publish(ctx, t.js, req, t.publish...); err != nil {
		return res, failedf("%v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	out, err := t.await(wctx, sub, agentID, req.RequestID)
	if err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		if wctx.Err() == nil {
			return res, err
		}
		res.Status = "pending"
		res.Reason = fmt.Sprintf("no outcome after %s: the request is queued or running (waiting for the agent's lease, a worker or the model); it will still run, and its outcome will be in the run ledger under event id %s", wait, req.RequestID)
		return res, nil
	}
	res.RunID, res.RunStatus, res.Reason = out.RunID, out.Status, out.Reason
	switch out.Status {
	case store.RunCompleted:
		res.Status = store.RunCompleted
	case store.RunSkipped:
		res.Status = store.RunSkipped
	case store.RunRefused:
		res.Status, res.Reason = store.RunSkipped, "refused: "+out.Reason
	default:
		reason := out.Reason
		if out.Retrying {
			reason += " (the request will be retried; see the run ledger under event id " + req.RequestID + ")"
		}
		return res, failedf("%s", reason)
	}
	return res, nil
}

// ledgerCheckEvery is how often a waiting manual request reads the run ledger.
var ledgerCheckEvery = time.Second

// await waits for the worker's answer to request requestID on sub, or for its run in the
// ledger (WithLedger). The ledger's row does not say whether a failure is retried.
func (t *Trigger) await(ctx context.Context, sub *nats.Subscription, agentID int64, requestID string) (Outcome, error) {
	for {
		wait, cancel := context.WithTimeout(ctx, ledgerCheckEvery)
		m, err := sub.NextMsgWithContext(wait)
		cancel()
		if err == nil {
			var out Outcome
			if err := json.Unmarshal(m.Data, &out); err != nil {
				return Outcome{}, failedf("unreadable outcome: %v", err)
			}
			return out, nil
		}
		if ctx.Err() != nil {
			return Outcome{}, ctx.Err()
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			return Outcome{}, err // the subscription's own failure (a closed connection)
		}
		if t.runs == nil {
			continue
		}
		runs, lerr := t.runs.List(ctx, ledger.Filter{AgentID: agentID, Kind: ledger.KindEmergence, EventID: requestID, Limit: 1})
		if lerr == nil && len(runs) > 0 && runs[0].Status != store.RunDeferred {
			r := runs[0]
			return Outcome{RequestID: requestID, RunID: r.RunID, Status: string(r.Status), Reason: r.Reason}, nil
		}
	}
}

// admit takes the agent's manual-request slot for the cooldown, or refuses with a
// *fault.Limited naming the request that holds it and when the next one is accepted.
func (t *Trigger) admit(ctx context.Context, agentID int64, requestID string) error {
	if t.limit == nil {
		return nil
	}
	key := strconv.FormatInt(agentID, 10)
	_, err := t.limit.Create(ctx, key, []byte(requestID))
	if err == nil {
		return nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return failedf("rate limit of agent %d: %v", agentID, err)
	}
	ttl := time.Minute
	if st, serr := t.limit.Status(ctx); serr == nil && st.TTL() > 0 {
		ttl = st.TTL()
	}
	retry := ttl
	prev := "another request"
	if e, gerr := t.limit.Get(ctx, key); gerr == nil {
		prev = "request " + string(e.Value())
		retry = ttl - t.now().Sub(e.Created())
	}
	secs := max(int(retry.Seconds()+0.999), 1)
	return &fault.Limited{RetryAfter: time.Duration(secs) * time.Second,
		Msg: fmt.Sprintf("a manual emergence for agent %d ran less than %s ago (%s; its outcome is in the run ledger under that event id); try again in %d s", agentID, ttl, prev, secs)}
}

// failedError is the spec's failure: its text is "记忆整合失败: <reason>" (an HTTP 500, as
// every error of no fault kind).
type failedError struct{ msg string }

func failedf(format string, args ...any) error {
	return &failedError{msg: "记忆整合失败: " + fmt.Sprintf(format, args...)}
}

func (e *failedError) Error() string        { return e.msg }
func (e *failedError) Is(target error) bool { return target == ErrFailed }
