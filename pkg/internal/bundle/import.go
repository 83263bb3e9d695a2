package bundle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"github.com/matememory/matememory/pkg/internal/fault"
	"io"
	"os"

	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/internal/cronjob"
	"github.com/matememory/matememory/pkg/internal/store"
)

// Import modes.
const (
	// ModeEmpty imports into an agent that holds nothing yet (never used), or that holds
	// exactly this bundle already (a repeated import: 0 changes).
	ModeEmpty = "empty"
	// ModeMerge adds what the target lacks and fast-forwards files whose current version is
	// in the bundle's history; anything else that differs is a conflict, reported and kept.
	ModeMerge = "merge"
)

// ImportOptions are an import's options.
type ImportOptions struct {
	// Mode is ModeEmpty (default) or ModeMerge.
	Mode string
	// DryRun validates and computes the report, and writes nothing.
	DryRun bool
}

// MaxListedConflicts bounds the conflicts an import report lists (all are counted).
const MaxListedConflicts = 1000

// Conflict is a record of the bundle that was not applied because the target holds
// something else; the target's is kept.
type Conflict struct {
	Kind          string `json:"kind" example:"file"`
	Name          string `json:"name" example:"MEMORY.md" doc:"The filename, cron job name, run id, or \"settings\"."`
	Reason        string `json:"reason"`
	TargetVersion int64  `json:"targetVersion,omitempty"`
	BundleVersion int64  `json:"bundleVersion,omitempty"`
}

// ImportReport says what an import did (or, on a dry run, would do).
type ImportReport struct {
	AgentID       int64      `json:"agentId"`
	SourceAgentID int64      `json:"sourceAgentId" doc:"The agent the bundle was exported from."`
	Mode          string     `json:"mode"`
	DryRun        bool       `json:"dryRun"`
	FormatVersion int        `json:"formatVersion"`
	Records       Counts     `json:"records" doc:"The records in the bundle."`
	Created       Counts     `json:"created" doc:"Records written that the target did not have."`
	Updated       Counts     `json:"updated" doc:"Files fast-forwarded to the bundle's newer version."`
	Unchanged     Counts     `json:"unchanged" doc:"Records the target already held as they are."`
	Changes       int64      `json:"changes" doc:"Created plus updated: 0 when the same bundle is imported again."`
	ConflictCount int        `json:"conflictCount"`
	Conflicts     []Conflict `json:"conflicts" doc:"The first 1000 conflicts."`

	byKind Counts // conflicts of each kind
}

func (r *ImportReport) conflict(c Conflict) {
	r.ConflictCount++
	r.byKind.add(c.Kind)
	if len(r.Conflicts) < MaxListedConflicts {
		r.Conflicts = append(r.Conflicts, c)
	}
}

func total(c Counts) int64 { return c.Agent + c.File + c.History + c.Cron + c.Message + c.Run }

// errRollback ends a dry run's transaction.
var errRollback = errors.New("dry run")

