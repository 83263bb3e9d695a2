package bus

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/event"
)

// The catalogue: every subject, stream, durable consumer and KV bucket MateMemory uses, and
// their configurations (see docs/architecture.md). The names chat services need are defined
// in pkg/event (public, standard library and nats.go only) and referred to here. <agentId> is
// the decimal agent id.

// Subjects.
const (
	// SubjectCompleted carries ConversationCompletedEvent: mate.conversation.completed.<agentId>.
	SubjectCompleted = event.SubjectCompleted
	// SubjectSummarize carries summarize requests (manual, context-window flush, replay,
	// stranded sweep): mate.memory.summarize.<agentId>.
	SubjectSummarize = event.SubjectSummarize
	// SubjectAgentTrigger carries cron jobs of task type text for chat services: mate.agent.trigger.<agentId>.
	SubjectAgentTrigger = event.SubjectAgentTrigger
	// SubjectEmergence carries emergence requests (cron slot or manual): mate.memory.emergence.<agentId>.
	SubjectEmergence = "mate.memory.emergence"
	// SubjectRecallIndex carries "a file of this agent changed": mate.recall.index.<agentId>.
	SubjectRecallIndex = "mate.recall.index"
	// SubjectRecallIndexed (core NATS, not stored) says the indexer committed new chunks of
	// an agent: every API replica refreshes its cached snapshot of that agent.
	SubjectRecallIndexed = "mate.recall.indexed"
	// SubjectDeadLetter carries messages given up on: mate.dlq.<original subject>.
	SubjectDeadLetter = "mate.dlq"
	// SubjectErasure carries "this agent (or one of its conversations) was erased":
	// mate.erasure.<agentId>. Every process drops what it caches of the agent.
	SubjectErasure = "mate.erasure"
)

// Streams and durable consumers (see docs/pipeline.md).
const (
	// StreamEvents holds mate.conversation.completed.> and mate.memory.summarize.>.
	StreamEvents = event.Stream
	// StreamEmergence holds mate.memory.emergence.>.
	StreamEmergence = "MATE_EMERGENCE"
	// StreamAgentTriggers holds mate.agent.trigger.>, for chat services.
	StreamAgentTriggers = event.StreamAgentTriggers
	// StreamRecall holds mate.recall.index.>.
	StreamRecall = "MATE_RECALL"
	// StreamDLQ holds dead letters: mate.dlq.<original subject>.
	StreamDLQ = "MATE_DLQ"
	// StreamErasures holds mate.erasure.>, read by every process from an ordered consumer.
	StreamErasures = "MATE_ERASURES"
	// ConsumerSummarizer is the summarizer workers' shared durable pull consumer on StreamEvents.
	ConsumerSummarizer = "summarizer"
	// ConsumerEmergence is the emergence workers' shared durable pull consumer on StreamEmergence.
	ConsumerEmergence = "emergence"
	// ConsumerRecall is the recall indexers' shared durable pull consumer on StreamRecall.
	ConsumerRecall = "recall-indexer"
)

// KV buckets.
const (
	// BucketLease holds the per-agent lease shared by the summarizer and the emergence worker.
	BucketLease = "mate_agent_lease"
	// BucketManualEmergence holds, per agent, the last manual emergence request; its TTL is
	// the manual trigger's per-agent cooldown.
	BucketManualEmergence = "mate_manual_emergence"
	// BucketCooldown held each agent's cooldown before it moved into the lease record
	// (BucketLease); no longer written or read.
	BucketCooldown = "mate_agent_cooldown"
	// BucketIntent holds the summarizer's write-ahead intent per agent (which message ranges
	// a daily entry covers), so a crash between the append and the watermark update never
	// appends the same conversations twice.
	BucketIntent = "mate_summarize_intent"
	// BucketSchedulerLeader holds the scheduler's leader lease.
	BucketSchedulerLeader = "mate_scheduler_leader"
)

// AgentSubject is subject.<agentId>.
func AgentSubject(subject string, agentID int64) string {
	return fmt.Sprintf("%s.%d", subject, agentID)
}

// EventsLimits shapes MATE_EVENTS.
type EventsLimits struct {
	Replicas int
	MaxAge   time.Duration
	// Duplicates is the Nats-Msg-Id window (0 or over MaxAge: min(2 min, MaxAge)).
	Duplicates time.Duration
	// MaxBytes and MaxMsgs bound the stream (0: unlimited); a full stream refuses events.
	MaxBytes, MaxMsgs int64
}

