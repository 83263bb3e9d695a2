package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/matememory/matememory/pkg/internal/panics"
	"github.com/matememory/matememory/pkg/internal/tracing"
)

// The message runtime: every worker of MateMemory (summarizer, emergence, recall indexer) is a
// Handler on it. It uses nats.go's jetstream pull API directly rather than watermill's
// subscriber: watermill's Nack has no per-message delay (a cooldown deferral needs "until the
// cooldown ends"), its handler sees neither the delivery count nor the stream sequence (needed
// to dead-letter on the last delivery, with the original sequence in the headers), and it
// abandons a message whose handler outlives its AckWaitTimeout instead of sending progress
// acks. The verified pitfalls of DESIGN.md §8 map as follows: acks are always explicit (the
// durable has AckExplicit; nothing is acked on return), the durable is created at start-up by
// provisioning and the runtime only binds to it by name (a pull fetch never creates or
// deletes it), no stream is ever auto-provisioned, undecodable messages are dead-lettered on
// first sight, and a dead letter is stored before the original is terminated.

// Handler is what a worker plugs into the Runtime.
type Handler[T any] struct {
	// Decode turns a delivery into a T; an error makes it a poison message, dead-lettered at
	// first sight with the error as reason.
	Decode func(msg jetstream.Msg) (T, error)
	// Handle handles one delivery. Exactly one of Handle and HandleBatch is set.
	Handle func(ctx context.Context, d *Delivery[T]) Outcome
	// Key and HandleBatch handle deliveries with the same key one batch at a time: those that
	// arrive while the key's batch is being handled wait and form its next batch.
	// HandleBatch returns one outcome per delivery, in order.
	Key         func(v T) string
	HandleBatch func(ctx context.Context, batch []*Delivery[T]) []Outcome
	// Where labels recovered panics (panics.Guard), e.g. "summarizer.handle"; Attrs adds what
	// a panic's log line says about the message.
	Where string
	Attrs func(v T) []any
	// Settled, when set, is called once a delivery was settled, with the outcome and what was
	// done (a dead letter that could not be stored is NAKed); for a poison message too, with
	// Cause CauseInvalid and a zero Value.
	Settled func(d *Delivery[T], o Outcome, a Action)
	// Finished, when set, is called once the handler returned (the outcome it returned).
	Finished func(d *Delivery[T], o Outcome)
	// DeadLettered, when set, is called with the cause of each dead letter the runtime is
	// about to store for a delivery, and after each one stored for the max-deliveries
	// advisory.
	DeadLettered func(cause string)
}

// Delivery is one delivery of a message to a handler.
type Delivery[T any] struct {
	Msg   jetstream.Msg
	Value T
	// Attempt is the delivery number (1 for the first); LastAttempt is true when no
	// redelivery will follow (MaxDeliver reached).
	Attempt     int
	LastAttempt bool
	// Span is the delivery's consumer span (handlers add their attributes).
	Span trace.Span

	rt      *Runtime[T]
	ctx     context.Context
	stopHB  context.CancelFunc
	settled bool
}

// Settle settles the delivery now, before the handler returns (the summarizer acknowledges
// while it releases the agent's lease). The outcome the handler then returns is not
// settled again; it goes to the Finished hook.
func (d *Delivery[T]) Settle(o Outcome) {
	if !d.settled {
		d.rt.settle(d, o)
	}
}

// Stopping reports whether the runtime is stopping (the delivery is handed back for another
// worker).
func (d *Delivery[T]) Stopping() bool { return d.rt.ctx.Err() != nil }

// Option configures a Runtime.
type Option func(*runtimeSettings)

type runtimeSettings struct {
	log         *slog.Logger
	tr          tracing.Messaging
	guard       *panics.Guard
	concurrency int
	backoff     Backoff
	maxDeliver  int
	ackWait     time.Duration
	advisory    bool
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *runtimeSettings) { s.log = l } }

// WithTracing starts a consumer span per delivery with m, as a child of the span that
// published the message (its context travels in the message headers).
func WithTracing(m tracing.Messaging) Option { return func(s *runtimeSettings) { s.tr = m } }

// WithGuard recovers, logs and counts a panic while a delivery is handled (default: a guard
// logging to the runtime's logger).
func WithGuard(g *panics.Guard) Option { return func(s *runtimeSettings) { s.guard = g } }

// WithConcurrency is how many deliveries are handled at once (default 1).
func WithConcurrency(n int) Option { return func(s *runtimeSettings) { s.concurrency = n } }

