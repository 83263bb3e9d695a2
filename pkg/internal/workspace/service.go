// Package workspace is the agent's file-based memory (mate_workspace_file): core files,
// daily notes, history and the system-prompt injection. Every write is compare-and-swap on
// the file's version, and every change keeps the previous content in history.
package workspace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/matememory/matememory/pkg/api"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/promptsafe"
	"github.com/matememory/matememory/pkg/internal/store"
)

// Version preconditions for writes.
const (
	// AnyVersion writes whatever the current version is (still atomic: the service retries
	// its own compare-and-swap when another writer lands in between).
	AnyVersion int64 = -1
	// CreateOnly succeeds only if the file does not exist yet.
	CreateOnly int64 = 0
)

// ErrAlreadyApplied is returned when an effect key was applied before (an idempotent no-op).
var ErrAlreadyApplied = errors.New("effect already applied")

// Change says who makes a change and on behalf of which run or event.
type Change struct {
	Actor string
	Ref   string
	// EffectKey, when set, makes the change happen at most once: a second change with the
	// same key returns ErrAlreadyApplied and writes nothing.
	EffectKey string
	// InTx, when set, runs first in the change's unit of work; an error from it aborts the
	// change and is returned. The emergence worker uses it to fence its write against a lost
	// lease (fence.InTx). A worker with more to commit than one change opens the unit itself
	// and calls WriteTx and AppendTx in it (the summarizer).
	InTx func(tx *store.Tx) error
	// Base, when set, is the file as the caller read it (a File of version 0: there was none):
	// the change starts from it instead of reading the file again in its transaction. The
	// compare-and-swap still holds: had the file changed since, the change is retried from
	// a fresh read (AnyVersion) or fails with a conflict.
	Base *File
}

// File is a workspace file: the wire type api.File and the row it was read from, so that a
// change starting from it (Change.Base) need not read it again.
type File struct {
	api.File

	// id is the row's id (0 when not read from the database).
	id int64
	// count is the content's token count as the row stores it (see FileTokens).
	count tokenCount
}

// Info is a file without its content (for listings).
type Info = api.FileInfo

// HistoryEntry is one previous version of a file.
type HistoryEntry = api.HistoryEntry

// AgentHook runs inside the transaction that records a newly seen agent, so that what it
// creates (a cron job, say) exists exactly when the agent does.
type AgentHook func(tx *gorm.DB, agent store.Agent) error

// Service is the workspace file service.
type Service struct {
	db       *gorm.DB
	maxBytes int
	language string
	timezone string
	now      func() time.Time
	hooks    []AgentHook
	changed  []ChangeHook
	seen     sync.Map // agent id → struct{}: agents known to be seeded
	// forgets counts Forget calls: a seed that read the agent before one does not record
	// it as seen (its read may be from before the erasure that Forget follows).
	forgets atomic.Uint64

	budgets       Budgets
	budgetReg     prometheus.Registerer
	budgetMetrics budgetMetrics
	log           *slog.Logger
}

// Option configures a Service.
type Option func(*Service)

// WithMaxBytes caps file content (default 1 MiB).
func WithMaxBytes(n int) Option { return func(s *Service) { s.maxBytes = n } }

// WithDefaults sets the language ("zh"/"en") of seeded files and the default agent time zone.
func WithDefaults(language, timezone string) Option {
	return func(s *Service) { s.language, s.timezone = language, timezone }
}

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// WithAgentHook adds a hook run when an agent is first seen.
func WithAgentHook(h AgentHook) Option { return func(s *Service) { s.hooks = append(s.hooks, h) } }

