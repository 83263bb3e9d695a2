package summarizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/eventpub"
	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/panics"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/tracing"
)

// Worker feeds deliveries of the summarizer durable to Service.Handle and settles each
// one: ack, NAK with the delay the Result asks for, or dead letter then terminate.
//
// It uses nats.go's jetstream pull API directly rather than watermill's subscriber:
// watermill's Nack has no per-message delay (its NakDelay is computed from the delivery
// count only, and a cooldown deferral needs "until the cooldown ends"), its handler sees
// neither the delivery count nor the stream sequence (needed to dead-letter on the last
// delivery, with the original sequence in the headers), and it abandons a message whose
// handler outlives its AckWaitTimeout instead of sending progress acks. The verified
// pitfalls of DESIGN.md §8 map as follows: acks are always explicit (the durable has
// AckExplicit; nothing is acked on return), the durable is created at start-up and the
// worker only binds to it by name (a pull fetch never creates or deletes it), no stream is
// ever auto-provisioned, undecodable messages are dead-lettered on first sight, and the
// worker owns its connection.
type Worker struct {
	svc   *Service
	nc    *nats.Conn
	js    jetstream.JetStream
	cons  jetstream.Consumer
	log   *slog.Logger
	tr    tracing.Messaging
	guard *panics.Guard

	cancel context.CancelFunc
	wg     sync.WaitGroup
	adv    *nats.Subscription
	once   sync.Once

	// settled, set by tests and benchmarks, is called after a delivery was settled (acked,
	// NAKed or dead-lettered), which can be before the lease's release is done; finished is
	// called once the worker is done with the delivery.
	settled  func(msg jetstream.Msg, res Result)
	finished func(msg jetstream.Msg, res Result)
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
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	cons, err := js.Consumer(ctx, bus.StreamEvents, bus.ConsumerSummarizer)
	if err != nil {
		return nil, fmt.Errorf("bind to consumer %s on %s (is the pipeline provisioned?): %w", bus.ConsumerSummarizer, bus.StreamEvents, err)
	}
	w := &Worker{svc: svc, nc: nc, js: js, cons: cons, log: svc.d.Log}
	for _, o := range opts {
		o(w)
	}
	if w.guard == nil {
		w.guard = panics.New(w.log, nil)
	}
	return w, nil
}

// Start begins fetching with Settings.Concurrency deliveries in flight.
func (w *Worker) Start() error {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	// A message whose every delivery ended without a settlement (the worker died each time)
	// is skipped by the server after MaxDeliver; the advisory is the only trace of it.
	subj := fmt.Sprintf("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.%s.%s", bus.StreamEvents, bus.ConsumerSummarizer)
	adv, err := w.nc.QueueSubscribe(subj, "mate-summarizer-advisories", func(m *nats.Msg) {
		defer w.guard.Recover("summarizer.advisory", "subject", m.Subject)
		w.maxDeliveries(ctx, m)
	})
	if err != nil {
		cancel()
		return fmt.Errorf("subscribe to max-deliveries advisories: %w", err)
	}
	w.adv = adv
	if w.svc.set.SweepEvery > 0 {
		pub, err := eventpub.NewPublisher(w.nc, eventpub.WithSharedConn())
		if err != nil {
			_ = adv.Unsubscribe()
			cancel()
			return fmt.Errorf("publisher for the stranded sweep: %w", err)
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer w.guard.Recover("summarizer.sweep")
			w.svc.sweepLoop(ctx, func(ctx context.Context, r *event.SummarizeRequest) error {
				_, err := pub.PublishSummarize(ctx, r)
				return err
			})
		}()
	}
	for i := 0; i < w.svc.set.Concurrency; i++ {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.loop(ctx)
		}()
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
		w.wg.Wait()
		if w.adv != nil {
			_ = w.adv.Unsubscribe()
		}
		w.nc.Close()
	})
}

const fetchWait = 5 * time.Second