// Import reads a bundle from r and imports it into agentID: the whole bundle is spooled
// and validated first (format, version, every record, checksums), then applied in one
// transaction, so a bad bundle writes nothing. The recall indexer is told of every file
// and conversation written, after the commit.
func (s *Service) Import(ctx context.Context, agentID int64, r io.Reader, o ImportOptions) (ImportReport, error) {
	rep := ImportReport{AgentID: agentID, Mode: o.Mode, DryRun: o.DryRun, Conflicts: []Conflict{}}
	if rep.Mode == "" {
		rep.Mode = ModeEmpty
	}
	if rep.Mode != ModeEmpty && rep.Mode != ModeMerge {
		return rep, invalidf("mode %q is not an import mode; accepted: %s (an agent never used), %s", o.Mode, ModeEmpty, ModeMerge)
	}
	if agentID <= 0 {
		return rep, invalidf("agentId must be a positive number, got %d", agentID)
	}
	f, m, err := s.spool(r)
	if f != nil {
		defer func() { f.Close(); os.Remove(f.Name()) }()
	}
	if err != nil {
		return rep, err
	}
	rep.SourceAgentID, rep.FormatVersion, rep.Records = m.AgentID, m.Version, m.Counts

	var a applied
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		fresh, err := empty(tx, agentID)
		if err != nil {
			return err
		}
		if rep.Mode == ModeEmpty && !fresh {
			// Only a repeat of the same import passes: nothing to change, nothing in conflict.
			if err := s.apply(tx, f, agentID, false, &rep, &a); err != nil {
				return err
			}
			held, err := s.count(tx, agentID, m.Includes)
			if err != nil {
				return err
			}
			// The first import met the runs another agent of this deployment owns (run ids
			// are unique): those are the only conflicts a repeat may meet again.
			want := m.Counts
			want.Run -= rep.byKind.Run
			if rep.Changes > 0 || int64(rep.ConflictCount) > rep.byKind.Run || held != want {
				return &Error{Kind: fault.ErrConflict, Msg: fmt.Sprintf("agent %d is not empty (it was used, or holds another import): "+
					"importing would change %d records and find %d conflicts, and the agent holds %+v against the bundle's %+v; "+
					"import with mode=merge, or into an agent id never used", agentID, rep.Changes, rep.ConflictCount, held, m.Counts)}
			}
			return nil
		}
		if err := s.apply(tx, f, agentID, fresh, &rep, &a); err != nil {
			return err
		}
		if o.DryRun {
			return errRollback
		}
		return nil
	})
	if errors.Is(err, errRollback) {
		err = nil
	} else if err == nil && !o.DryRun {
		s.notify(ctx, agentID, &a)
	}
	return rep, err
}

// empty reports whether the agent holds nothing at all.
func empty(tx *gorm.DB, agentID int64) (bool, error) {
	for _, q := range []string{
		"SELECT COUNT(*) FROM mate_agent WHERE id = ?",
		"SELECT COUNT(*) FROM mate_workspace_file WHERE agent_id = ?",
		"SELECT COUNT(*) FROM mate_cron_job WHERE agent_id = ?",
		"SELECT COUNT(*) FROM mate_message WHERE agent_id = ?",
		"SELECT COUNT(*) FROM mate_memory_run WHERE agent_id = ?",
	} {
		var n int64
		if err := tx.Raw(q, agentID).Scan(&n).Error; err != nil {
			return false, fmt.Errorf("check agent %d is empty: %w", agentID, err)
		}
		if n > 0 {
			return false, nil
		}
	}
	return true, nil
}

// applied is what an import wrote that others must be told of after the commit.
type applied struct {
	files []fileVersion
	convs map[string]int64
}

type fileVersion struct {
	name    string
	version int64
}

func (s *Service) notify(ctx context.Context, agentID int64, a *applied) {
	if s.fileHook != nil {
		for _, f := range a.files {
			s.fileHook(ctx, agentID, f.name, f.version)
		}
	}
	if s.convHook != nil {
		for c, last := range a.convs {
			s.convHook(ctx, agentID, c, last)
		}
	}
}

// importer applies one validated bundle inside a transaction.
type importer struct {
	s       *Service
	tx      *gorm.DB
	agentID int64
	fresh   bool // the target held nothing: no lookups needed
	rep     *ImportReport
	a       *applied
	path    string
	// the current file group
	file      *store.WorkspaceFile // the target's row, nil when its history is skipped
	versions  map[int64]bool       // versions the target's file has in history
	skipGroup bool
}

func (s *Service) apply(tx *gorm.DB, f *os.File, agentID int64, fresh bool, rep *ImportReport, a *applied) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read the spooled bundle: %w", err)
	}
	*a = applied{convs: map[string]int64{}}
	im := &importer{s: s, tx: tx, agentID: agentID, fresh: fresh, rep: rep, a: a, path: f.Name()}
	sc := s.scanner(f)
	var off int64
	for sc.Scan() {
		b := sc.Bytes()
		off += int64(len(b)) + 1
		kind, _ := peek(b) // validated
		if err := im.record(kind, b, off); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read the spooled bundle: %w", err)
	}
	rep.Changes = total(rep.Created) + total(rep.Updated)
	return nil
}

