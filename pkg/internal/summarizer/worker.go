package summarizer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/panics"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/tracing"
)

// Worker is the summarizer's handler on the message runtime (bus.Runtime): it feeds each
// delivery of the summarizer durable to Service.Handle and maps the Result to an outcome
// (ack, NAK with the delay the Result asks for, or dead letter), answers a manual request's
// caller, and runs the stranded sweep. The fetch loop, heartbeat, poison messages, panics,
// dead letters and the max-deliveries advisory are the runtime's.
type Worker struct {
	svc   *Service
	nc    *nats.Conn
	tr    tracing.Messaging
	guard *panics.Guard
	rt    *bus.Runtime[decoded]

	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	// settled, set by tests and benchmarks, is called after a delivery was settled (acked,
	// NAKed or dead-lettered), which can be before the lease's release is done; finished is
	// called once the worker is done with the delivery.
	settled  func(msg jetstream.Msg, res Result)
	finished func(msg jetstream.Msg, res Result)
}

// decoded is a delivery as a job: the job, and the request when it is a summarize request.
type decoded struct {
	job  Job
	req  *event.SummarizeRequest
	kind string
}

// WorkerOption configures a Worker.
type WorkerOption func(*Worker)

// WithTracing starts a consumer span per delivery with m, as a child of the span that
// published the message (its context travels in the message headers), so the extraction
// and its LLM call join the trace of the HTTP request that published the event.
func WithTracing(m tracing.Messaging) WorkerOption { return func(w *Worker) { w.tr = m } }

// WithGuard recovers, logs and counts a panic while a delivery is handled (the delivery is
// then retried like a transient failure); without it a guard logs to the worker's logger.
func WithGuard(g *panics.Guard) WorkerOption { return func(w *Worker) { w.guard = g } }

// NewWorker binds to the summarizer durable (Provision must have created it) over nc,
// which the worker owns and closes on Stop.
func NewWorker(ctx context.Context, svc *Service, nc *nats.Conn, opts ...WorkerOption) (*Worker, error) {
	w := &Worker{svc: svc, nc: nc}
	for _, o := range opts {
		o(w)
	}
	if w.guard == nil {
		w.guard = panics.New(svc.d.Log, nil)
	}
	m := svc.d.Metrics
	rt, err := bus.Bind(ctx, nc, bus.StreamEvents, bus.ConsumerSummarizer, bus.Handler[decoded]{
		Decode: decodeDelivery,
		Handle: w.handle,
		Where:  "summarizer.handle",
		Attrs:  func(d decoded) []any { return []any{"agent", d.job.AgentID} },
		Settled: func(d *bus.Delivery[decoded], o bus.Outcome, a bus.Action) {
			w.settle(d, o, a)
		},
		Finished: func(d *bus.Delivery[decoded], o bus.Outcome) {
			if w.finished != nil {
				w.finished(d.Msg, resultOf(o))
			}
		},
		DeadLettered: func(cause string) { m.DeadLetters.WithLabelValues(cause).Inc() },
	}, bus.WithLogger(svc.d.Log), bus.WithTracing(w.tr), bus.WithGuard(w.guard), bus.WithConcurrency(svc.set.Concurrency),
		bus.WithBackoff(svc.retryBackoff()), bus.WithMaxDeliver(svc.set.MaxDeliver), bus.WithAckWait(svc.set.AckWait))
	if err != nil {
		return nil, err
	}
	w.rt = rt
	return w, nil
}

// retryBackoff is the delay of a redelivery after a transient failure: BackoffBase doubling
// to BackoffMax, ±20 %.
func (s *Service) retryBackoff() bus.Backoff {
	return bus.Backoff{Initial: s.set.BackoffBase, Max: s.set.BackoffMax, Jitter: 0.2}
}

// Start begins fetching with Settings.Concurrency deliveries in flight, and the stranded
// sweep.
func (w *Worker) Start() error {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	if w.svc.set.SweepEvery > 0 {
		pub, err := bus.NewPublisher(w.nc, w.tr)
		if err != nil {
			cancel()
			return fmt.Errorf("publisher for the stranded sweep: %w", err)
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.svc.sweepLoop(ctx, w.guard, func(ctx context.Context, r *event.SummarizeRequest) error {
				_, err := pub.Events().PublishSummarize(ctx, r)
				return err
			})
		}()
	}
	if err := w.rt.Start(); err != nil {
		cancel()
		w.wg.Wait()
		return err
	}
	return nil
}

// Stop interrupts in-flight work (which is NAKed for another worker to take at once),
// waits for it, and closes the connection.
func (w *Worker) Stop() {
	w.once.Do(func() {
		if w.cancel != nil {
			w.cancel()
		}
		w.rt.Stop()
		w.wg.Wait()
		w.nc.Close()
	})
}

