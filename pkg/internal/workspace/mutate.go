package workspace

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cenkalti/backoff/v5"
	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/store"
)

// Retries of an AnyVersion change that lost its compare-and-swap: at most maxCASRetries,
// with a jittered exponential backoff from casRetryInitial up to casRetryMax between them,
// so that writers contending for one file spread out instead of colliding again at once.
const (
	maxCASRetries   = 50
	casRetryInitial = 2 * time.Millisecond
	casRetryMax     = 250 * time.Millisecond
)

// state is what a mutation wants the file to become.
type state struct {
	content   string
	enabled   bool
	sortOrder int
	deleted   bool
	action    string
}

// mutation computes the next state from the current one (nil when the file does not exist).
// Reads it needs go through tx, the transaction the compare-and-swap runs in.
type mutation func(tx *gorm.DB, cur *store.WorkspaceFile) (state, error)

// errRetry is an internal signal: the compare-and-swap lost a race.
var errRetry = errors.New("cas retry")

// mutate applies fn atomically: read, check the expected version, keep history, then update
// only if the version is still the one read. With AnyVersion a lost race is retried.
func (s *Service) mutate(ctx context.Context, agentID int64, name string, expect int64, ch Change, fn mutation) (File, bool, error) {
	if err := ValidateName(name); err != nil {
		return File{}, false, err
	}
	if err := s.ensure(ctx, agentID); err != nil {
		return File{}, false, err
	}
	var wait *backoff.ExponentialBackOff
	for attempt := 1; ; attempt++ {
		f, created, err := s.mutateOnce(ctx, agentID, name, expect, ch, fn)
		if err == nil {
			s.notifyChanged(ctx, agentID, name, f.Version)
			s.afterWrite(ctx, agentID, &f, ch.Actor)
		}
		if !errors.Is(err, errRetry) {
			return f, created, err
		}
		// The caller's read lost the race: from now on the transaction reads the file.
		ch.Base = nil
		if expect == AnyVersion && attempt <= maxCASRetries {
			if wait == nil {
				wait = backoff.NewExponentialBackOff()
				wait.InitialInterval, wait.MaxInterval = casRetryInitial, casRetryMax
			}
			select {
			case <-ctx.Done():
				return File{}, false, ctx.Err()
			case <-time.After(wait.NextBackOff()):
			}
			continue
		}
		conflict := &ConflictError{Filename: name, Expected: expect, Attempts: attempt}
		if cur, lerr := s.load(s.db.WithContext(ctx), agentID, name); lerr == nil {
			conflict.Actual = cur.Version
		}
		return File{}, false, conflict
	}
}

// current is the file a change starts from: base, the caller's own read, when it has one
// (the compare-and-swap of the change catches a change since: the retry reads it again),
// else the file as the transaction reads it. exists is false when there is no such file.
func (s *Service) current(tx *gorm.DB, agentID int64, name string, base *File) (store.WorkspaceFile, bool, error) {
	if base != nil && base.Version == 0 {
		return store.WorkspaceFile{}, false, nil
	}
	if base != nil && base.id > 0 && base.AgentID == agentID && base.Filename == name {
		return store.WorkspaceFile{ID: base.id, AgentID: agentID, Filename: name, Content: base.Content,
			FileSize: base.FileSize, Enabled: base.Enabled, SortOrder: base.SortOrder, Version: base.Version,
			CreateTime: base.CreateTime, UpdateTime: base.UpdateTime,
			TokenCount: base.count.n, TokenEncoding: base.count.encoding, TokenVersion: base.count.version}, true, nil
	}
	cur, err := s.load(tx, agentID, name)
	if errors.Is(err, ErrNotFound) {
		return cur, false, nil
	}
	return cur, err == nil, err
}

func (s *Service) mutateOnce(ctx context.Context, agentID int64, name string, expect int64, ch Change, fn mutation) (File, bool, error) {
	var out File
	var created bool
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		out, created, err = s.mutateIn(tx, agentID, name, expect, ch, fn)
		return err
	})
	return out, created, err
}

// WriteTx is Write inside the caller's unit of work, so that a worker commits a file with
// its other effects (the summarizer: PROFILE.md and MEMORY.md with the daily append, the
// watermarks and the ledger row) or none of them. There is no retry: a lost compare-and-swap
// is a *ConflictError, and the caller's unit is to be rolled back. What follows a write (the
// change hooks, the budget check) does not run: the caller calls Committed with the returned
// file once its unit has committed. The agent must exist (EnsureAgent).
func (s *Service) WriteTx(tx *store.Tx, agentID int64, name, content string, expect int64, ch Change) (File, bool, error) {
	return s.inUnit(tx, agentID, name, expect, ch, writeState(content))
}