func (im *importer) record(kind string, b []byte, next int64) error {
	switch kind {
	case KindAgent:
		var r Agent
		_ = strict(b, &r)
		return im.agent(r)
	case KindFile:
		var r File
		_ = strict(b, &r)
		return im.fileRecord(r, next)
	case KindHistory:
		var r History
		_ = strict(b, &r)
		return im.history(r)
	case KindCron:
		var r Cron
		_ = strict(b, &r)
		return im.cron(r)
	case KindMessage:
		var r Message
		_ = strict(b, &r)
		return im.message(r)
	case KindRun:
		var r Run
		_ = strict(b, &r)
		return im.run(r)
	}
	return nil
}

func (im *importer) agent(r Agent) error {
	var cur []store.Agent
	if !im.fresh {
		if err := im.tx.Raw("SELECT * FROM mate_agent WHERE id = ?", im.agentID).Scan(&cur).Error; err != nil {
			return fmt.Errorf("read agent %d: %w", im.agentID, err)
		}
	}
	if len(cur) == 0 {
		// The agent's row makes it known: it is not seeded with default files afterwards.
		if err := im.tx.Create(&store.Agent{ID: im.agentID, Language: r.Language, Timezone: r.Timezone, CreateTime: r.CreateTime}).Error; err != nil {
			return fmt.Errorf("create agent %d: %w", im.agentID, err)
		}
		im.rep.Created.Agent++
		return nil
	}
	if c := cur[0]; c.Language != r.Language || c.Timezone != r.Timezone {
		im.rep.conflict(Conflict{Kind: KindAgent, Name: "settings", Reason: fmt.Sprintf(
			"the target's settings (language %s, timezone %s) differ from the bundle's (%s, %s); kept the target's (change them with PATCH …/agents/{agentId})",
			c.Language, c.Timezone, r.Language, r.Timezone)})
		return nil
	}
	im.rep.Unchanged.Agent++
	return nil
}

func (im *importer) fileRecord(r File, next int64) error {
	im.file, im.versions, im.skipGroup = nil, nil, false
	var cur store.WorkspaceFile
	found := false
	if !im.fresh {
		var rows []store.WorkspaceFile
		if err := im.tx.Where("agent_id = ? AND filename = ? AND deleted = 0", im.agentID, r.Filename).Find(&rows).Error; err != nil {
			return fmt.Errorf("read %s of agent %d: %w", r.Filename, im.agentID, err)
		}
		for _, row := range rows {
			if row.Filename == r.Filename { // case-insensitive collation guard
				cur, found = row, true
			}
		}
	}
	switch {
	case !found:
		row := store.WorkspaceFile{AgentID: im.agentID, Filename: r.Filename, Content: r.Content, FileSize: r.FileSize,
			Enabled: r.Enabled, SortOrder: r.SortOrder, Version: r.Version, CreateTime: r.CreateTime, UpdateTime: r.UpdateTime}
		if err := im.tx.Create(&row).Error; err != nil {
			return fmt.Errorf("create %s of agent %d: %w", r.Filename, im.agentID, err)
		}
		im.rep.Created.File++
		im.file, im.versions = &row, map[int64]bool{}
		im.a.files = append(im.a.files, fileVersion{r.Filename, r.Version})
		return nil
	case cur.Version == r.Version && cur.Content == r.Content && cur.Enabled == r.Enabled && cur.SortOrder == r.SortOrder:
		im.rep.Unchanged.File++
		return im.openGroup(cur)
	case cur.Version > r.Version:
		return im.fileConflict(r, cur, fmt.Sprintf("the target's version %d is newer than the bundle's %d; kept the target's", cur.Version, r.Version))
	case cur.Version == r.Version:
		return im.fileConflict(r, cur, fmt.Sprintf("the target and the bundle both have version %d with different content or flags: a different lineage; kept the target's", cur.Version))
	}
	// The bundle's file is newer: it may replace the target's only if the target's version
	// is one of the bundle's own previous versions (the same lineage).
	ok, err := im.inLineage(cur, next)
	if err != nil {
		return err
	}
	if !ok {
		return im.fileConflict(r, cur, fmt.Sprintf("the target's version %d is not among the bundle's previous versions of the file (export with history to carry them): a different lineage; kept the target's", cur.Version))
	}
	res := im.tx.Model(&store.WorkspaceFile{}).Where("id = ? AND version = ?", cur.ID, cur.Version).Updates(map[string]any{
		"content": r.Content, "file_size": r.FileSize, "enabled": r.Enabled, "sort_order": r.SortOrder,
		"version": r.Version, "update_time": r.UpdateTime})
	if res.Error != nil {
		return fmt.Errorf("update %s of agent %d: %w", r.Filename, im.agentID, res.Error)
	}
	if res.RowsAffected == 0 {
		return &Error{Kind: fault.ErrConflict, Msg: fmt.Sprintf("%s of agent %d changed while it was imported; nothing was imported, retry", r.Filename, im.agentID)}
	}
	im.rep.Updated.File++
	im.a.files = append(im.a.files, fileVersion{r.Filename, r.Version})
	return im.openGroup(cur)
}

