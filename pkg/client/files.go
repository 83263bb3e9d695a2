package client

import (
	"context"
	"github.com/matememory/matememory/pkg/api"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Version preconditions for the ifMatch argument of writes (sent as If-Match).
const (
	// AnyVersion writes whatever the current version is (no If-Match).
	AnyVersion int64 = -1
	// CreateOnly makes WriteFile fail with a conflict if the file exists.
	CreateOnly int64 = 0
)

// File is a workspace memory file.
type File = api.File

// FileInfo is a file in a listing (no content).
type FileInfo = api.FileInfo

// HistoryEntry is a previous version of a file and who replaced it.
type HistoryEntry = api.HistoryEntry

// WriteResult is the file after WriteFile and whether the write created it.
type WriteResult = api.WriteResult

// FilePatch changes whether a file is injected into the system prompt and its order; nil
// fields stay as they are.
type FilePatch struct {
	Enabled   *bool `json:"enabled,omitempty"`
	SortOrder *int  `json:"sortOrder,omitempty"`
}

// Agent is an agent's settings.
type Agent = api.Agent

// Budgets are an agent's token budgets of its core files and whether each is its own.
type Budgets = api.Budgets

// SetAgentBudgets overrides an agent's core file budgets: nil leaves one as it is, 0 returns
// it to the server's default.
func (c *Client) SetAgentBudgets(ctx context.Context, agentID int64, memoryTokens, profileTokens *int) (*Agent, error) {
	body := map[string]int{}
	if memoryTokens != nil {
		body["memoryBudgetTokens"] = *memoryTokens
	}
	if profileTokens != nil {
		body["profileBudgetTokens"] = *profileTokens
	}
	var a Agent
	if _, err := c.do(ctx, request{method: http.MethodPatch, path: agentPath(agentID), body: body}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

func ifMatch(version int64) http.Header {
	if version < 0 {
		return nil
	}
	return http.Header{"If-Match": {strconv.Quote(strconv.FormatInt(version, 10))}}
}

func filesPath(agentID int64, name string) string {
	return agentPath(agentID) + "/files/" + filePath(name)
}

// ListFiles lists an agent's files whose name starts with prefix ("" for all), in injection
// order.
func (c *Client) ListFiles(ctx context.Context, agentID int64, prefix string) ([]FileInfo, error) {
	var q url.Values
	if prefix != "" {
		q = url.Values{"prefix": {prefix}}
	}
	var out struct {
		Files []FileInfo `json:"files"`
	}
	_, err := c.do(ctx, request{method: http.MethodGet, path: agentPath(agentID) + "/files", query: q}, &out)
	return out.Files, err
}

// ReadFile reads one file; its Version is what WriteFile's ifMatch expects.
func (c *Client) ReadFile(ctx context.Context, agentID int64, filename string) (*File, error) {
	var f File
	if _, err := c.do(ctx, request{method: http.MethodGet, path: filesPath(agentID, filename)}, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// WriteFile creates or replaces a file's content. ifMatch is the version read before
// (IsConflict if the file changed since), CreateOnly, or AnyVersion.
func (c *Client) WriteFile(ctx context.Context, agentID int64, filename, content string, ifMatchVersion int64) (*WriteResult, error) {
	var out WriteResult
	_, err := c.do(ctx, request{method: http.MethodPut, path: filesPath(agentID, filename),
		body: map[string]string{"content": content}, header: ifMatch(ifMatchVersion)}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateFile creates a file that must not exist yet: ErrConflict if it does (the named form
// of WriteFile with CreateOnly).
func (c *Client) CreateFile(ctx context.Context, agentID int64, filename, content string) (*WriteResult, error) {
	return c.WriteFile(ctx, agentID, filename, content, CreateOnly)
}

// PatchFile changes a file's injection flag and order; ifMatch as for WriteFile (not
// CreateOnly).
func (c *Client) PatchFile(ctx context.Context, agentID int64, filename string, p FilePatch, ifMatchVersion int64) (*File, error) {
	var f File
	_, err := c.do(ctx, request{method: http.MethodPatch, path: filesPath(agentID, filename), body: p, header: ifMatch(ifMatchVersion)}, &f)
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// DeleteFile deletes a file (logically; its history stays).
func (c *Client) DeleteFile(ctx context.Context, agentID int64, filename string, ifMatchVersion int64) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: filesPath(agentID, filename), header: ifMatch(ifMatchVersion)}, nil)
	return err
}

// History lists a file's previous versions, newest first.
func (c *Client) History(ctx context.Context, agentID int64, filename string) ([]HistoryEntry, error) {
	var out struct {
		History []HistoryEntry `json:"history"`
	}
	_, err := c.do(ctx, request{method: http.MethodGet, path: filesPath(agentID, filename) + "/history"}, &out)
	return out.History, err
}

// Rollback makes version toVersion of a file current again (as a new version); ifMatch as
// for WriteFile (not CreateOnly).
func (c *Client) Rollback(ctx context.Context, agentID int64, filename string, toVersion, ifMatchVersion int64) (*File, error) {
	var f File
	_, err := c.do(ctx, request{method: http.MethodPost, path: filesPath(agentID, filename) + "/rollback",
		body: map[string]int64{"version": toVersion}, header: ifMatch(ifMatchVersion)}, &f)
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// SystemPrompt is the workspace part of the agent's system prompt: its enabled files in
// order, each under a --- NAME --- line.
func (c *Client) SystemPrompt(ctx context.Context, agentID int64) (string, error) {
	var out struct {
		Content string `json:"content"`
	}
	_, err := c.do(ctx, request{method: http.MethodGet, path: agentPath(agentID) + "/system-prompt"}, &out)
	return out.Content, err
}

// Agent reads an agent's settings (recording the agent and seeding its core files when it is
// new).
func (c *Client) Agent(ctx context.Context, agentID int64) (*Agent, error) {
	var a Agent
	if _, err := c.do(ctx, request{method: http.MethodGet, path: agentPath(agentID)}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// UpdateAgent changes an agent's language ("zh", "en") and/or IANA time zone; empty
// arguments are left unchanged.
func (c *Client) UpdateAgent(ctx context.Context, agentID int64, language, timezone string) (*Agent, error) {
	body := map[string]string{}
	if language != "" {
		body["language"] = language
	}
	if timezone != "" {
		body["timezone"] = timezone
	}
	var a Agent
	if _, err := c.do(ctx, request{method: http.MethodPatch, path: agentPath(agentID), body: body}, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// AgentSummary is one agent in a list: its settings and how much memory it holds.
type AgentSummary struct {
	Agent
	FileCount  int       `json:"fileCount"`
	LastUpdate time.Time `json:"lastUpdate"`
}

// AgentPage is one page of ListAgents; NextAfter is 0 on the last page.
type AgentPage struct {
	Agents    []AgentSummary `json:"agents"`
	NextAfter int64          `json:"nextAfter"`
}

// ListAgents lists the agents the key may see, in id order, after the agent id afterID
// (0 = from the start), at most limit (1–1000; 0 = the server's default of 100).
func (c *Client) ListAgents(ctx context.Context, afterID int64, limit int) (*AgentPage, error) {
	q := url.Values{}
	if afterID > 0 {
		q.Set("after", strconv.FormatInt(afterID, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var p AgentPage
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/agents", query: q}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}