func (w *Worker) loop(ctx context.Context) {
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, fetchWait)
		batch, err := w.cons.Fetch(1, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			if ctx.Err() != nil {
				return
			}
			w.log.Warn("fetch from summarizer consumer", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		for msg := range batch.Messages() {
			w.process(ctx, msg)
		}
		cancel()
	}
}

// decode turns a delivery into a job, or says why it never can be.
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

func (w *Worker) process(ctx context.Context, msg jetstream.Msg) {
	m := w.svc.d.Metrics
	kind := kindOf(msg.Subject())
	ctx, span := w.tr.StartProcess(ctx, msg.Subject(), msg.Headers())
	defer span.End()
	md, err := msg.Metadata()
	if err != nil {
		w.log.Error("delivery without metadata", "subject", msg.Subject(), "err", err)
		span.SetStatus(codes.Error, "delivery without metadata")
		_ = msg.Term()
		return
	}
	span.SetAttributes(attribute.Int64("messaging.nats.delivery_count", int64(md.NumDelivered)))
	job, req, err := decode(msg)
	if err != nil {
		span.SetStatus(codes.Error, "poison message: "+err.Error())
		m.DeadLetters.WithLabelValues("invalid").Inc()
		w.deadLetter(ctx, msg, "poison message, never processable: "+err.Error(), kind)
		return
	}
	if ctx.Err() != nil {
		// The worker is stopping: a delivery that reached it now (a pull request still open)
		// is handed back at once, untouched and without a ledger row, for another worker.
		if err := msg.Nak(); err != nil {
			w.log.Warn("nak while stopping", "subject", msg.Subject(), "err", err)
		}
		return
	}
	job.Attempt = int(md.NumDelivered)
	maxDeliver := w.svc.set.MaxDeliver
	job.LastAttempt = maxDeliver > 0 && md.NumDelivered >= uint64(maxDeliver)

	hbCtx, stopHB := context.WithCancel(ctx)
	go heartbeat(hbCtx, msg, w.svc.set.AckWait)
	settled := false
	job.Settle = func(res Result) {
		stopHB()
		settled = true
		w.settle(ctx, msg, job, req, kind, res)
	}
	var res Result
	if perr := w.guard.Do("summarizer.handle", func() { res = w.svc.Handle(ctx, job) },
		"agent", job.AgentID, "subject", msg.Subject(), "attempt", job.Attempt); perr != nil {
		// A defect, not the message's fault as far as anyone knows: redelivered with backoff
		// like a transient failure (the lease was released by Handle's own defers), and
		// dead-lettered with the panic as its reason on the last delivery. Nothing is lost.
		res = transient("the worker failed on this delivery: "+perr.Error(), job.Attempt, w.svc)
		if job.LastAttempt {
			res = permanent("the worker failed on every delivery: " + perr.Error())
		}
	}
	stopHB()
	span.SetAttributes(attribute.Int64("matememory.agent_id", job.AgentID),
		attribute.String("matememory.run.status", res.Status), attribute.String("matememory.run.id", res.RunID))
	if res.Status == store.RunFailed {
		span.SetStatus(codes.Error, res.Reason)
	}
	if !settled {
		w.settle(ctx, msg, job, req, kind, res)
	}
	if w.finished != nil {
		w.finished(msg, res)
	}
}

