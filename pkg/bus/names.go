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
	// BucketCooldown holds the time of each agent's last extraction.
	BucketCooldown = "mate_agent_cooldown"
)

// AgentSubject is subject.<agentId>.
func AgentSubject(subject string, agentID int64) string {
	return fmt.Sprintf("%s.%d", subject, agentID)
}