// WithBackoff is the delay of a redelivery after a panic, and after a dead letter that could
// not be stored (Delay(1)).
func WithBackoff(b Backoff) Option { return func(s *runtimeSettings) { s.backoff = b } }

// WithMaxDeliver and WithAckWait override the consumer's own MaxDeliver (which decides
// Delivery.LastAttempt) and AckWait (the heartbeat runs every AckWait/3).
func WithMaxDeliver(n int) Option { return func(s *runtimeSettings) { s.maxDeliver = n } }

// WithAckWait: see WithMaxDeliver.
func WithAckWait(d time.Duration) Option { return func(s *runtimeSettings) { s.ackWait = d } }

// WithoutAdvisory does not dead-letter the messages the server gave up on after MaxDeliver
// deliveries nobody settled (for a consumer with another backstop: the recall reconciler).
func WithoutAdvisory() Option { return func(s *runtimeSettings) { s.advisory = false } }

// Runtime consumes one durable consumer with a Handler: fetch loop, heartbeat, poison
// messages, panics, dead letters, the max-deliveries advisory, tracing, and a Stop that
// hands in-flight deliveries back.
type Runtime[T any] struct {
	h       Handler[T]
	set     runtimeSettings
	nc      *nats.Conn
	js      jetstream.JetStream
	cons    jetstream.Consumer
	stream  string
	durable string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	adv    *nats.Subscription
	once   sync.Once

	mu      sync.Mutex
	waiting map[string][]*Delivery[T] // Key → deliveries not yet taken by the key's batch
}