// settle acknowledges, NAKs or dead-letters the delivery as res says, and answers a manual
// request's caller.
func (w *Worker) settle(ctx context.Context, msg jetstream.Msg, job Job, req *event.SummarizeRequest, kind string, res Result) {
	m := w.svc.d.Metrics
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	switch {
	case res.DeadLetter:
		cause := "permanent"
		if job.LastAttempt {
			cause = "exhausted"
		}
		m.DeadLetters.WithLabelValues(cause).Inc()
		w.deadLetter(ctx, msg, res.Reason, kind)
	case res.Retry:
		if err := msg.NakWithDelay(res.Delay); err != nil {
			w.log.Warn("nak", "subject", msg.Subject(), "err", err)
		}
		m.Events.WithLabelValues(kind, "nak").Inc()
	default:
		if err := msg.DoubleAck(sctx); err != nil {
			// Redelivered later and found covered: harmless.
			w.log.Warn("ack", "subject", msg.Subject(), "err", err)
		}
		m.Events.WithLabelValues(kind, "ack").Inc()
	}
	if w.settled != nil {
		w.settled(msg, res)
	}
	// A manual request's caller waits for the first outcome that is not a deferral; a job
	// interrupted by shutdown is taken over at once by another worker, which answers.
	if req != nil && req.ReplyTo != "" && ctx.Err() == nil && (res.Final() || res.DeadLetter || res.Status == store.RunFailed) {
		out := event.Outcome{RequestID: req.RequestID, Status: res.Status, Reason: res.Reason, RunID: res.RunID,
			Retrying: res.Retry && res.Status == store.RunFailed}
		data, _ := json.Marshal(out)
		if err := w.nc.Publish(req.ReplyTo, data); err != nil {
			w.log.Warn("reply to manual summarize", "request", req.RequestID, "err", err)
		}
	}
}

// deadLetter stores msg on MATE_DLQ, then terminates it. If the dead letter cannot be
// stored the message is NAKed instead: it is never dropped.
func (w *Worker) deadLetter(ctx context.Context, msg jetstream.Msg, reason, kind string) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := bus.DeadLetter(sctx, w.js, bus.LetterFrom(msg, reason)); err != nil {
		w.log.Error("dead-letter failed; will retry the message", "subject", msg.Subject(), "err", err)
		_ = msg.NakWithDelay(w.svc.backoff(1))
		w.svc.d.Metrics.Events.WithLabelValues(kind, "nak").Inc()
		return
	}
	w.log.Warn("dead-lettered", "subject", msg.Subject(), "reason", reason)
	if err := msg.TermWithReason(truncateRunes(reason, 200, "…")); err != nil {
		w.log.Warn("terminate dead-lettered message", "subject", msg.Subject(), "err", err)
	}
	w.svc.d.Metrics.Events.WithLabelValues(kind, "dead_letter").Inc()
}

// heartbeat tells JetStream the delivery is still being worked on, so AckWait bounds a
// stalled worker rather than a slow LLM call.
func heartbeat(ctx context.Context, msg jetstream.Msg, ackWait time.Duration) {
	every := ackWait / 3
	if every < 50*time.Millisecond {
		every = 50 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = msg.InProgress()
		}
	}
}

// maxDeliveries dead-letters a message the server gave up on without any worker settling
// it (the dead letter's Nats-Msg-Id makes this idempotent across workers).
func (w *Worker) maxDeliveries(ctx context.Context, m *nats.Msg) {
	var adv struct {
		Stream     string `json:"stream"`
		Consumer   string `json:"consumer"`
		StreamSeq  uint64 `json:"stream_seq"`
		Deliveries uint64 `json:"deliveries"`
	}
	if err := json.Unmarshal(m.Data, &adv); err != nil || adv.StreamSeq == 0 {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	s, err := w.js.Stream(sctx, bus.StreamEvents)
	if err != nil {
		w.log.Error("max deliveries: open stream", "err", err)
		return
	}
	raw, err := s.GetMsg(sctx, adv.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return
	}
	if err != nil {
		w.log.Error("max deliveries: read message", "seq", adv.StreamSeq, "err", err)
		return
	}
	reason := fmt.Sprintf("delivered %d times without being settled (each worker stopped or exceeded AckWait)", adv.Deliveries)
	if _, err := bus.DeadLetter(sctx, w.js, bus.Letter{Subject: raw.Subject, Data: raw.Data, Header: raw.Header, Reason: reason,
		Stream: bus.StreamEvents, Seq: adv.StreamSeq, Consumer: adv.Consumer, Deliveries: adv.Deliveries}); err != nil {
		w.log.Error("max deliveries: dead-letter", "seq", adv.StreamSeq, "err", err)
		return
	}
	w.svc.d.Metrics.DeadLetters.WithLabelValues("exhausted").Inc()
	w.log.Warn("dead-lettered after max deliveries", "seq", adv.StreamSeq, "deliveries", adv.Deliveries)
}
