// Package store holds MateMemory's database schema (gorm models), its versioned
// migrations and the connection set-up for MySQL/MariaDB and the embedded SQLite.
package store

import "time"

// WorkspaceFile is the spec's mate_workspace_file plus a version for compare-and-swap.
// Deleted is 0 for a live row and the row's own id once logically deleted, so that the
// unique key (agent_id, filename, deleted) allows one live file per name and any number of
// deleted ones, identically on MySQL and SQLite.
type WorkspaceFile struct {
	ID         int64     `gorm:"primaryKey;autoIncrement"`
	AgentID    int64     `gorm:"not null;uniqueIndex:uk_ws_agent_file,priority:1"`
	Filename   string    `gorm:"size:256;not null;uniqueIndex:uk_ws_agent_file,priority:2"`
	Content    string    `gorm:"type:longtext"`
	FileSize   int64     `gorm:"not null"`
	Enabled    bool      `gorm:"not null"`
	SortOrder  int       `gorm:"not null"`
	Version    int64     `gorm:"not null"`
	CreateTime time.Time `gorm:"not null"`
	UpdateTime time.Time `gorm:"not null"`
	Deleted    int64     `gorm:"not null;uniqueIndex:uk_ws_agent_file,priority:3"`
	// TokenCount is the content's tokens as TokenEncoding counts them, stored with the
	// version it counts (TokenVersion) in the write of that version, for the budgeted core
	// files (issue 32): every extraction reads it instead of tokenizing the file. A count
	// whose TokenVersion is not Version is not the content's (a process that does not count
	// wrote the file since) and is counted again.
	TokenCount    int    `gorm:"not null;default:0"`
	TokenEncoding string `gorm:"size:32;not null;default:''"`
	TokenVersion  int64  `gorm:"not null;default:0"`
}

// TableName implements gorm's Tabler.
func (WorkspaceFile) TableName() string { return "mate_workspace_file" }

// Actors that change workspace files, recorded in history.
const (
	ActorAPI        = "api"
	ActorTool       = "tool"
	ActorSummarizer = "summarizer"
	ActorEmergence  = "emergence"
	ActorSeed       = "seed"
)

