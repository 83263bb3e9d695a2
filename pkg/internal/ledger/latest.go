package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/matememory/matememory/pkg/internal/store"
)

// Latest returns the newest run of each of agentIDs that has one (one query: lists of
// agents show it).
func (l *Ledger) Latest(ctx context.Context, agentIDs []int64) (map[int64]Run, error) {
	out := make(map[int64]Run, len(agentIDs))
	if len(agentIDs) == 0 {
		return out, nil
	}
	var rows []store.MemoryRun
	newest := l.db.Model(&store.MemoryRun{}).Select("MAX(id)").Where("agent_id IN ?", agentIDs).Group("agent_id")
	if err := l.db.WithContext(ctx).Where("id IN (?)", newest).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("latest runs of %d agents: %w", len(agentIDs), err)
	}
	for _, r := range rows {
		out[r.AgentID] = fromRow(r)
	}
	return out, nil
}

// Point is a run as a chart needs it.
type Point struct {
	Kind       string
	Status     string
	LatencyMs  int64
	CreateTime time.Time
}

// Points returns up to limit runs of every agent created at or after since, newest first,
// with only what charts need (no reasons, no file lists).
func (l *Ledger) Points(ctx context.Context, since time.Time, limit int) ([]Point, error) {
	var out []Point
	err := l.db.WithContext(ctx).Model(&store.MemoryRun{}).Select("kind", "status", "latency_ms", "create_time").
		Where("create_time >= ?", since.UTC()).Order("id DESC").Limit(limit).Scan(&out).Error
	if err != nil {
		return nil, fmt.Errorf("run points since %s: %w", since.Format(time.RFC3339), err)
	}
	return out, nil
}
