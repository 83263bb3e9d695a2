package api

import "time"

// File is a workspace memory file.
type File struct {
	AgentID    int64     `json:"agentId"`
	Filename   string    `json:"filename"`
	Content    string    `json:"content"`
	FileSize   int64     `json:"fileSize"`
	Enabled    bool      `json:"enabled"`
	SortOrder  int       `json:"sortOrder"`
	Version    int64     `json:"version"`
	CreateTime time.Time `json:"createTime"`
	UpdateTime time.Time `json:"updateTime"`
	// Tokens and BudgetTokens are set for a budgeted core file (MEMORY.md, PROFILE.md): its
	// content's tokens with the agent's tokenizer and the agent's budget for it.
	Tokens       *int `json:"tokens,omitempty"`
	BudgetTokens *int `json:"budgetTokens,omitempty"`
}

// FileInfo is a file in a listing (no content).
type FileInfo struct {
	Filename   string    `json:"filename"`
	Enabled    bool      `json:"enabled"`
	FileSize   int64     `json:"fileSize"`
	SortOrder  int       `json:"sortOrder"`
	Version    int64     `json:"version"`
	UpdateTime time.Time `json:"updateTime"`
	// Tokens and BudgetTokens are set for a budgeted core file, as in File.
	Tokens       *int `json:"tokens,omitempty"`
	BudgetTokens *int `json:"budgetTokens,omitempty"`
}

// HistoryEntry is a previous version of a file and who replaced it.
type HistoryEntry struct {
	Version    int64     `json:"version"`
	Content    string    `json:"content"`
	FileSize   int64     `json:"fileSize"`
	Enabled    bool      `json:"enabled"`
	Action     string    `json:"action"`
	Actor      string    `json:"actor"`
	Ref        string    `json:"ref"`
	ReplacedAt time.Time `json:"replacedAt"`
}

// WriteResult is the file written and whether the write created it.
type WriteResult struct {
	File
	Created bool `json:"created"`
}

// Agent is an agent's settings.
type Agent struct {
	AgentID    int64     `json:"agentId"`
	Language   string    `json:"language" example:"zh"`
	Timezone   string    `json:"timezone" example:"Asia/Shanghai"`
	CreateTime time.Time `json:"createTime"`
	// Budgets are the token budgets of the core files, the agent's own or the defaults.
	Budgets Budgets `json:"budgets"`
}

// Budgets are an agent's token budgets of its core files and whether each is its own.
type Budgets struct {
	MemoryTokens      int  `json:"memoryTokens"`
	ProfileTokens     int  `json:"profileTokens"`
	MemoryOverridden  bool `json:"memoryOverridden"`
	ProfileOverridden bool `json:"profileOverridden"`
}

// OverBudget is a core file over its token budget.
type OverBudget struct {
	AgentID      int64     `json:"agentId"`
	Filename     string    `json:"filename"`
	Tokens       int       `json:"tokens"`
	BudgetTokens int       `json:"budgetTokens"`
	Version      int64     `json:"version"`
	UpdateTime   time.Time `json:"updateTime"`
}
