package summarizer

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/internal/bus"
)

// EventsStreamConfig is MATE_EVENTS as Settings shape it (bus.EventsStreamConfig).
func EventsStreamConfig(set Settings) jetstream.StreamConfig {
	return bus.EventsStreamConfig(bus.EventsLimits{Replicas: set.Replicas, MaxAge: set.MaxAge,
		Duplicates: set.DuplicateWindow, MaxBytes: set.MaxBytes, MaxMsgs: set.MaxMsgs})
}

// ConsumerConfig is the summarizer workers' durable pull consumer on MATE_EVENTS
// (bus.SummarizerConsumerConfig).
func ConsumerConfig(set Settings) jetstream.ConsumerConfig {
	return bus.SummarizerConsumerConfig(set.AckWait, set.MaxDeliver)
}

// Provision creates or updates, idempotently, everything the pipeline needs on JetStream:
// MATE_EVENTS, MATE_DLQ and the summarizer durable. The API runs it too (it publishes onto
// MATE_EVENTS). (The intent bucket, mate_summarize_intent, of the versions before the
// fenced commit is no longer created or read.)
func Provision(ctx context.Context, js jetstream.JetStream, set Settings) error {
	if _, err := bus.EnsureStream(ctx, js, EventsStreamConfig(set)); err != nil {
		return err
	}
	if _, err := bus.EnsureStream(ctx, js, bus.DLQStreamConfig(set.Replicas, set.MaxAge)); err != nil {
		return err
	}
	_, err := bus.EnsureConsumer(ctx, js, bus.StreamEvents, ConsumerConfig(set))
	return err
}