// AppendTx is Append inside the caller's unit of work, as WriteTx is Write: one attempt,
// no retry. A lost compare-and-swap (the file changed since ch.Base was read) is a
// *ConflictError: the caller rolls its unit back and tries again without Base. With
// ch.EffectKey applied before, it returns ErrAlreadyApplied having written nothing, and the
// caller's unit may go on. The caller calls Committed with the returned file after its commit.
func (s *Service) AppendTx(tx *store.Tx, agentID int64, name, text, header string, ch Change) (File, error) {
	f, _, err := s.inUnit(tx, agentID, name, AnyVersion, ch, appendState(text, header))
	return f, err
}

// inUnit is one attempt of a mutation in the caller's unit of work.
func (s *Service) inUnit(tx *store.Tx, agentID int64, name string, expect int64, ch Change, fn mutation) (File, bool, error) {
	if err := ValidateName(name); err != nil {
		return File{}, false, err
	}
	f, created, err := s.mutateIn(tx.Join(), agentID, name, expect, ch, fn)
	if errors.Is(err, errRetry) {
		err = &ConflictError{Filename: name, Expected: expect, Attempts: 1}
	}
	return f, created, err
}

// Committed runs what follows a committed write for a file WriteTx wrote: the change hooks
// (recall index, MCP watchers) and, for a budgeted core file, the budget annotation, metric
// and warning, as Write runs them.
func (s *Service) Committed(ctx context.Context, f *File, actor string) {
	s.notifyChanged(ctx, f.AgentID, f.Filename, f.Version)
	s.afterWrite(ctx, f.AgentID, f, actor)
}

// mutateIn is one attempt of a mutation inside tx.
func (s *Service) mutateIn(tx *gorm.DB, agentID int64, name string, expect int64, ch Change, fn mutation) (File, bool, error) {
	var out File
	var created bool
	err := func() error {
		if ch.InTx != nil {
			if err := ch.InTx(store.InTx(tx)); err != nil {
				return err
			}
		}
		cur, exists, err := s.current(tx, agentID, name, ch.Base)
		if err != nil {
			return err
		}
		switch {
		case expect == CreateOnly && exists:
			return &ConflictError{Filename: name, Expected: expect, Actual: cur.Version}
		case expect > 0 && !exists:
			return notFound(name)
		case expect > 0 && cur.Version != expect:
			return &ConflictError{Filename: name, Expected: expect, Actual: cur.Version}
		}
		var curp *store.WorkspaceFile
		if exists {
			curp = &cur
		}
		next, err := fn(tx, curp)
		if err != nil {
			return err
		}
		if !next.deleted && len(next.content) > s.maxBytes {
			return &TooLargeError{InvalidError{Msg: fmt.Sprintf("content of %s is %d bytes; at most %d allowed", name, len(next.content), s.maxBytes)}}
		}
		if !next.deleted && !utf8.ValidString(next.content) {
			// MySQL would refuse it and SQLite store it: refuse it on both.
			return invalidf("content of %s is not valid UTF-8", name)
		}
		if ch.EffectKey != "" {
			if err := tx.Exec("INSERT INTO mate_applied_effect (`key`, create_time) VALUES (?, ?)", ch.EffectKey, s.now().UTC()).Error; err != nil {
				if store.IsDuplicate(err) {
					return ErrAlreadyApplied
				}
				return fmt.Errorf("record effect %s: %w", ch.EffectKey, err)
			}
		}
		now := s.now().UTC()
		if !exists {
			if next.deleted {
				return notFound(name)
			}
			row := store.WorkspaceFile{AgentID: agentID, Filename: name, Content: next.content,
				FileSize: int64(len(next.content)), Enabled: next.enabled, SortOrder: next.sortOrder,
				Version: 1, CreateTime: now, UpdateTime: now}
			s.countInto(&row, nil)
			if err := tx.Exec("INSERT INTO mate_workspace_file (agent_id, filename, content, file_size, enabled, sort_order, version, "+
				"create_time, update_time, deleted, token_count, token_encoding, token_version) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, 0, ?, ?, ?)",
				agentID, name, row.Content, row.FileSize, row.Enabled, row.SortOrder, now, now,
				row.TokenCount, row.TokenEncoding, row.TokenVersion).Error; err != nil {
				if store.IsDuplicate(err) {
					return errRetry
				}
				return fmt.Errorf("create %s of agent %d: %w", name, agentID, err)
			}
			out, created = toFile(row), true
			return nil
		}
		// Plain statements rather than gorm's builders: an extraction appends to the daily note
		// on every event (issue 14).
		if err := tx.Exec("INSERT INTO mate_workspace_file_history (file_id, agent_id, filename, version, content, enabled, "+
			"action, actor, ref, create_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
			cur.ID, agentID, name, cur.Version, cur.Content, cur.Enabled, next.action, ch.Actor, ch.Ref, now).Error; err != nil {
			return fmt.Errorf("keep history of %s: %w", name, err)
		}
		deleted := int64(0)
		if next.deleted {
			deleted = cur.ID
		}
		was := cur
		cur.Content, cur.FileSize, cur.Enabled, cur.SortOrder = next.content, int64(len(next.content)), next.enabled, next.sortOrder
		cur.Version, cur.UpdateTime = cur.Version+1, now
		// The new version's token count goes in the same write (a budgeted file only).
		s.countInto(&cur, &was)
		res := tx.Exec("UPDATE mate_workspace_file SET content = ?, file_size = ?, enabled = ?, sort_order = ?, version = ?, "+
			"update_time = ?, deleted = ?, token_count = ?, token_encoding = ?, token_version = ? WHERE id = ? AND version = ? AND deleted = 0",
			cur.Content, cur.FileSize, cur.Enabled, cur.SortOrder, cur.Version, now, deleted,
			cur.TokenCount, cur.TokenEncoding, cur.TokenVersion, was.ID, was.Version)
		if res.Error != nil {
			return fmt.Errorf("update %s of agent %d: %w", name, agentID, res.Error)
		}
		if res.RowsAffected != 1 {
			return errRetry
		}
		out = toFile(cur)
		return nil
	}()
	return out, created, err
}