func (im *importer) fileConflict(r File, cur store.WorkspaceFile, reason string) error {
	im.skipGroup = true
	im.rep.conflict(Conflict{Kind: KindFile, Name: r.Filename, Reason: reason, TargetVersion: cur.Version, BundleVersion: r.Version})
	return nil
}

// openGroup makes the file's history records go to the target's row, next to the versions
// it has.
func (im *importer) openGroup(cur store.WorkspaceFile) error {
	var vs []int64
	if err := im.tx.Model(&store.WorkspaceFileHistory{}).Where("file_id = ?", cur.ID).Pluck("version", &vs).Error; err != nil {
		return fmt.Errorf("read history of %s of agent %d: %w", cur.Filename, im.agentID, err)
	}
	im.file, im.versions = &cur, make(map[int64]bool, len(vs))
	for _, v := range vs {
		im.versions[v] = true
	}
	return nil
}

// inLineage reads ahead, from offset next of the spooled bundle, the history records of
// the file just read, for the target's version with the target's content.
func (im *importer) inLineage(cur store.WorkspaceFile, next int64) (bool, error) {
	f, err := os.Open(im.path)
	if err != nil {
		return false, fmt.Errorf("read the spooled bundle: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(next, io.SeekStart); err != nil {
		return false, fmt.Errorf("read the spooled bundle: %w", err)
	}
	want := sha256.Sum256([]byte(cur.Content))
	sc := im.s.scanner(f)
	for sc.Scan() {
		b := sc.Bytes()
		if kind, _ := peek(b); kind != KindHistory {
			break
		}
		var h History
		_ = strict(b, &h)
		if h.Version == cur.Version {
			got := sha256.Sum256([]byte(h.Content))
			return bytes.Equal(got[:], want[:]), nil
		}
	}
	return false, sc.Err()
}

func (im *importer) history(r History) error {
	if im.skipGroup || im.file == nil {
		return nil
	}
	if im.versions[r.Version] {
		var kept []string
		if err := im.tx.Model(&store.WorkspaceFileHistory{}).Where("file_id = ? AND version = ?", im.file.ID, r.Version).
			Pluck("content", &kept).Error; err != nil {
			return fmt.Errorf("read history of %s of agent %d: %w", r.Filename, im.agentID, err)
		}
		if len(kept) > 0 && kept[0] != r.Content {
			im.rep.conflict(Conflict{Kind: KindHistory, Name: r.Filename, BundleVersion: r.Version, Reason: fmt.Sprintf(
				"the target's history has version %d with other content; kept the target's", r.Version)})
			return nil
		}
		im.rep.Unchanged.History++
		return nil
	}
	row := store.WorkspaceFileHistory{FileID: im.file.ID, AgentID: im.agentID, Filename: r.Filename, Version: r.Version,
		Content: r.Content, Enabled: r.Enabled, Action: r.Action, Actor: r.Actor, Ref: r.Ref, CreateTime: r.CreateTime}
	if err := im.tx.Create(&row).Error; err != nil {
		return fmt.Errorf("add history of %s of agent %d: %w", r.Filename, im.agentID, err)
	}
	im.versions[r.Version] = true
	im.rep.Created.History++
	return nil
}

func (im *importer) cron(r Cron) error {
	if !im.fresh {
		var rows []store.CronJob
		if err := im.tx.Where("agent_id = ? AND name = ? AND deleted = 0", im.agentID, r.Name).Find(&rows).Error; err != nil {
			return fmt.Errorf("read cron job %q of agent %d: %w", r.Name, im.agentID, err)
		}
		for _, c := range rows {
			if c.Name != r.Name {
				continue
			}
			if c.CronExpression == r.CronExpression && c.Timezone == r.Timezone && c.TaskType == r.TaskType &&
				c.TriggerMessage == r.TriggerMessage && c.RequestBody == r.RequestBody && c.Enabled == r.Enabled {
				im.rep.Unchanged.Cron++
				return nil
			}
			im.rep.conflict(Conflict{Kind: KindCron, Name: r.Name, Reason: "the target has a cron job of that name with another schedule or task; kept the target's"})
			return nil
		}
	}
	next := r.NextRunTime
	if next != nil && next.Before(im.s.now()) {
		// A slot missed while the bundle sat on a shelf is not fired at import.
		if sched, err := cronjob.Parse(r.CronExpression, r.Timezone); err == nil && r.Enabled {
			t := sched.Next(im.s.now()).UTC()
			next = &t
		}
	}
	row := store.CronJob{Name: r.Name, CronExpression: r.CronExpression, Timezone: r.Timezone, AgentID: im.agentID,
		TaskType: r.TaskType, TriggerMessage: r.TriggerMessage, RequestBody: r.RequestBody, Enabled: r.Enabled,
		NextRunTime: next, LastRunTime: r.LastRunTime, CreateTime: r.CreateTime, UpdateTime: r.UpdateTime}
	if err := im.tx.Create(&row).Error; err != nil {
		return fmt.Errorf("create cron job %q of agent %d: %w", r.Name, im.agentID, err)
	}
	im.rep.Created.Cron++
	return nil
}

func (im *importer) message(r Message) error {
	if !im.fresh {
		// A message has no identity but what it says, who said it, where and when.
		var rows []store.Message
		if err := im.tx.Where("agent_id = ? AND conversation_id = ? AND role = ? AND create_time = ?",
			im.agentID, r.ConversationID, r.Role, r.CreateTime).Find(&rows).Error; err != nil {
			return fmt.Errorf("read messages of agent %d: %w", im.agentID, err)
		}
		for _, m := range rows {
			if m.ConversationID == r.ConversationID && m.Content == r.Content && m.ToolCalls == r.ToolCalls &&
				m.ToolCallID == r.ToolCallID && m.Name == r.Name {
				im.rep.Unchanged.Message++
				return nil
			}
		}
	}
	row := store.Message{AgentID: im.agentID, ConversationID: r.ConversationID, Role: r.Role, Content: r.Content,
		ToolCalls: r.ToolCalls, ToolCallID: r.ToolCallID, Name: r.Name, CreateTime: r.CreateTime}
	if err := im.tx.Create(&row).Error; err != nil {
		return fmt.Errorf("add a message of agent %d: %w", im.agentID, err)
	}
	im.rep.Created.Message++
	if row.ID > im.a.convs[r.ConversationID] {
		im.a.convs[r.ConversationID] = row.ID
	}
	return nil
}

func (im *importer) run(r Run) error {
	// Run ids are unique across the deployment: a run of another agent keeps its id.
	var rows []store.MemoryRun
	if err := im.tx.Where("run_id = ?", r.RunID).Find(&rows).Error; err != nil {
		return fmt.Errorf("read run %s: %w", r.RunID, err)
	}
	if len(rows) > 0 {
		if rows[0].AgentID == im.agentID {
			im.rep.Unchanged.Run++
			return nil
		}
		// Whose it is stays unsaid: the caller may act for this agent only.
		im.rep.conflict(Conflict{Kind: KindRun, Name: r.RunID, Reason: fmt.Sprintf("run id %s is already taken in this deployment (run ids are unique); not copied", r.RunID)})
		return nil
	}
	row := store.MemoryRun{RunID: r.RunID, Kind: r.RunKind, AgentID: im.agentID, EventID: r.EventID, Conversations: r.Conversations,
		Status: r.Status, Reason: r.Reason, Model: r.Model, Provider: r.Provider, TokensIn: r.TokensIn, TokensOut: r.TokensOut,
		LatencyMs: r.LatencyMs, FilesChanged: r.FilesChanged, Attempt: r.Attempt, CreateTime: r.CreateTime}
	if err := im.tx.Create(&row).Error; err != nil {
		return fmt.Errorf("add run %s of agent %d: %w", r.RunID, im.agentID, err)
	}
	im.rep.Created.Run++
	return nil
}
