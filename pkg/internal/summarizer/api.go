package summarizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/eventpub"
	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/fault"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/store"
)

// API is the pipeline's service behind its HTTP routes (pkg/internal/rest): the event
// intake, the manual summarize, the run ledger, the pending view.
type API struct {
	Publisher *eventpub.Publisher
	Ledger    *ledger.Ledger
	// JS reads the summarizer consumer's state while a manual summarize waits.
	JS jetstream.JetStream
	// NC receives manual summarize outcomes on an inbox.
	NC *nats.Conn
	// ManualTimeout bounds the wait for a manual summarize outcome.
	ManualTimeout time.Duration
	Metrics       *Metrics
	// Pending reads an agent's pending work (GET /api/v1/agents/{agentId}/pending).
	Pending *PendingReader
	// DB, when set, is read for the agents' erasure tombstones: an event that happened before
	// its agent was erased is refused at intake, so it is never stored on the stream.
	DB *gorm.DB
}

// ManualWait is how long a manual summarize waits for its outcome unless the caller says
// otherwise.
func (api API) ManualWait() time.Duration { return api.manualWait() }

// PublishCompleted completes and validates e, checks with authorize that the caller may
// publish for its agent, and stores it on JetStream: the API's event intake. The order is
// the answer's: an invalid event is refused as such (*event.InvalidError) whoever sends it,
// then the caller's scope, then an event that occurred before its agent was erased
// (fault.ErrErased), which is never stored. The event is validated once, by the publisher.
func (api API) PublishCompleted(ctx context.Context, e *event.ConversationCompletedEvent, authorize func(ctx context.Context, agentID int64) error) (event.Ack, error) {
	ack, err := api.Publisher.PublishCompleted(ctx, e, eventpub.WithCheck(func(ctx context.Context, e *event.ConversationCompletedEvent) error {
		if err := authorize(ctx, e.AgentID); err != nil {
			return err
		}
		return api.notErased(ctx, e)
	}))
	if err != nil {
		return event.Ack{}, PublishError(err)
	}
	api.metrics().Published.WithLabelValues("completed", strconv.FormatBool(ack.Duplicate)).Inc()
	return ack, nil
}

// notErased refuses an event that occurred before its agent was erased.
func (api API) notErased(ctx context.Context, e *event.ConversationCompletedEvent) error {
	if api.DB == nil {
		return nil
	}
	if err := store.CheckNotErasedSince(ctx, api.DB, e.AgentID, e.OccurredAt); errors.Is(err, store.ErrErased) {
		return fault.Wrap(fault.ErrErased, err, fmt.Sprintf("agent %d was erased after this event occurred (%s); events from before an erasure are refused, send events that occur after it",
			e.AgentID, e.OccurredAt.UTC().Format(time.RFC3339)))
	} else if err != nil {
		return err
	}
	return nil
}

func (api API) metrics() *Metrics {
	if api.Metrics == nil {
		return NewMetrics(nil)
	}
	return api.Metrics
}

// PublishError says what a failed publish means for the caller: an event over the size
// limit (fault.ErrTooLarge), JetStream unavailable (fault.ErrUnavailable: retry with the
// same event id).
func PublishError(err error) error {
	switch {
	case errors.Is(err, eventpub.ErrTooLarge):
		return fault.Wrap(fault.ErrTooLarge, err, err.Error()+"; send fewer inline messages")
	case errors.Is(err, eventpub.ErrUnavailable):
		return fault.Wrap(fault.ErrUnavailable, err,
			"the event was not stored: JetStream is unavailable ("+err.Error()+"); retry with the same eventId, duplicates are discarded")
	}
	return err
}

// Without a summarizer worker (an api process alone against an external NATS) a manual
// summarize would wait its whole timeout for nothing. While it waits, the consumer is
// checked every idleCheckEvery: idleChecks checks in a row with no pull request waiting and
// nothing in progress mean no worker is running, and the caller is told so at once.
var (
	idleCheckEvery = time.Second
	idleChecks     = 3
)

// awaitOutcome waits for the worker's answer to request requestID on sub; idle reports
// that no worker pulls from the consumer. The answer is a plain NATS message, which is lost
// when it crosses a cluster before the subscription's interest did, or while a connection
// reconnects: the run ledger, which holds the outcome before it is sent, is read at each
// check, so a lost answer costs a second at most.
func (api API) awaitOutcome(ctx context.Context, sub *nats.Subscription, agentID int64, requestID string) (out event.Outcome, idle bool, err error) {
	misses := 0
	for {
		wctx, cancel := context.WithTimeout(ctx, idleCheckEvery)
		msg, err := sub.NextMsgWithContext(wctx)
		cancel()
		if err == nil {
			if err := json.Unmarshal(msg.Data, &out); err != nil {
				return out, false, fmt.Errorf("%w: %w", ErrUnreadableOutcome, err)
			}
			return out, false, nil
		}
		if ctx.Err() != nil {
			return out, false, ctx.Err()
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			return out, false, err // the subscription's own failure (a closed connection)
		}
		if o, ok := api.recordedOutcome(ctx, agentID, requestID); ok {
			return o, false, nil
		}
		if api.JS == nil {
			continue
		}
		cons, cerr := api.JS.Consumer(ctx, bus.StreamEvents, bus.ConsumerSummarizer)
		if cerr != nil {
			misses = 0
			continue
		}
		info, cerr := cons.Info(ctx)
		if cerr == nil && info.NumWaiting == 0 && info.NumAckPending == 0 {
			misses++
		} else {
			misses = 0
		}
		if misses >= idleChecks {
			return out, true, nil
		}
	}
}

// recordedOutcome is the outcome of request requestID as the run ledger has it: the newest
// run recorded under its id that a caller is answered with (a deferral is not an outcome).
func (api API) recordedOutcome(ctx context.Context, agentID int64, requestID string) (event.Outcome, bool) {
	if api.Ledger == nil {
		return event.Outcome{}, false
	}
	runs, err := api.Ledger.List(ctx, ledger.Filter{AgentID: agentID, Kind: ledger.KindSummarize, EventID: requestID, Limit: 1})
	if err != nil || len(runs) == 0 || runs[0].Status == store.RunDeferred {
		return event.Outcome{}, false
	}
	r := runs[0]
	return event.Outcome{Status: string(r.Status), Reason: r.Reason, RunID: r.RunID,
		Retrying: r.Status == store.RunFailed && !strings.Contains(r.Reason, "dead-lettered")}, true
}
