package bus

import "fmt"

// Subjects (see docs/architecture.md). <agentId> is the decimal agent id.
const (
	// SubjectCompleted carries ConversationCompletedEvent: mate.conversation.completed.<agentId>.
	SubjectCompleted = "mate.conversation.completed"
	// SubjectSummarize carries manual summarize requests: mate.memory.summarize.<agentId>.
	SubjectSummarize = "mate.memory.summarize"
	// SubjectEmergence carries emergence requests (cron slot or manual): mate.memory.emergence.<agentId>.
	SubjectEmergence = "mate.memory.emergence"
	// SubjectAgentTrigger carries cron jobs of task type text for chat services: mate.agent.trigger.<agentId>.
	SubjectAgentTrigger = "mate.agent.trigger"
	// SubjectDeadLetter carries messages given up on: mate.dlq.<original subject>.
	SubjectDeadLetter = "mate.dlq"
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
)

// Streams and durable consumers (see docs/pipeline.md).
const (
	// StreamEvents holds mate.conversation.completed.> and mate.memory.summarize.>.
	StreamEvents = "MATE_EVENTS"
	// StreamDLQ holds dead letters: mate.dlq.<original subject>.
	StreamDLQ = "MATE_DLQ"
	// ConsumerSummarizer is the summarizer workers' shared durable pull consumer on StreamEvents.
	ConsumerSummarizer = "summarizer"
)

// AgentSubject is subject.<agentId>.
func AgentSubject(subject string, agentID int64) string {
	return fmt.Sprintf("%s.%d", subject, agentID)
}