// defaultSortOrder places new files after the core ones.
const defaultSortOrder = 100

// Write creates or replaces a file's content. New files start disabled. It reports whether
// the file was created.
func (s *Service) Write(ctx context.Context, agentID int64, name, content string, expect int64, ch Change) (File, bool, error) {
	return s.mutate(ctx, agentID, name, expect, ch, writeState(content))
}

// writeState is Write's mutation: the content replaced, the flags kept.
func writeState(content string) mutation {
	return func(_ *gorm.DB, cur *store.WorkspaceFile) (state, error) {
		if cur == nil {
			return state{content: content, enabled: false, sortOrder: defaultSortOrder, action: "create"}, nil
		}
		return state{content: content, enabled: cur.Enabled, sortOrder: cur.SortOrder, action: "write"}, nil
	}
}

// Edit replaces oldText with newText (every occurrence with replaceAll, else exactly one
// and it must be unique). It reports the number of replacements.
func (s *Service) Edit(ctx context.Context, agentID int64, name, oldText, newText string, replaceAll bool, expect int64, ch Change) (File, int, error) {
	if oldText == "" {
		return File{}, 0, invalidf("oldText is empty; give the exact text to replace")
	}
	if oldText == newText {
		return File{}, 0, invalidf("oldText and newText are the same; nothing would change")
	}
	var n int
	f, _, err := s.mutate(ctx, agentID, name, expect, ch, func(_ *gorm.DB, cur *store.WorkspaceFile) (state, error) {
		if cur == nil {
			return state{}, notFound(name)
		}
		count := strings.Count(cur.Content, oldText)
		switch {
		case count == 0:
			return state{}, invalidf("oldText not found in %s; read the file and copy the exact text", name)
		case count > 1 && !replaceAll:
			return state{}, invalidf("oldText occurs %d times in %s; add surrounding text to make it unique or set replaceAll", count, name)
		}
		if replaceAll {
			n = count
		} else {
			n = 1
		}
		return state{content: strings.Replace(cur.Content, oldText, newText, n), enabled: cur.Enabled,
			sortOrder: cur.SortOrder, action: "edit"}, nil
	})
	return f, n, err
}

