package summarizer

import (
	"context"
	"errors"
	"fmt"
	"github.com/matememory/matememory/pkg/internal/fault"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/matememory/matememory/pkg/event"
)

// errBusUnavailable: the request could not even be sent (no NATS connection).
var errBusUnavailable = fault.New(fault.ErrUnavailable, "message bus unavailable")

// ErrUnreadableOutcome: the worker's reply is not an outcome.
var ErrUnreadableOutcome = errors.New("unreadable outcome from the worker")

// manualWait is how long a manual request waits for its outcome by default.
func (api API) manualWait() time.Duration {
	if api.ManualTimeout > 0 {
		return api.ManualTimeout
	}
	return 5 * time.Minute
}

// ManualOutcome is what a manual summarize request came to: the worker's outcome, or
// Pending when none arrived within the wait (NoWorker when no summarizer pulls at all).
type ManualOutcome struct {
	event.Outcome
	Pending  bool
	NoWorker bool
	Seq      uint64
}

// Summarize publishes a manual summarize request for one conversation of agentID and waits
// up to wait for the worker's outcome. It is the service behind the manual summarize route
// and the console's button; the caller has checked the agent's scope. A failed run is an
// outcome (Status failed), not an error: errors are the request's own (bad input, the bus).
func (api API) Summarize(ctx context.Context, agentID int64, conversationID string, force bool, wait time.Duration) (ManualOutcome, error) {
	if strings.TrimSpace(conversationID) == "" || len(conversationID) > event.MaxConversationIDBytes || !utf8.ValidString(conversationID) {
		return ManualOutcome{}, &event.InvalidError{Msg: fmt.Sprintf("conversationId must be 1 to %d bytes of UTF-8", event.MaxConversationIDBytes)}
	}
	inbox := nats.NewInbox()
	sub, err := api.NC.SubscribeSync(inbox)
	if err != nil {
		return ManualOutcome{}, fmt.Errorf("%w: %w", errBusUnavailable, err)
	}
	defer sub.Unsubscribe()
	// The request goes out on the publisher's connection and the worker answers on its own:
	// the subscription must be known to the server before the request can be answered.
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = api.NC.FlushWithContext(fctx)
	cancel()
	if err != nil {
		return ManualOutcome{}, fmt.Errorf("%w: %w", errBusUnavailable, err)
	}
	req := event.SummarizeRequest{AgentID: agentID, ConversationID: conversationID, ReplyTo: inbox, Force: force}
	ack, err := api.Publisher.PublishSummarize(ctx, &req)
	if err != nil {
		return ManualOutcome{}, err
	}
	if api.Metrics != nil {
		api.Metrics.Published.WithLabelValues("summarize", strconv.FormatBool(ack.Duplicate)).Inc()
	}
	if wait <= 0 {
		wait = api.manualWait()
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	out := ManualOutcome{Seq: ack.Seq}
	out.RequestID = req.RequestID
	got, idle, err := api.awaitOutcome(wctx, sub, agentID, req.RequestID)
	if idle || err != nil {
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		out.Pending, out.NoWorker = true, idle
		return out, nil
	}
	got.RequestID = req.RequestID
	out.Outcome = got
	return out, nil
}
