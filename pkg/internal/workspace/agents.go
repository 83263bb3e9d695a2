package workspace

import (
	"context"
	"fmt"
	"time"

	"github.com/matememory/matememory/pkg/internal/store"
)

// AgentSummary is one agent as a list shows it: its settings and how much memory it holds.
type AgentSummary struct {
	AgentID    int64     `json:"agentId"`
	Language   string    `json:"language"`
	Timezone   string    `json:"timezone"`
	CreateTime time.Time `json:"createTime"`
	// FileCount is the number of live workspace files; LastUpdate the newest file change
	// (zero when the agent has no live file).
	FileCount  int       `json:"fileCount"`
	LastUpdate time.Time `json:"lastUpdate"`
}

// AgentQuery selects agents for ListAgents: by id (Only; nil means every agent), after a
// cursor (AfterID, exclusive) and at most Limit of them, in id order.
type AgentQuery struct {
	Only    []int64
	AfterID int64
	Limit   int
}

// MaxAgentPage is the most agents one ListAgents call returns.
const MaxAgentPage = 1000

// ListAgents lists the agents the store knows (those seen at least once), in id order.
// It seeds nothing. The caller scopes Only to what the reader may see.
func (s *Service) ListAgents(ctx context.Context, q AgentQuery) ([]AgentSummary, error) {
	if q.Limit <= 0 || q.Limit > MaxAgentPage {
		return nil, invalidf("limit must be 1 to %d, got %d", MaxAgentPage, q.Limit)
	}
	if q.Only != nil && len(q.Only) == 0 {
		return []AgentSummary{}, nil
	}
	db := s.db.WithContext(ctx).Where("id > ?", q.AfterID)
	if q.Only != nil {
		db = db.Where("id IN ?", q.Only)
	}
	var agents []store.Agent
	if err := db.Order("id").Limit(q.Limit).Find(&agents).Error; err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	out := make([]AgentSummary, 0, len(agents))
	if len(agents) == 0 {
		return out, nil
	}
	ids := make([]int64, len(agents))
	for i, a := range agents {
		ids[i] = a.ID
	}
	type stat struct {
		AgentID int64
		N       int
		Last    string
	}
	var stats []stat
	// MAX(update_time) comes back as text on SQLite; it is parsed below on both databases.
	if err := s.db.WithContext(ctx).Model(&store.WorkspaceFile{}).
		Select("agent_id, COUNT(*) AS n, MAX(update_time) AS last").
		Where("agent_id IN ? AND deleted = 0", ids).Group("agent_id").Scan(&stats).Error; err != nil {
		return nil, fmt.Errorf("count agent files: %w", err)
	}
	byID := make(map[int64]stat, len(stats))
	for _, st := range stats {
		byID[st.AgentID] = st
	}
	for _, a := range agents {
		st := byID[a.ID]
		out = append(out, AgentSummary{AgentID: a.ID, Language: a.Language, Timezone: a.Timezone,
			CreateTime: a.CreateTime, FileCount: st.N, LastUpdate: parseDBTime(st.Last)})
	}
	return out, nil
}

// parseDBTime reads a time an aggregate returned as text (SQLite, MySQL without parseTime
// for computed columns); an unreadable or empty value is the zero time.
func parseDBTime(s string) time.Time {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999-07:00", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}