// Append adds text at the end of a file atomically (compare-and-swap on the version,
// retried under contention). When the file does not exist it is created, disabled, starting
// with header (e.g. "# 2026-04-03\n\n"). With ch.EffectKey set, the append happens once.
func (s *Service) Append(ctx context.Context, agentID int64, name, text, header string, ch Change) (File, error) {
	f, _, err := s.mutate(ctx, agentID, name, AnyVersion, ch, appendState(text, header))
	return f, err
}

// appendState is Append's mutation: text after the content (a blank line between), or a
// new disabled file starting with header.
func appendState(text, header string) mutation {
	return func(_ *gorm.DB, cur *store.WorkspaceFile) (state, error) {
		if cur == nil {
			return state{content: header + text, enabled: false, sortOrder: defaultSortOrder, action: "create"}, nil
		}
		content := cur.Content
		if content != "" && !strings.HasSuffix(content, "\n") {
			content += "\n"
		}
		if content != "" && !strings.HasSuffix(content, "\n\n") {
			content += "\n"
		}
		return state{content: content + text, enabled: cur.Enabled, sortOrder: cur.SortOrder, action: "append"}, nil
	}
}

// Delete removes a file logically.
func (s *Service) Delete(ctx context.Context, agentID int64, name string, expect int64, ch Change) error {
	_, _, err := s.mutate(ctx, agentID, name, expect, ch, func(_ *gorm.DB, cur *store.WorkspaceFile) (state, error) {
		if cur == nil {
			return state{}, notFound(name)
		}
		return state{content: cur.Content, enabled: cur.Enabled, sortOrder: cur.SortOrder, deleted: true, action: "delete"}, nil
	})
	return err
}

// SetFlags changes whether a file is injected into the system prompt and its order.
func (s *Service) SetFlags(ctx context.Context, agentID int64, name string, enabled *bool, sortOrder *int, expect int64, ch Change) (File, error) {
	f, _, err := s.mutate(ctx, agentID, name, expect, ch, func(_ *gorm.DB, cur *store.WorkspaceFile) (state, error) {
		if cur == nil {
			return state{}, notFound(name)
		}
		st := state{content: cur.Content, enabled: cur.Enabled, sortOrder: cur.SortOrder, action: "flags"}
		if enabled != nil {
			st.enabled = *enabled
		}
		if sortOrder != nil {
			st.sortOrder = *sortOrder
		}
		return st, nil
	})
	return f, err
}

// History lists previous versions of a live file, newest first.
func (s *Service) History(ctx context.Context, agentID int64, name string) ([]HistoryEntry, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	cur, err := s.load(s.db.WithContext(ctx), agentID, name)
	if err != nil {
		return nil, err
	}
	var rows []store.WorkspaceFileHistory
	if err := s.db.WithContext(ctx).Where("file_id = ?", cur.ID).Order("version DESC").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read history of %s: %w", name, err)
	}
	out := make([]HistoryEntry, 0, len(rows))
	for _, r := range rows {
		out = append(out, HistoryEntry{Version: r.Version, Content: r.Content, FileSize: int64(len(r.Content)),
			Enabled: r.Enabled, Action: r.Action, Actor: r.Actor, Ref: r.Ref, ReplacedAt: r.CreateTime})
	}
	return out, nil
}

// Rollback makes a previous version's content current again, as a new version (so the
// rollback itself can be rolled back).
func (s *Service) Rollback(ctx context.Context, agentID int64, name string, toVersion, expect int64, ch Change) (File, error) {
	if toVersion <= 0 {
		return File{}, invalidf("version must be a positive number, got %d", toVersion)
	}
	f, _, err := s.mutate(ctx, agentID, name, expect, ch, func(tx *gorm.DB, cur *store.WorkspaceFile) (state, error) {
		if cur == nil {
			return state{}, notFound(name)
		}
		if toVersion >= cur.Version {
			return state{}, invalidf("version %d is not a previous version of %s (current is %d)", toVersion, name, cur.Version)
		}
		var h store.WorkspaceFileHistory
		err := tx.Where("file_id = ? AND version = ?", cur.ID, toVersion).Take(&h).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return state{}, invalidf("version %d of %s is not in its history", toVersion, name)
		}
		if err != nil {
			return state{}, err
		}
		return state{content: h.Content, enabled: cur.Enabled, sortOrder: cur.SortOrder, action: "rollback"}, nil
	})
	return f, err
}

// Now is the service clock (shared with callers that date things, e.g. daily notes).
func (s *Service) Now() time.Time { return s.now() }
