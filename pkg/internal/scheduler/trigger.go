package scheduler

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/bus"
)

// TriggerStream holds agent triggers, mate.agent.trigger.<agentId>, for chat services.
const TriggerStream = bus.StreamAgentTriggers

// TriggerSourceCron marks a conversation started by a cron job; the summarizer skips such
// conversations when mate.memory.skip-cron-conversations is true (the spec's rule against
// recursion), so a chat service must pass it on as the conversation's triggerSource.
const TriggerSourceCron = event.TriggerCron

// Trigger is what a cron job of task type "text" sends, on mate.agent.trigger.<agentId>:
// MateClaw's way of giving the agent a message of its own at a scheduled time. A chat service
// consumes it (a durable consumer of its own on MATE_AGENT_TRIGGERS), runs the agent with
// Message as the user turn, and publishes the ConversationCompletedEvent with
// triggerSource "cron".
type Trigger struct {
	// TriggerID is also the message's Nats-Msg-Id: "cron:<jobId>:<slot RFC 3339>".
	TriggerID string `json:"triggerId"`
	AgentID   int64  `json:"agentId"`
	JobID     int64  `json:"jobId"`
	JobName   string `json:"jobName"`
	// Message is the job's trigger message.
	Message string `json:"message"`
	// RequestBody is the job's request body, passed through as stored.
	RequestBody string `json:"requestBody,omitempty"`
	// TriggerSource is always "cron".
	TriggerSource string `json:"triggerSource"`
	// Slot is the scheduled time that fired (UTC); Timezone is the job's zone.
	Slot     time.Time `json:"slot"`
	Timezone string    `json:"timezone"`
}

// TriggerStreamConfig is MATE_AGENT_TRIGGERS (bus.AgentTriggersStreamConfig).
func TriggerStreamConfig(replicas int, maxAge, dupWindow time.Duration) jetstream.StreamConfig {
	return bus.AgentTriggersStreamConfig(replicas, maxAge, dupWindow)
}