// New builds the service.
func New(db *gorm.DB, opts ...Option) *Service {
	s := &Service{db: db, maxBytes: 1 << 20, language: "zh", timezone: "Local", now: time.Now,
		budgets: Budgets{Memory: DefaultMemoryBudget, Profile: DefaultProfileBudget}}
	for _, o := range opts {
		o(s)
	}
	s.tokenizer()
	s.budgetMetrics = newBudgetMetrics(s.budgetReg)
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// MaxBytes is the content size limit.
func (s *Service) MaxBytes() int { return s.maxBytes }

// Language is the default language ("zh" or "en") of newly seen agents.
func (s *Service) Language() string { return s.language }

// EnsureAgent records the agent and seeds its core files and hooks the first time it is
// seen, and returns its current settings (read afresh: another process may have changed its
// language or time zone).
func (s *Service) EnsureAgent(ctx context.Context, agentID int64) (store.Agent, error) {
	a, _, err := s.EnsureAgentBudgets(ctx, agentID)
	return a, err
}

// EnsureAgentBudgets is EnsureAgent with the agent's core-file budgets, read in the same
// statement (every extraction reads both).
func (s *Service) EnsureAgentBudgets(ctx context.Context, agentID int64) (store.Agent, AgentBudgets, error) {
	if _, seen := s.seen.Load(agentID); !seen {
		return s.seed(ctx, agentID)
	}
	a, b, found, err := s.readAgent(s.db.WithContext(ctx), agentID)
	if err != nil {
		return store.Agent{}, b, fmt.Errorf("read agent %d: %w", agentID, err)
	}
	if !found {
		// Erased since this process saw it, its erasure's notice not here yet: the id
		// starts anew, as after the notice.
		s.Forget(agentID)
		return s.seed(ctx, agentID)
	}
	return a, b, nil
}

// Forget drops the fact that the agent was seen (its erasure): the next use of the id reads
// it again and, finding none, records it anew with its default core files.
func (s *Service) Forget(agentID int64) {
	s.forgets.Add(1)
	s.seen.Delete(agentID)
}

// agentRow is an agent's row with its budget overrides (0: the default).
type agentRow struct {
	store.Agent   `gorm:"embedded"`
	BudgetMemory  int
	BudgetProfile int
}

// readAgent reads an agent and its budgets in one statement (plain SQL: every extraction
// reads its agent, issue 14).
func (s *Service) readAgent(db *gorm.DB, agentID int64) (store.Agent, AgentBudgets, bool, error) {
	var r agentRow
	res := db.Raw("SELECT a.*, COALESCE(b.memory_tokens, 0) AS budget_memory, COALESCE(b.profile_tokens, 0) AS budget_profile "+
		"FROM mate_agent a LEFT JOIN mate_agent_budget b ON b.agent_id = a.id WHERE a.id = ?", agentID).Scan(&r)
	return r.Agent, s.budgetsFrom(r.BudgetMemory, r.BudgetProfile), res.RowsAffected > 0, res.Error
}

// ensure seeds the agent if this process has not seen it yet. Only the fact that an agent
// exists is cached: only an erasure changes it, and every process is told (Forget).
func (s *Service) ensure(ctx context.Context, agentID int64) error {
	if _, seen := s.seen.Load(agentID); seen {
		return nil
	}
	_, _, err := s.seed(ctx, agentID)
	return err
}

func (s *Service) seed(ctx context.Context, agentID int64) (store.Agent, AgentBudgets, error) {
	if agentID <= 0 {
		return store.Agent{}, AgentBudgets{}, invalidf("agentId must be a positive number, got %d", agentID)
	}
	forgets := s.forgets.Load()
	a, b, found, err := s.readAgent(s.db.WithContext(ctx), agentID)
	if err == nil && !found {
		a, err = s.seedAgent(ctx, agentID)
	}
	if err != nil {
		return store.Agent{}, b, fmt.Errorf("ensure agent %d: %w", agentID, err)
	}
	if s.forgets.Load() == forgets {
		s.seen.Store(agentID, struct{}{})
	}
	return a, b, nil
}

func (s *Service) seedAgent(ctx context.Context, agentID int64) (store.Agent, error) {
	now := s.now().UTC()
	a := store.Agent{ID: agentID, Language: s.language, Timezone: s.timezone, CreateTime: now}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&a).Error; err != nil {
			return err
		}
		files := make([]store.WorkspaceFile, len(CoreFiles))
		for i, name := range CoreFiles {
			content := DefaultContent(a.Language, name)
			files[i] = store.WorkspaceFile{
				AgentID: agentID, Filename: name, Content: content, FileSize: int64(len(content)),
				Enabled: true, SortOrder: i, Version: 1, CreateTime: now, UpdateTime: now,
			}
			s.countInto(&files[i], nil)
		}
		// One INSERT for the core files.
		if err := tx.Create(&files).Error; err != nil {
			return fmt.Errorf("seed %s: %w", strings.Join(CoreFiles, ", "), err)
		}
		for _, h := range s.hooks {
			if err := h(tx, a); err != nil {
				return err
			}
		}
		return nil
	})
	if store.IsDuplicate(err) {
		// Another process seeded it first.
		err = s.db.WithContext(ctx).Where("id = ?", agentID).Take(&a).Error
	} else if err == nil {
		for _, name := range CoreFiles {
			s.notifyChanged(ctx, agentID, name, 1)
		}
	}
	return a, err
}

