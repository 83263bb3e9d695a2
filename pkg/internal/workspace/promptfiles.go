package workspace

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/store"
)

// PromptFiles lists the files injected into the system prompt, in injection order (MateClaw's
// prompt-files list).
func (s *Service) PromptFiles(ctx context.Context, agentID int64) ([]string, error) {
	files, err := s.List(ctx, agentID, "")
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, f := range files {
		if f.Enabled {
			out = append(out, f.Filename)
		}
	}
	return out, nil
}

// SetPromptFiles makes names, in this order, the files injected into the system prompt, as
// MateClaw's PUT prompt-files does: the i-th name is enabled with sort order i, every other
// file is disabled (keeping its sort order, so enabling it again puts it back where it was).
// All files change in one transaction, each change kept in history (action "flags"); a name
// that is not a live file is an error and changes nothing.
func (s *Service) SetPromptFiles(ctx context.Context, agentID int64, names []string, ch Change) ([]string, error) {
	pos := make(map[string]int, len(names))
	for i, n := range names {
		if err := ValidateName(n); err != nil {
			return nil, err
		}
		if _, dup := pos[n]; dup {
			return nil, invalidf("files lists %s twice", n)
		}
		pos[n] = i
	}
	if err := s.ensure(ctx, agentID); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			return s.setPromptFiles(tx, agentID, pos, ch)
		})
		if errors.Is(err, errRetry) && attempt < maxCASRetries {
			continue
		}
		if errors.Is(err, errRetry) {
			return nil, fmt.Errorf("set prompt files of agent %d: files kept changing concurrently; try again", agentID)
		}
		if err != nil {
			return nil, err
		}
		return s.PromptFiles(ctx, agentID)
	}
}

func (s *Service) setPromptFiles(tx *gorm.DB, agentID int64, pos map[string]int, ch Change) error {
	var rows []store.WorkspaceFile
	if err := tx.Where("agent_id = ? AND deleted = 0", agentID).Find(&rows).Error; err != nil {
		return fmt.Errorf("read files of agent %d: %w", agentID, err)
	}
	seen := make(map[string]bool, len(rows))
	for _, r := range rows {
		seen[r.Filename] = true
	}
	var missing []string
	for n := range pos {
		if !seen[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("%w: %s (files may only name existing files)", ErrNotFound, strings.Join(missing, ", "))
	}
	now := s.now().UTC()
	for _, r := range rows {
		enabled, order := false, r.SortOrder
		if i, ok := pos[r.Filename]; ok {
			enabled, order = true, i
		}
		if r.Enabled == enabled && r.SortOrder == order {
			continue
		}
		hist := store.WorkspaceFileHistory{FileID: r.ID, AgentID: agentID, Filename: r.Filename,
			Version: r.Version, Content: r.Content, Enabled: r.Enabled, Action: "flags",
			Actor: ch.Actor, Ref: ch.Ref, CreateTime: now}
		if err := tx.Create(&hist).Error; err != nil {
			return fmt.Errorf("keep history of %s: %w", r.Filename, err)
		}
		res := tx.Model(&store.WorkspaceFile{}).Where("id = ? AND version = ? AND deleted = 0", r.ID, r.Version).
			Updates(map[string]any{"enabled": enabled, "sort_order": order, "version": r.Version + 1, "update_time": now})
		if res.Error != nil {
			return fmt.Errorf("update %s of agent %d: %w", r.Filename, agentID, res.Error)
		}
		if res.RowsAffected != 1 {
			return errRetry
		}
	}
	return nil
}