// decodeDelivery turns a delivery into a job, or says why it never can be (a poison message).
func decodeDelivery(msg jetstream.Msg) (decoded, error) {
	job, req, err := decode(msg)
	if err != nil {
		return decoded{}, fmt.Errorf("poison message, never processable: %w", err)
	}
	return decoded{job: job, req: req, kind: kindOf(msg.Subject())}, nil
}

// decode turns a message of MATE_EVENTS into a job (and the request, for a summarize
// request), or says why it never can be.
func decode(msg jetstream.Msg) (Job, *event.SummarizeRequest, error) {
	switch subj := msg.Subject(); {
	case strings.HasPrefix(subj, bus.SubjectCompleted+"."):
		e, err := event.DecodeCompletedMsg(msg.Data(), msg.Headers())
		if err != nil {
			return Job{}, nil, err
		}
		if subj != e.Subject() {
			return Job{}, nil, fmt.Errorf("event for agent %d arrived on %s", e.AgentID, subj)
		}
		return JobFromEvent(e), nil, nil
	case strings.HasPrefix(subj, bus.SubjectSummarize+"."):
		r, err := event.DecodeSummarize(msg.Data())
		if err != nil {
			return Job{}, nil, err
		}
		if subj != event.SummarizeSubject(r.AgentID) {
			return Job{}, nil, fmt.Errorf("request for agent %d arrived on %s", r.AgentID, subj)
		}
		return JobFromRequest(r), r, nil
	default:
		return Job{}, nil, fmt.Errorf("unexpected subject %s", subj)
	}
}

func kindOf(subject string) string {
	switch {
	case strings.HasPrefix(subject, bus.SubjectCompleted+"."):
		return "completed"
	case strings.HasPrefix(subject, bus.SubjectSummarize+"."):
		return "summarize"
	}
	return "other"
}

// handle runs the job of one delivery. Service.Handle may settle it early (Job.Settle), so
// that the ack and the lease's release overlap.
func (w *Worker) handle(ctx context.Context, d *bus.Delivery[decoded]) bus.Outcome {
	job := d.Value.job
	job.Attempt = d.Attempt
	job.LastAttempt = d.LastAttempt
	job.Settle = func(res Result) { d.Settle(outcomeOf(res)) }
	res := w.svc.Handle(ctx, job)
	d.Span.SetAttributes(attribute.Int64("matememory.agent_id", job.AgentID),
		attribute.String("matememory.run.status", res.Status), attribute.String("matememory.run.id", res.RunID))
	if res.Status == store.RunFailed {
		d.Span.SetStatus(codes.Error, res.Reason)
	}
	return outcomeOf(res)
}

// outcomeOf maps a Result to the runtime's outcome.
func outcomeOf(res Result) bus.Outcome {
	var o bus.Outcome
	switch {
	case res.DeadLetter:
		o = bus.Reject(res.Reason)
	case res.Retry:
		o = bus.RetryAfter(res.Delay, res.Reason)
	default:
		o = bus.Done()
	}
	return o.WithDetail(res)
}

// resultOf is the Result an outcome carries, or the one the runtime decided without the
// handler (a panic: retried or, on the last delivery, dead-lettered).
func resultOf(o bus.Outcome) Result {
	if res, ok := o.Detail.(Result); ok {
		return res
	}
	return Result{Status: store.RunFailed, Reason: o.Reason, Retry: o.IsRetry(), Delay: o.Delay, DeadLetter: o.IsDeadLetter()}
}

// settle counts what the runtime did with a delivery and answers a manual request's caller.
func (w *Worker) settle(d *bus.Delivery[decoded], o bus.Outcome, a bus.Action) {
	w.svc.d.Metrics.Events.WithLabelValues(kindOf(d.Msg.Subject()), string(a)).Inc()
	if o.Cause == bus.CauseInvalid {
		return
	}
	res := resultOf(o)
	if w.settled != nil {
		w.settled(d.Msg, res)
	}
	// A manual request's caller waits for the first outcome that is not a deferral; a job
	// interrupted by shutdown is taken over at once by another worker, which answers.
	req := d.Value.req
	if req != nil && req.ReplyTo != "" && !d.Stopping() && (res.Final() || res.DeadLetter || res.Status == store.RunFailed) {
		out := event.Outcome{RequestID: req.RequestID, Status: res.Status, Reason: res.Reason, RunID: res.RunID,
			Retrying: res.Retry && res.Status == store.RunFailed}
		data, _ := json.Marshal(out)
		if err := w.nc.Publish(req.ReplyTo, data); err != nil {
			w.svc.d.Log.Warn("reply to manual summarize", "request", req.RequestID, "err", err)
		}
	}
}
