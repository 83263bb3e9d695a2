package summarizer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/store"
)

// ReplayOptions select stored events to feed through the handler again.
type ReplayOptions struct {
	// AgentID limits the replay to one agent (0 = all).
	AgentID int64
	// Since and Until bound the time the events were stored (zero = open).
	Since, Until time.Time
	// FromSeq and ToSeq bound the stream sequence (0 = open).
	FromSeq, ToSeq uint64
	// DryRun reports what each event would do without writing anything (no ledger rows).
	DryRun bool
	// Out receives one line per event; nil discards.
	Out io.Writer
}

// ReplayReport counts what the replayed events did, by status ("invalid" for events that
// cannot be decoded).
type ReplayReport struct {
	Events   int            `json:"events"`
	ByStatus map[string]int `json:"byStatus"`
}

func (r ReplayReport) String() string {
	keys := make([]string, 0, len(r.ByStatus))
	for k := range r.ByStatus {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, r.ByStatus[k])
	}
	return fmt.Sprintf("%d events: %s", r.Events, strings.Join(parts, ", "))
}

// replayRetries bounds how often one replayed event is tried again when it is deferred
// (the lease is held) or fails transiently.
const replayRetries = 5

// replayUnavailable bounds the consecutive reads (a second apart) that find NATS not
// answering before a replay gives up.
const replayUnavailable = 120

// Replay reads stored events from MATE_EVENTS (an ordered, ephemeral consumer: the workers'
// durable is not touched) and feeds each through Handle, as a worker would, except that
// the cooldown does not apply. Effects are idempotent: events already extracted are
// reported as covered and change nothing; events never extracted (dead-lettered, say)
// are extracted now.
func (s *Service) Replay(ctx context.Context, js jetstream.JetStream, o ReplayOptions) (ReplayReport, error) {
	rep := ReplayReport{ByStatus: map[string]int{}}
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	// A cluster that is still recovering is waited for (bus.Retry), as at provisioning.
	stream, err := bus.Retry(ctx, "open "+bus.StreamEvents, func(ctx context.Context) (jetstream.Stream, error) {
		return js.Stream(ctx, bus.StreamEvents)
	})
	if err != nil {
		return rep, err
	}
	info, err := bus.Retry(ctx, "read "+bus.StreamEvents, func(ctx context.Context) (*jetstream.StreamInfo, error) {
		return stream.Info(ctx)
	})
	if err != nil {
		return rep, err
	}
	last := info.State.LastSeq
	if o.ToSeq > 0 && o.ToSeq < last {
		last = o.ToSeq
	}
	if info.State.Msgs == 0 || last == 0 || o.FromSeq > last {
		return rep, nil
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{bus.SubjectCompleted + ".>", bus.SubjectSummarize + ".>"},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
	if o.AgentID > 0 {
		cfg.FilterSubjects = []string{event.CompletedSubject(o.AgentID), event.SummarizeSubject(o.AgentID)}
	}
	switch {
	case o.FromSeq > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, o.FromSeq
	case !o.Since.IsZero():
		t := o.Since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &t
	}
	cons, err := bus.Retry(ctx, "read "+bus.StreamEvents, func(ctx context.Context) (jetstream.Consumer, error) {
		return stream.OrderedConsumer(ctx, cfg)
	})
	if err != nil {
		return rep, err
	}
	unavailable := 0
	for {
		batch, err := bus.Retry(ctx, "read "+bus.StreamEvents, func(context.Context) (jetstream.MessageBatch, error) {
			return cons.Fetch(50, jetstream.FetchMaxWait(time.Second))
		})
		if err != nil {
			return rep, err
		}
		n := 0
		done := false
		for msg := range batch.Messages() {
			n++
			md, err := msg.Metadata()
			if err != nil {
				continue
			}
			seq := md.Sequence.Stream
			if seq > last || (!o.Until.IsZero() && md.Timestamp.After(o.Until)) {
				done = true
				continue
			}
			if !o.Since.IsZero() && md.Timestamp.Before(o.Since) {
				continue
			}
			status, reason := s.replayOne(ctx, msg, o.DryRun)
			rep.Events++
			rep.ByStatus[status]++
			fmt.Fprintf(out, "seq %d  %s  %s: %s\n", seq, msg.Subject(), status, reason)
			if seq >= last {
				done = true
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrNoMessages) {
			if !bus.Unavailable(err) || unavailable >= replayUnavailable {
				return rep, fmt.Errorf("read %s: %w", bus.StreamEvents, err)
			}
			// The ordered consumer resumes after the last message it delivered.
			unavailable++
			s.d.Log.Warn("replay: NATS not answering; retrying", "attempt", unavailable, "err", err)
			select {
			case <-ctx.Done():
				return rep, ctx.Err()
			case <-time.After(time.Second):
			}
			continue
		}
		unavailable = 0
		if done || n == 0 || ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
}

func (s *Service) replayOne(ctx context.Context, msg jetstream.Msg, dryRun bool) (string, string) {
	job, _, err := decode(msg)
	if err != nil {
		return "invalid", err.Error()
	}
	job = job.replayed()
	if dryRun {
		return s.Plan(ctx, job)
	}
	var res Result
	for attempt := 1; attempt <= replayRetries; attempt++ {
		job.Attempt = attempt
		res = s.Handle(ctx, job)
		if !res.Retry || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(res.Delay):
		}
	}
	if res.Retry {
		return res.Status, res.Reason + " (still pending after the replay's retries; the workers will take it)"
	}
	return res.Status, res.Reason
}

// Plan says what Handle would do with job, without writing anything.
func (s *Service) Plan(ctx context.Context, job Job) (status, reason string) {
	if job.policy().Event {
		r, skip, err := s.preCheck(ctx, job.Event)
		if err != nil {
			return store.RunFailed, err.Error()
		}
		if skip {
			return store.RunSkipped, r
		}
	}
	p, err := s.d.Messages.Progress(ctx, job.AgentID, job.ConversationID)
	if err != nil {
		return store.RunFailed, err.Error()
	}
	count, last, wm := p.Count, p.Last, p.Extracted
	stored := count
	if job.Event != nil && len(job.Event.Messages) > 0 {
		stored += int64(len(job.Event.Messages)) // an upper bound: they may be stored already
	}
	if min := int64(s.set.Memory.MinMessagesForSummarize); stored < min || stored == 0 {
		return store.RunSkipped, fmt.Sprintf("conversation %s has %d stored messages; min-messages-for-summarize is %d", job.ConversationID, count, min)
	}
	if wm >= last && last > 0 {
		status := store.RunCompleted
		if !job.policy().Event {
			status = store.RunSkipped
		}
		return status, fmt.Sprintf("covered: conversation %s is extracted up to message #%d; nothing would change", job.ConversationID, wm)
	}
	return "would-extract", fmt.Sprintf("conversation %s has messages after #%d not yet extracted", job.ConversationID, wm)
}