// UpdateAgent changes an agent's language or time zone (empty leaves a value as it is).
func (s *Service) UpdateAgent(ctx context.Context, agentID int64, language, timezone string) (store.Agent, error) {
	a, err := s.EnsureAgent(ctx, agentID)
	if err != nil {
		return a, err
	}
	// Only the settings given are written, so two updates of different settings don't undo
	// each other.
	upd := map[string]any{}
	if language != "" {
		if language != "zh" && language != "en" {
			return a, invalidf("language %q is not supported; accepted: zh, en", language)
		}
		a.Language, upd["language"] = language, language
	}
	if timezone != "" {
		if _, err := config.LoadLocation(timezone); err != nil {
			return a, invalidf("timezone %q is not an IANA time zone (e.g. Asia/Shanghai, UTC)", timezone)
		}
		a.Timezone, upd["timezone"] = timezone, timezone
	}
	if len(upd) == 0 {
		return a, nil
	}
	if err := s.db.WithContext(ctx).Model(&store.Agent{}).Where("id = ?", agentID).Updates(upd).Error; err != nil {
		return a, fmt.Errorf("update agent %d: %w", agentID, err)
	}
	return s.EnsureAgent(ctx, agentID)
}

// Location is the agent's time zone.
func (s *Service) Location(ctx context.Context, agentID int64) (*time.Location, error) {
	a, err := s.EnsureAgent(ctx, agentID)
	if err != nil {
		return nil, err
	}
	loc, err := config.LoadLocation(a.Timezone)
	if err != nil {
		return time.UTC, nil
	}
	return loc, nil
}

// List returns the agent's live files whose name starts with prefix, sorted by sort_order
// then name.
func (s *Service) List(ctx context.Context, agentID int64, prefix string) ([]Info, error) {
	if err := s.ensure(ctx, agentID); err != nil {
		return nil, err
	}
	var rows []store.WorkspaceFile
	q := s.db.WithContext(ctx).
		Select("filename", "enabled", "file_size", "sort_order", "version", "update_time").
		Where("agent_id = ? AND deleted = 0", agentID)
	if prefix != "" {
		q = q.Where("filename LIKE ? ESCAPE '!'", likeEscape(prefix)+"%")
	}
	if err := q.Order("sort_order, filename").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list files of agent %d: %w", agentID, err)
	}
	out := make([]Info, 0, len(rows))
	for _, r := range rows {
		if !strings.HasPrefix(r.Filename, prefix) { // LIKE may be case-insensitive on MySQL
			continue
		}
		out = append(out, Info{Filename: r.Filename, Enabled: r.Enabled, FileSize: r.FileSize,
			SortOrder: r.SortOrder, Version: r.Version, UpdateTime: r.UpdateTime})
	}
	// Byte order for ties on both databases.
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].SortOrder != out[j].SortOrder {
			return out[i].SortOrder < out[j].SortOrder
		}
		return out[i].Filename < out[j].Filename
	})
	if err := s.annotateList(ctx, agentID, out); err != nil {
		return nil, err
	}
	return out, nil
}

// annotateList sets the tokens and budget of the budgeted files of a listing (their content
// is read for it: a listing reads no content otherwise).
func (s *Service) annotateList(ctx context.Context, agentID int64, out []Info) error {
	var names []string
	for _, f := range out {
		if IsBudgeted(f.Filename) {
			names = append(names, f.Filename)
		}
	}
	if len(names) == 0 {
		return nil
	}
	files, err := s.GetMany(ctx, agentID, names)
	if err != nil {
		return err
	}
	b, err := s.Budgets(ctx, agentID)
	if err != nil {
		return err
	}
	for i := range out {
		if f, ok := files[out[i].Filename]; ok {
			s.annotate(ctx, &f, b)
			out[i].Tokens, out[i].BudgetTokens = f.Tokens, f.BudgetTokens
		}
	}
	return nil
}

func likeEscape(s string) string {
	return strings.NewReplacer("!", "!!", "%", "!%", "_", "!_").Replace(s)
}