// Bind binds to the durable consumer on stream (provisioning must have created it; Bind
// never creates one) over nc.
func Bind[T any](ctx context.Context, nc *nats.Conn, stream, durable string, h Handler[T], opts ...Option) (*Runtime[T], error) {
	if (h.Handle == nil) == (h.HandleBatch == nil) || (h.HandleBatch != nil && h.Key == nil) || h.Decode == nil {
		return nil, fmt.Errorf("consumer %s: a handler needs Decode and either Handle or Key with HandleBatch", durable)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	cons, err := js.Consumer(ctx, stream, durable)
	if err != nil {
		return nil, fmt.Errorf("bind to consumer %s on %s (is the pipeline provisioned?): %w", durable, stream, err)
	}
	set := runtimeSettings{log: slog.Default(), concurrency: 1, advisory: true, backoff: Backoff{Initial: time.Second, Max: time.Minute}}
	if info := cons.CachedInfo(); info != nil {
		set.maxDeliver, set.ackWait = info.Config.MaxDeliver, info.Config.AckWait
	}
	for _, o := range opts {
		o(&set)
	}
	if set.guard == nil {
		set.guard = panics.New(set.log, nil)
	}
	r := &Runtime[T]{h: h, set: set, nc: nc, js: js, cons: cons, stream: stream, durable: durable,
		waiting: map[string][]*Delivery[T]{}}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// Start subscribes to the max-deliveries advisory and starts the fetch loops.
func (r *Runtime[T]) Start() error {
	if r.set.advisory {
		// A message whose every delivery ended without a settlement (the worker died each
		// time) is skipped by the server after MaxDeliver; the advisory is the only trace of it.
		subj := fmt.Sprintf("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.%s.%s", r.stream, r.durable)
		adv, err := r.nc.QueueSubscribe(subj, "mate-"+r.durable+"-advisories", func(m *nats.Msg) {
			defer r.set.guard.Recover(r.durable+".advisory", "subject", m.Subject)
			r.maxDeliveries(m)
		})
		if err != nil {
			return fmt.Errorf("subscribe to max-deliveries advisories of %s: %w", r.durable, err)
		}
		r.adv = adv
	}
	for i := 0; i < max(r.set.concurrency, 1); i++ {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.loop()
		}()
	}
	return nil
}

// Stop interrupts in-flight work (its context is cancelled; what it hands back is NAKed
// without delay, for another worker to take at once) and waits for it. The connection is
// the caller's.
func (r *Runtime[T]) Stop() {
	r.once.Do(func() {
		r.cancel()
		r.wg.Wait()
		if r.adv != nil {
			_ = r.adv.Unsubscribe()
		}
	})
}

const fetchWait = 5 * time.Second

func (r *Runtime[T]) loop() {
	ctx := r.ctx
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, fetchWait)
		batch, err := r.cons.Fetch(1, jetstream.FetchContext(fctx))
		if err != nil {
			cancel()
			if ctx.Err() != nil {
				return
			}
			r.set.log.Warn("fetch from "+r.durable+" consumer", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		for msg := range batch.Messages() {
			r.receive(msg)
		}
		cancel()
	}
}

// receive opens a delivery and hands it to the handler (or to its key's batch).
func (r *Runtime[T]) receive(msg jetstream.Msg) {
	d, ok := r.open(msg)
	if !ok {
		return
	}
	if r.h.Key == nil {
		r.run([]*Delivery[T]{d})
		return
	}
	k := r.h.Key(d.Value)
	r.mu.Lock()
	q, running := r.waiting[k]
	r.waiting[k] = append(q, d)
	r.mu.Unlock()
	if running {
		return // the key's batch takes it in its next round
	}
	for {
		r.mu.Lock()
		batch := r.waiting[k]
		if len(batch) == 0 {
			delete(r.waiting, k)
			r.mu.Unlock()
			return
		}
		r.waiting[k] = batch[:0:0]
		r.mu.Unlock()
		r.run(batch)
	}
}

// open reads the delivery's metadata, starts its span and decodes it; a poison message is
// dead-lettered here, a delivery that reaches a stopping runtime is handed back untouched.
func (r *Runtime[T]) open(msg jetstream.Msg) (*Delivery[T], bool) {
	ctx, span := r.set.tr.StartProcess(r.ctx, msg.Subject(), msg.Headers())
	md, err := msg.Metadata()
	if err != nil {
		r.set.log.Error("delivery without metadata", "consumer", r.durable, "subject", msg.Subject(), "err", err)
		span.SetStatus(codes.Error, "delivery without metadata")
		_ = msg.Term()
		span.End()
		return nil, false
	}
	span.SetAttributes(attribute.Int64("messaging.nats.delivery_count", int64(md.NumDelivered)))
	d := &Delivery[T]{Msg: msg, Attempt: int(md.NumDelivered), Span: span, rt: r, ctx: ctx,
		LastAttempt: r.set.maxDeliver > 0 && md.NumDelivered >= uint64(r.set.maxDeliver)}
	v, err := r.h.Decode(msg)
	if err != nil {
		span.SetStatus(codes.Error, "poison message: "+err.Error())
		d.stopHB = func() {}
		o := Reject(err.Error())
		o.Cause = CauseInvalid
		r.settle(d, o)
		span.End()
		return nil, false
	}
	d.Value = v
	if ctx.Err() != nil {
		// Stopping: a delivery that reached us now (a pull request still open) is handed
		// back at once, untouched, for another worker.
		if err := msg.Nak(); err != nil {
			r.set.log.Warn("nak while stopping", "consumer", r.durable, "subject", msg.Subject(), "err", err)
		}
		span.End()
		return nil, false
	}
	hbCtx, stop := context.WithCancel(ctx)
	d.stopHB = stop
	go heartbeat(hbCtx, msg, r.set.ackWait)
	return d, true
}

// run hands a batch (one delivery unless the handler is keyed) to the handler under the
// panic guard, settles what the handler did not settle itself, and ends the spans.
func (r *Runtime[T]) run(batch []*Delivery[T]) {
	outs := make([]Outcome, len(batch))
	first := batch[0]
	var attrs []any
	if r.h.Attrs != nil {
		attrs = r.h.Attrs(first.Value)
	}
	attrs = append(attrs, "subject", first.Msg.Subject(), "attempt", first.Attempt)
	var perr error
	if r.ctx.Err() != nil {
		for i := range outs {
			outs[i] = RetryAfter(0, "the worker is stopping")
		}
	} else {
		perr = r.set.guard.Do(r.h.Where, func() {
			if r.h.Handle != nil {
				outs[0] = r.h.Handle(first.ctx, first)
			} else if got := r.h.HandleBatch(first.ctx, batch); len(got) == len(batch) {
				copy(outs, got)
			} else {
				panic(fmt.Sprintf("%s: %d outcomes for a batch of %d deliveries", r.durable, len(got), len(batch)))
			}
		}, attrs...)
	}
	for i, d := range batch {
		if perr != nil {
			// A defect, not the message's fault as far as anyone knows: redelivered with
			// backoff like a transient failure, dead-lettered with the panic as its reason on
			// the last delivery. Nothing is lost.
			outs[i] = RetryAfter(r.set.backoff.Delay(d.Attempt), "the worker failed on this delivery: "+perr.Error())
			if d.LastAttempt {
				outs[i] = Reject("the worker failed on every delivery: " + perr.Error())
			}
		}
		d.stopHB()
		if !d.settled {
			r.settle(d, outs[i])
		}
		if r.h.Finished != nil {
			r.h.Finished(d, outs[i])
		}
		d.Span.End()
	}
}

// settle is the one mapping of an outcome to JetStream: ack, NAK with the delay, or dead
// letter then terminate.
func (r *Runtime[T]) settle(d *Delivery[T], o Outcome) {
	d.settled = true
	d.stopHB()
	msg := d.Msg
	sctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), 10*time.Second)
	defer cancel()
	var act Action
	switch {
	case o.IsDeadLetter():
		if o.Cause == "" {
			o.Cause = CausePermanent
			if d.LastAttempt {
				o.Cause = CauseExhausted
			}
		}
		d.Span.SetStatus(codes.Error, o.Reason)
		if r.h.DeadLettered != nil {
			r.h.DeadLettered(o.Cause)
		}
		act = r.deadLetter(sctx, msg, o.Reason)
	case o.IsRetry():
		delay := o.Delay
		if r.ctx.Err() != nil {
			delay = 0 // stopping: another worker takes it now rather than after a backoff
		}
		if err := msg.NakWithDelay(delay); err != nil {
			r.set.log.Warn("nak", "consumer", r.durable, "subject", msg.Subject(), "err", err)
		}
		act = ActionNak
	default:
		if err := msg.DoubleAck(sctx); err != nil {
			// Redelivered later and found done: harmless.
			r.set.log.Warn("ack", "consumer", r.durable, "subject", msg.Subject(), "err", err)
		}
		act = ActionAck
	}
	if r.h.Settled != nil {
		r.h.Settled(d, o, act)
	}
}

