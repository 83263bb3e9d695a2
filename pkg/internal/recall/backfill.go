package recall

import (
	"context"
	"fmt"

	"github.com/matememory/matememory/pkg/internal/store"
)

// BackfillReport sums up a Backfill.
type BackfillReport struct {
	Files, Indexed, Removed, Embedded, Unchanged, Pending, Chunks, EmbeddedTexts int
}

func (r BackfillReport) String() string {
	return fmt.Sprintf("%d files: %d indexed, %d removed, %d embeddings completed, %d unchanged; %d chunks; %d texts embedded; %d files awaiting embeddings",
		r.Files, r.Indexed, r.Removed, r.Embedded, r.Unchanged, r.Chunks, r.EmbeddedTexts, r.Pending)
}

// Backfill syncs every live file (of one agent, or all when agentID is 0) and removes the
// chunks of files that no longer exist. It is idempotent: a second run reports everything
// unchanged. progress, when set, is called after each file.
func (i *Indexer) Backfill(ctx context.Context, agentID int64, progress func(done, total int, r BackfillReport)) (BackfillReport, error) {
	type key struct {
		AgentID  int64
		Filename string
	}
	var keys []key
	q := i.db.WithContext(ctx).Model(&store.WorkspaceFile{}).Select("agent_id", "filename").Where("deleted = 0")
	if agentID != 0 {
		q = q.Where("agent_id = ?", agentID)
	}
	if err := q.Order("agent_id, filename").Scan(&keys).Error; err != nil {
		return BackfillReport{}, fmt.Errorf("list workspace files: %w", err)
	}
	live := map[key]bool{}
	for _, k := range keys {
		live[k] = true
	}
	var indexed []key
	q = i.db.WithContext(ctx).Model(&store.RecallFile{}).Select("agent_id", "filename")
	if agentID != 0 {
		q = q.Where("agent_id = ?", agentID)
	}
	if err := q.Scan(&indexed).Error; err != nil {
		return BackfillReport{}, fmt.Errorf("list indexed files: %w", err)
	}
	for _, k := range indexed {
		if !live[k] {
			keys = append(keys, k)
		}
	}
	var rep BackfillReport
	for n, k := range keys {
		res, err := i.Sync(ctx, k.AgentID, k.Filename)
		if err != nil {
			return rep, err
		}
		rep.Files++
		rep.Chunks += res.Chunks
		rep.EmbeddedTexts += res.EmbeddedTexts
		switch res.Outcome {
		case Indexed:
			rep.Indexed++
		case Removed:
			rep.Removed++
		case Embedded:
			rep.Embedded++
		default:
			rep.Unchanged++
		}
		if res.EmbedPending {
			rep.Pending++
		}
		if progress != nil {
			progress(n+1, len(keys), rep)
		}
	}
	return rep, nil
}
