package api

import (
	"encoding/json"
	"strings"
	"time"
)

// CronJob is a scheduled task of an agent: a Memory Consolidation ("emergence") or a message
// sent to the agent ("text").
type CronJob struct {
	ID             int64      `json:"id"`
	AgentID        int64      `json:"agentId"`
	Name           string     `json:"name"`
	CronExpression string     `json:"cronExpression"`
	Timezone       string     `json:"timezone"`
	TaskType       string     `json:"taskType"`
	TriggerMessage string     `json:"triggerMessage"`
	RequestBody    string     `json:"requestBody"`
	Enabled        bool       `json:"enabled"`
	NextRunTime    *time.Time `json:"nextRunTime"`
	LastRunTime    *time.Time `json:"lastRunTime"`
	CreateTime     time.Time  `json:"createTime"`
	UpdateTime     time.Time  `json:"updateTime"`
}

// DeadLetter is a message the workers gave up on: where it was and why, and its payload.
type DeadLetter struct {
	DeadLetterInfo
	// Payload is the original payload: its JSON, or a JSON string of its text when it is
	// not JSON.
	Payload json.RawMessage `json:"payload"`
}

// DeadLetterInfo is what MATE_DLQ records about a dead letter.
type DeadLetterInfo struct {
	// Seq is the dead letter's sequence in MATE_DLQ: what a retry takes and what the next
	// page starts after.
	Seq uint64 `json:"seq"`
	// Subject is the original subject.
	Subject    string    `json:"subject"`
	Reason     string    `json:"reason"`
	Stream     string    `json:"stream,omitempty"`
	StreamSeq  uint64    `json:"streamSeq,omitempty"`
	Consumer   string    `json:"consumer,omitempty"`
	Deliveries uint64    `json:"deliveries,omitempty"`
	MsgID      string    `json:"msgId,omitempty"`
	Time       time.Time `json:"time"`
}

// RetriedLetter is where a retried dead letter was published again.
type RetriedLetter struct {
	Subject   string `json:"subject"`
	Stream    string `json:"stream"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate"`
}

// Run is one summarize or emergence attempt from the run ledger.
type Run struct {
	RunID         string    `json:"runId"`
	Kind          string    `json:"kind"`
	AgentID       int64     `json:"agentId"`
	EventID       string    `json:"eventId,omitempty"`
	Conversations []string  `json:"conversations"`
	Status        RunStatus `json:"status"`
	Reason        string    `json:"reason,omitempty"`
	Model         string    `json:"model,omitempty"`
	Provider      string    `json:"provider,omitempty"`
	TokensIn      int       `json:"tokensIn"`
	TokensOut     int       `json:"tokensOut"`
	LatencyMs     int64     `json:"latencyMs"`
	FilesChanged  []string  `json:"filesChanged"`
	Attempt       int       `json:"attempt"`
	CreateTime    time.Time `json:"createTime"`
}

// RunStatus is the status of a run or of a manual request's outcome.
type RunStatus string

// Statuses of runs and of manual requests' outcomes.
const (
	StatusCompleted RunStatus = "completed"
	StatusSkipped   RunStatus = "skipped"
	// StatusRefused: the model's rewrite was refused by the guard.
	StatusRefused RunStatus = "refused"
	// StatusPending: no outcome within the server's wait; the request stays queued.
	StatusPending RunStatus = "pending"
	// StatusFailed: the attempt failed; it is retried unless Run.Final says otherwise.
	StatusFailed RunStatus = "failed"
	// StatusDeferred: the agent was in its cooldown or its lease was held; redelivered later.
	StatusDeferred RunStatus = "deferred"
)

// Final reports whether nothing more will happen for the run's event: it completed, was
// skipped or refused, or failed for good (dead-lettered). A failed or deferred run that is
// not final is followed by another attempt.
func (r Run) Final() bool {
	switch r.Status {
	case StatusCompleted, StatusSkipped, StatusRefused:
		return true
	case StatusFailed:
		return strings.Contains(r.Reason, "dead-lettered")
	}
	return false
}

// ToolDefinition is an OpenAI function-calling tool definition, ready to pass to a model.
type ToolDefinition struct {
	Type     string       `json:"type"`
	Function ToolFunction `json:"function"`
}

// ToolFunction is the function part of a ToolDefinition. Parameters is a JSON Schema; it
// has no agent id: the agent is bound by the URL a call posts to.
type ToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}