// deadLetter stores msg on MATE_DLQ, then terminates it. If the dead letter cannot be
// stored the message is NAKed instead: it is never dropped.
func (r *Runtime[T]) deadLetter(ctx context.Context, msg jetstream.Msg, reason string) Action {
	if _, err := DeadLetter(ctx, r.js, LetterFrom(msg, reason)); err != nil {
		r.set.log.Error("dead-letter failed; will retry the message", "consumer", r.durable, "subject", msg.Subject(), "err", err)
		_ = msg.NakWithDelay(r.set.backoff.Delay(1))
		return ActionNak
	}
	r.set.log.Warn("dead-lettered", "consumer", r.durable, "subject", msg.Subject(), "reason", reason)
	if err := msg.TermWithReason(truncateRunes(reason, 200, "…")); err != nil {
		r.set.log.Warn("terminate dead-lettered message", "consumer", r.durable, "subject", msg.Subject(), "err", err)
	}
	return ActionDeadLetter
}

func truncateRunes(s string, n int, marker string) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + marker
}

// heartbeat tells JetStream the delivery is still being worked on, so AckWait bounds a
// stalled worker rather than a slow LLM call.
func heartbeat(ctx context.Context, msg jetstream.Msg, ackWait time.Duration) {
	every := max(ackWait/3, 50*time.Millisecond)
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
func (r *Runtime[T]) maxDeliveries(m *nats.Msg) {
	var adv struct {
		Stream     string `json:"stream"`
		Consumer   string `json:"consumer"`
		StreamSeq  uint64 `json:"stream_seq"`
		Deliveries uint64 `json:"deliveries"`
	}
	if err := json.Unmarshal(m.Data, &adv); err != nil || adv.StreamSeq == 0 {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), 10*time.Second)
	defer cancel()
	s, err := r.js.Stream(sctx, r.stream)
	if err != nil {
		r.set.log.Error("max deliveries: open stream", "stream", r.stream, "err", err)
		return
	}
	raw, err := s.GetMsg(sctx, adv.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return
	}
	if err != nil {
		r.set.log.Error("max deliveries: read message", "stream", r.stream, "seq", adv.StreamSeq, "err", err)
		return
	}
	reason := fmt.Sprintf("delivered %d times without being settled (each worker stopped or exceeded AckWait)", adv.Deliveries)
	if _, err := DeadLetter(sctx, r.js, Letter{Subject: raw.Subject, Data: raw.Data, Header: raw.Header, Reason: reason,
		Stream: r.stream, Seq: adv.StreamSeq, Consumer: adv.Consumer, Deliveries: adv.Deliveries}); err != nil {
		r.set.log.Error("max deliveries: dead-letter", "stream", r.stream, "seq", adv.StreamSeq, "err", err)
		return
	}
	if r.h.DeadLettered != nil {
		r.h.DeadLettered(CauseExhausted)
	}
	r.set.log.Warn("dead-lettered after max deliveries", "stream", r.stream, "seq", adv.StreamSeq, "deliveries", adv.Deliveries)
}