// Get reads one live file.
func (s *Service) Get(ctx context.Context, agentID int64, name string) (File, error) {
	if err := ValidateName(name); err != nil {
		return File{}, err
	}
	if err := s.ensure(ctx, agentID); err != nil {
		return File{}, err
	}
	row, err := s.load(s.db.WithContext(ctx), agentID, name)
	if err != nil {
		return File{}, err
	}
	f := toFile(row)
	if IsBudgeted(name) {
		b, err := s.Budgets(ctx, agentID)
		if err != nil {
			return File{}, err
		}
		s.annotate(ctx, &f, b)
	}
	return f, nil
}

// GetMany reads the named live files in one query; missing names are absent from the map.
func (s *Service) GetMany(ctx context.Context, agentID int64, names []string) (map[string]File, error) {
	if err := s.ensure(ctx, agentID); err != nil {
		return nil, err
	}
	var rows []store.WorkspaceFile
	if len(names) == 0 {
		return map[string]File{}, nil
	}
	// Plain SQL: every extraction reads its memory files (issue 14).
	if err := s.db.WithContext(ctx).Raw("SELECT * FROM mate_workspace_file WHERE agent_id = ? AND deleted = 0 AND filename IN ?", agentID, names).
		Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("read files of agent %d: %w", agentID, err)
	}
	out := make(map[string]File, len(rows))
	for _, r := range rows {
		out[r.Filename] = toFile(r)
	}
	return out, nil
}

// ListContent returns live files under prefix with their content, newest name first, at
// most limit (0 = all), in one query.
func (s *Service) ListContent(ctx context.Context, agentID int64, prefix string, limit int) ([]File, error) {
	if err := s.ensure(ctx, agentID); err != nil {
		return nil, err
	}
	var rows []store.WorkspaceFile
	q := s.db.WithContext(ctx).Where("agent_id = ? AND deleted = 0 AND filename LIKE ? ESCAPE '!'",
		agentID, likeEscape(prefix)+"%").Order("filename DESC")
	if limit > 0 {
		q = q.Limit(limit)
	}
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read %s* of agent %d: %w", prefix, agentID, err)
	}
	out := make([]File, 0, len(rows))
	for _, r := range rows {
		if strings.HasPrefix(r.Filename, prefix) {
			out = append(out, toFile(r))
		}
	}
	return out, nil
}

func (s *Service) load(db *gorm.DB, agentID int64, name string) (store.WorkspaceFile, error) {
	var row store.WorkspaceFile
	err := db.Where("agent_id = ? AND filename = ? AND deleted = 0", agentID, name).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return row, notFound(name)
	}
	if err != nil {
		return row, fmt.Errorf("read %s of agent %d: %w", name, agentID, err)
	}
	if row.Filename != name { // case-insensitive collation guard
		return row, notFound(name)
	}
	return row, nil
}

func toFile(r store.WorkspaceFile) File {
	return File{File: api.File{AgentID: r.AgentID, Filename: r.Filename, Content: r.Content, FileSize: r.FileSize,
		Enabled: r.Enabled, SortOrder: r.SortOrder, Version: r.Version,
		CreateTime: r.CreateTime, UpdateTime: r.UpdateTime}, id: r.ID,
		count: tokenCount{n: r.TokenCount, encoding: r.TokenEncoding, version: r.TokenVersion}}
}

// SystemPrompt builds the workspace injection exactly as the spec formats it: enabled files
// by sort_order, each as "--- NAME ---" and its content, separated by a blank line. As in
// MateClaw, the content is trimmed and a file whose content is blank is left out.
func (s *Service) SystemPrompt(ctx context.Context, agentID int64) (string, error) {
	if err := s.ensure(ctx, agentID); err != nil {
		return "", err
	}
	var rows []store.WorkspaceFile
	if err := s.db.WithContext(ctx).Select("filename", "content", "sort_order").
		Where("agent_id = ? AND deleted = 0 AND enabled = ?", agentID, true).
		Order("sort_order, filename").Find(&rows).Error; err != nil {
		return "", fmt.Errorf("build system prompt of agent %d: %w", agentID, err)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].SortOrder != rows[j].SortOrder {
			return rows[i].SortOrder < rows[j].SortOrder
		}
		return rows[i].Filename < rows[j].Filename
	})
	var b strings.Builder
	for _, r := range rows {
		content := strings.TrimSpace(r.Content)
		if content == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("--- ")
		b.WriteString(r.Filename)
		b.WriteString(" ---\n")
		// A content line that looks like a "--- NAME ---" header is escaped, so a file
		// cannot forge another file's block.
		b.WriteString(promptsafe.EscapeLines(content, promptsafe.FileDelimiter))
	}
	return b.String(), nil
}