// EventsStreamConfig is MATE_EVENTS: completed events and summarize requests, limits
// retention (not work-queue: events stay replayable for MaxAge after they were processed),
// deduplicated by Nats-Msg-Id (the event id) within the duplicate window.
func EventsStreamConfig(l EventsLimits) jetstream.StreamConfig {
	dup := l.Duplicates
	if dup <= 0 || dup > l.MaxAge {
		dup = min(2*time.Minute, l.MaxAge)
	}
	cfg := jetstream.StreamConfig{
		Name:        StreamEvents,
		Description: "MateMemory events: ConversationCompletedEvent and manual summarize requests (replayable)",
		Subjects:    []string{SubjectCompleted + ".>", SubjectSummarize + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    max(l.Replicas, 1),
		MaxAge:      l.MaxAge,
		Discard:     jetstream.DiscardOld,
		Duplicates:  dup,
		AllowDirect: true,
	}
	if l.MaxBytes > 0 || l.MaxMsgs > 0 {
		// A full stream refuses new events (the API answers 503, a publisher gets an error)
		// rather than discarding old ones that may not be extracted yet: nothing is dropped.
		cfg.MaxBytes, cfg.MaxMsgs, cfg.Discard = l.MaxBytes, l.MaxMsgs, jetstream.DiscardNew
		if l.MaxBytes <= 0 {
			cfg.MaxBytes = -1
		}
		if l.MaxMsgs <= 0 {
			cfg.MaxMsgs = -1
		}
	}
	return cfg
}

// SummarizerConsumerConfig is the summarizer workers' durable pull consumer on MATE_EVENTS.
// All workers fetch from the one durable, so each delivery goes to one worker; the durable
// lives on the server and survives every worker restart.
func SummarizerConsumerConfig(ackWait time.Duration, maxDeliver int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        ConsumerSummarizer,
		Description:    "MateMemory summarizer workers",
		FilterSubjects: []string{SubjectCompleted + ".>", SubjectSummarize + ".>"},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        ackWait,
		MaxDeliver:     maxDeliver,
		// Deferred events (cooldown, lease) wait NAKed-with-delay and count as pending: room
		// for many, so they never stall fresh deliveries.
		MaxAckPending: 20000,
		MaxWaiting:    512,
	}
}

// DupWindow bounds a wanted duplicate window: at least 2 minutes, at most maxAge (the
// server refuses a window longer than the stream keeps messages).
func DupWindow(maxAge, want time.Duration) time.Duration {
	w := max(want, 2*time.Minute)
	if maxAge > 0 && w > maxAge {
		w = maxAge
	}
	return w
}

// EmergenceStreamConfig is MATE_EMERGENCE: limits retention so requests stay replayable for
// maxAge, and a duplicate window of at least dupWindow (the scheduler's grace period plus
// margin): a slot re-published after a scheduler crash between publishing and recording it
// is stored once.
func EmergenceStreamConfig(replicas int, maxAge, dupWindow time.Duration) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        StreamEmergence,
		Description: "MateMemory emergence requests (cron slots and manual triggers)",
		Subjects:    []string{SubjectEmergence + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
		MaxAge:      maxAge,
		Discard:     jetstream.DiscardOld,
		Duplicates:  DupWindow(maxAge, dupWindow),
	}
}

// EmergenceConsumerConfig is the emergence workers' shared durable consumer: explicit acks,
// bounded deliveries.
func EmergenceConsumerConfig(ackWait time.Duration, maxDeliver int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       ConsumerEmergence,
		Description:   "MateMemory emergence workers",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		MaxDeliver:    maxDeliver,
		FilterSubject: SubjectEmergence + ".>",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: 1000,
	}
}

// AgentTriggersStreamConfig is MATE_AGENT_TRIGGERS, limits retention with the same
// duplicate window reasoning as MATE_EMERGENCE.
func AgentTriggersStreamConfig(replicas int, maxAge, dupWindow time.Duration) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        StreamAgentTriggers,
		Description: "MateMemory cron triggers of task type text, for chat services",
		Subjects:    []string{SubjectAgentTrigger + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
		MaxAge:      maxAge,
		Discard:     jetstream.DiscardOld,
		Duplicates:  DupWindow(maxAge, dupWindow),
	}
}

// RecallStreamConfig is MATE_RECALL: limits retention (messages are tiny and a replay is
// harmless), a day of history, the pipeline's replicas.
func RecallStreamConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{Name: StreamRecall, Subjects: []string{SubjectRecallIndex + ".>"},
		Retention: jetstream.LimitsPolicy, Storage: jetstream.FileStorage, MaxAge: 24 * time.Hour,
		Replicas: max(replicas, 1), Duplicates: 2 * time.Minute,
		Description: "MateMemory recall: workspace file changes to index"}
}

// RecallConsumerConfig is the recall indexers' durable consumer.
func RecallConsumerConfig(ackWait time.Duration, maxDeliver int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{Durable: ConsumerRecall, Description: "MateMemory recall indexers",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, MaxDeliver: maxDeliver,
		FilterSubject: SubjectRecallIndex + ".>", DeliverPolicy: jetstream.DeliverAllPolicy, MaxAckPending: 1000}
}

// DLQStreamConfig is the dead-letter stream: every mate.dlq.> subject, limits retention,
// kept for maxAge (operators list and retry from it).
func DLQStreamConfig(replicas int, maxAge time.Duration) jetstream.StreamConfig {
	if replicas <= 0 {
		replicas = 1
	}
	return jetstream.StreamConfig{
		Name:        StreamDLQ,
		Description: "MateMemory dead letters: messages given up on, with the reason in Mate-Dlq-* headers",
		Subjects:    []string{SubjectDeadLetter + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		MaxAge:      maxAge,
		Discard:     jetstream.DiscardOld,
		Duplicates:  2 * time.Minute,
	}
}

// ErasuresStreamConfig is MATE_ERASURES: erasure notices (an agent id, a scope and a time: no
// content), limits retention for a day. Each process reads it from an ordered consumer that
// starts at the newest message when the process starts, and resumes where it stopped after a
// reconnect, so a process cut off from NATS for a moment still hears every erasure.
func ErasuresStreamConfig(replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        StreamErasures,
		Description: "MateMemory erasure notices: every process drops what it caches of an erased agent",
		Subjects:    []string{SubjectErasure + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
		MaxAge:      24 * time.Hour,
		Discard:     jetstream.DiscardOld,
	}
}