// WorkspaceFileHistory keeps the content a file had at Version before a change replaced it.
type WorkspaceFileHistory struct {
	ID       int64  `gorm:"primaryKey;autoIncrement"`
	FileID   int64  `gorm:"not null;index:idx_wsh_file_version,priority:1"`
	AgentID  int64  `gorm:"not null;index:idx_wsh_agent"`
	Filename string `gorm:"size:256;not null"`
	// Version is the version whose content this row keeps.
	Version int64  `gorm:"not null;index:idx_wsh_file_version,priority:2"`
	Content string `gorm:"type:longtext"`
	Enabled bool   `gorm:"not null"`
	// Action is what replaced this version: write, edit, append, delete, rollback.
	Action string `gorm:"size:32;not null"`
	// Actor is who did it: api, tool, summarizer, emergence.
	Actor string `gorm:"size:32;not null"`
	// Ref is the run or event id (or request id) behind the change.
	Ref        string    `gorm:"size:128"`
	CreateTime time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (WorkspaceFileHistory) TableName() string { return "mate_workspace_file_history" }

// Agent records that an agent has been seen, with its own language and time zone.
type Agent struct {
	ID         int64     `gorm:"primaryKey;autoIncrement:false"`
	Language   string    `gorm:"size:8;not null"`
	Timezone   string    `gorm:"size:64;not null"`
	CreateTime time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (Agent) TableName() string { return "mate_agent" }

// AgentBudget is an agent's own token budgets of its core files (mate_agent_budget); a zero
// value means the configured default (mate.memory.budget.*). A table of its own, not
// columns of mate_agent, so that the first migration's schema stays what it was.
type AgentBudget struct {
	AgentID       int64     `gorm:"primaryKey;autoIncrement:false"`
	MemoryTokens  int       `gorm:"not null;default:0"`
	ProfileTokens int       `gorm:"not null;default:0"`
	UpdateTime    time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (AgentBudget) TableName() string { return "mate_agent_budget" }

// Message is one conversation message (the short-term history, mate_message).
type Message struct {
	ID             int64  `gorm:"primaryKey;autoIncrement"`
	AgentID        int64  `gorm:"not null;index:idx_msg_agent_conv,priority:1"`
	ConversationID string `gorm:"size:128;not null;index:idx_msg_agent_conv,priority:2;index:idx_msg_conv"`
	// Role is user, assistant, system or tool.
	Role    string `gorm:"size:16;not null"`
	Content string `gorm:"type:longtext"`
	// ToolCalls is the assistant's tool calls as OpenAI-format JSON, if any.
	ToolCalls string `gorm:"type:longtext"`
	// ToolCallID links a tool result to its call.
	ToolCallID string    `gorm:"size:128"`
	Name       string    `gorm:"size:128"`
	CreateTime time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (Message) TableName() string { return "mate_message" }

// CronJob is MateClaw's mate_cron_job.
type CronJob struct {
	ID             int64  `gorm:"primaryKey;autoIncrement"`
	Name           string `gorm:"size:128;not null;uniqueIndex:uk_cron_agent_name,priority:2"`
	CronExpression string `gorm:"size:64;not null"`
	Timezone       string `gorm:"size:64;not null"`
	AgentID        int64  `gorm:"not null;uniqueIndex:uk_cron_agent_name,priority:1"`
	// TaskType is "text" (a message for the agent) or "emergence".
	TaskType       string     `gorm:"size:32;not null"`
	TriggerMessage string     `gorm:"type:text"`
	RequestBody    string     `gorm:"type:text"`
	Enabled        bool       `gorm:"not null;index:idx_cron_due,priority:1"`
	NextRunTime    *time.Time `gorm:"index:idx_cron_due,priority:2"`
	LastRunTime    *time.Time
	CreateTime     time.Time `gorm:"not null"`
	UpdateTime     time.Time `gorm:"not null"`
	Deleted        int64     `gorm:"not null;uniqueIndex:uk_cron_agent_name,priority:3"`
}

// TableName implements gorm's Tabler.
func (CronJob) TableName() string { return "mate_cron_job" }

// Run statuses recorded in the ledger.
const (
	RunCompleted = "completed"
	RunSkipped   = "skipped"
	RunFailed    = "failed"
	RunRefused   = "refused"
	RunDeferred  = "deferred"
)

// MemoryRun is one summarize or emergence attempt (the run ledger).
type MemoryRun struct {
	ID      int64  `gorm:"primaryKey;autoIncrement"`
	RunID   string `gorm:"size:64;not null;uniqueIndex"`
	Kind    string `gorm:"size:16;not null"`
	AgentID int64  `gorm:"not null;index:idx_run_agent_time,priority:1"`
	EventID string `gorm:"size:128;index"`
	// Conversations is a JSON array of the conversation ids this run covered.
	Conversations string `gorm:"type:text"`
	Status        string `gorm:"size:16;not null"`
	Reason        string `gorm:"type:text"`
	Model         string `gorm:"size:128"`
	// Provider is "llm" or "offline".
	Provider  string `gorm:"size:16"`
	TokensIn  int    `gorm:"not null"`
	TokensOut int    `gorm:"not null"`
	LatencyMs int64  `gorm:"not null"`
	// FilesChanged is a JSON array of filenames written.
	FilesChanged string    `gorm:"type:text"`
	Attempt      int       `gorm:"not null"`
	CreateTime   time.Time `gorm:"not null;index:idx_run_agent_time,priority:2"`
}

// TableName implements gorm's Tabler.
func (MemoryRun) TableName() string { return "mate_memory_run" }

// ExtractionWatermark is the last message of a conversation already extracted to memory.
type ExtractionWatermark struct {
	AgentID        int64     `gorm:"primaryKey;autoIncrement:false"`
	ConversationID string    `gorm:"primaryKey;size:128"`
	LastMessageID  int64     `gorm:"not null"`
	UpdateTime     time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (ExtractionWatermark) TableName() string { return "mate_extraction_watermark" }

// AppliedEffect makes an effect (a daily entry for an event, say) happen once: its key is
// inserted in the same transaction as the effect, and a second insert fails.
type AppliedEffect struct {
	Key        string    `gorm:"primaryKey;size:191"`
	CreateTime time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (AppliedEffect) TableName() string { return "mate_applied_effect" }

// AgentFence is the fencing value of an agent's lease: the token (lease bucket epoch, lease
// revision) of the last holder that wrote. A write made under the lease checks, in its own
// transaction, that no newer holder has written (pkg/internal/fence), so a write from a lost lease
// fails at COMMIT instead of landing after the new holder's.
type AgentFence struct {
	AgentID int64 `gorm:"primaryKey;autoIncrement:false"`
	// Epoch is the lease bucket's creation time (Unix nanoseconds): revisions restart when a
	// bucket is recreated, and a newer bucket orders after an older one.
	Epoch    int64 `gorm:"not null;default:0"`
	Revision int64 `gorm:"not null;default:0"`
	// Writes counts fenced transactions, so the fencing UPDATE always changes the row (MySQL
	// reports a row whose values did not change as not affected).
	Writes     int64     `gorm:"not null;default:0"`
	UpdateTime time.Time `gorm:"not null"`
}

// TableName implements gorm's Tabler.
func (AgentFence) TableName() string { return "mate_agent_fence" }
