package summarizer

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/bus"
)

// EventsStreamConfig is MATE_EVENTS: completed events and manual summarize requests,
// limits retention (not work-queue: events stay replayable for MaxAge after they were
// processed), deduplicated by Nats-Msg-Id (the event id) within DuplicateWindow.
func EventsStreamConfig(set Settings) jetstream.StreamConfig {
	dup := set.DuplicateWindow
	if dup <= 0 || dup > set.MaxAge {
		dup = min(2*time.Minute, set.MaxAge)
	}
	cfg := jetstream.StreamConfig{
		Name:        bus.StreamEvents,
		Description: "MateMemory events: ConversationCompletedEvent and manual summarize requests (replayable)",
		Subjects:    []string{bus.SubjectCompleted + ".>", bus.SubjectSummarize + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    max(set.Replicas, 1),
		MaxAge:      set.MaxAge,
		Discard:     jetstream.DiscardOld,
		Duplicates:  dup,
		AllowDirect: true,
	}
	if set.MaxBytes > 0 || set.MaxMsgs > 0 {
		// A full stream refuses new events (the API answers 503, a publisher gets an error)
		// rather than discarding old ones that may not be extracted yet: nothing is dropped.
		cfg.MaxBytes, cfg.MaxMsgs, cfg.Discard = set.MaxBytes, set.MaxMsgs, jetstream.DiscardNew
		if set.MaxBytes <= 0 {
			cfg.MaxBytes = -1
		}
		if set.MaxMsgs <= 0 {
			cfg.MaxMsgs = -1
		}
	}
	return cfg
}

// ConsumerConfig is the summarizer workers' durable pull consumer on MATE_EVENTS. All
// workers fetch from the one durable, so each delivery goes to one worker; the durable
// lives on the server and survives every worker restart.
func ConsumerConfig(set Settings) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        bus.ConsumerSummarizer,
		Description:    "MateMemory summarizer workers",
		FilterSubjects: []string{bus.SubjectCompleted + ".>", bus.SubjectSummarize + ".>"},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        set.AckWait,
		MaxDeliver:     set.MaxDeliver,
		// Deferred events (cooldown, lease) wait NAKed-with-delay and count as pending: room
		// for many, so they never stall fresh deliveries.
		MaxAckPending: 20000,
		MaxWaiting:    512,
	}
}

// Provision creates or updates, idempotently, everything the pipeline needs on JetStream:
// MATE_EVENTS, MATE_DLQ and the summarizer durable. The API runs it too (it publishes onto
// MATE_EVENTS). (The intent bucket, mate_summarize_intent, of the versions before the
// fenced commit is no longer created or read.)
func Provision(ctx context.Context, js jetstream.JetStream, set Settings) error {
	if event.Stream != bus.StreamEvents || event.SubjectCompleted != bus.SubjectCompleted || event.SubjectSummarize != bus.SubjectSummarize {
		return fmt.Errorf("pkg/event and pkg/internal/bus disagree on stream or subject names")
	}
	if _, err := bus.EnsureStream(ctx, js, EventsStreamConfig(set)); err != nil {
		return err
	}
	if _, err := bus.EnsureStream(ctx, js, bus.DLQStreamConfig(set.Replicas, set.MaxAge)); err != nil {
		return err
	}
	_, err := bus.EnsureConsumer(ctx, js, bus.StreamEvents, ConsumerConfig(set))
	return err
}
