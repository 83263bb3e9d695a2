package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/matememory/matememory/pkg/api"

	"github.com/matememory/matememory/pkg/internal/store"
)

// Runs returns the agent's runs among runIDs, by run id (ids of other agents' runs, or of
// none, are left out). It reads in chunks, so a file's blame with thousands of changes costs
// a few queries.
func (l *Ledger) Runs(ctx context.Context, agentID int64, runIDs []string) (map[string]Run, error) {
	out := make(map[string]Run, len(runIDs))
	const chunk = 500
	for start := 0; start < len(runIDs); start += chunk {
		ids := runIDs[start:min(start+chunk, len(runIDs))]
		var rows []store.MemoryRun
		if err := l.db.WithContext(ctx).Where("agent_id = ? AND run_id IN ?", agentID, ids).Find(&rows).Error; err != nil {
			return nil, fmt.Errorf("read %d runs of agent %d: %w", len(ids), agentID, err)
		}
		for _, r := range rows {
			out[r.RunID] = fromRow(r)
		}
	}
	return out, nil
}

// fromRow is a ledger row as a Run.
func fromRow(r store.MemoryRun) Run {
	run := Run{RunID: r.RunID, Kind: r.Kind, AgentID: r.AgentID, EventID: r.EventID, Status: api.RunStatus(r.Status),
		Reason: r.Reason, Model: r.Model, Provider: r.Provider, TokensIn: r.TokensIn, TokensOut: r.TokensOut,
		LatencyMs: r.LatencyMs, Attempt: r.Attempt, CreateTime: r.CreateTime}
	_ = json.Unmarshal([]byte(r.Conversations), &run.Conversations)
	_ = json.Unmarshal([]byte(r.FilesChanged), &run.FilesChanged)
	return run
}
