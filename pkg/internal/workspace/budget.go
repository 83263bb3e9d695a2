package workspace

import (
	"context"
	"fmt"
	"github.com/matememory/matememory/pkg/api"
	"log/slog"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/tokens"
)

// The budgeted core files: the ones every extraction and emergence rewrites and every model
// call carries (issue 22).
const (
	MemoryFile  = "MEMORY.md"
	ProfileFile = "PROFILE.md"
)

// Default budgets (mate.memory.budget.*) when the service is built without WithBudgets.
const (
	DefaultMemoryBudget  = 2000
	DefaultProfileBudget = 800
)

// Budgets are the token budgets of the core files and the tokenizer that counts them (the
// one of the agent's model, mate.llm.model).
type Budgets struct {
	Memory, Profile int
	Tokenizer       tokens.Tokenizer
}

// WithBudgets sets the default budgets and their tokenizer.
func WithBudgets(b Budgets) Option { return func(s *Service) { s.budgets = b } }

// WithBudgetMetrics registers the budget metrics on r and logs a WARN on log whenever a
// write leaves a core file over its budget.
func WithBudgetMetrics(r prometheus.Registerer, log *slog.Logger) Option {
	return func(s *Service) { s.budgetReg, s.log = r, log }
}

// budgetMetrics observe each write of a budgeted file. They are labelled by file name only:
// an agent id label would grow without bound with the agents (the over-budget list names
// the agents, GET /api/v1/admin/agents/over-budget).
type budgetMetrics struct {
	ratio *prometheus.HistogramVec
	over  *prometheus.CounterVec
}

func newBudgetMetrics(r prometheus.Registerer) budgetMetrics {
	m := budgetMetrics{
		ratio: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "matememory_workspace_budget_use_ratio",
			Help:    "A budgeted core file's tokens over its budget, observed at each write, by file.",
			Buckets: []float64{0.25, 0.5, 0.75, 0.9, 1, 1.25, 1.5, 2, 4},
		}, []string{"file"}),
		over: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "matememory_workspace_over_budget_writes_total",
			Help: "Writes that left a budgeted core file over its budget, by file.",
		}, []string{"file"}),
	}
	if r != nil {
		r.MustRegister(m.ratio, m.over)
	}
	return m
}

// IsBudgeted reports whether a file has a token budget.
func IsBudgeted(name string) bool { return name == MemoryFile || name == ProfileFile }

// AgentBudgets are an agent's budgets and whether each is the agent's own (an override) or
// the configured default.
type AgentBudgets struct {
	MemoryTokens      int  `json:"memoryTokens"`
	ProfileTokens     int  `json:"profileTokens"`
	MemoryOverridden  bool `json:"memoryOverridden"`
	ProfileOverridden bool `json:"profileOverridden"`
}

// For is the budget of a file (0 when it has none).
func (b AgentBudgets) For(name string) int {
	switch name {
	case MemoryFile:
		return b.MemoryTokens
	case ProfileFile:
		return b.ProfileTokens
	}
	return 0
}

func (s *Service) tokenizer() tokens.Tokenizer {
	if s.budgets.Tokenizer == nil {
		s.budgets.Tokenizer = tokens.NewCounter().Estimator()
	}
	return s.budgets.Tokenizer
}

// CountTokens counts text with the tokenizer of the budgets.
func (s *Service) CountTokens(text string) int { return s.tokenizer().Count(text) }

// Budgets returns the agent's budgets: its overrides, else the defaults.
func (s *Service) Budgets(ctx context.Context, agentID int64) (AgentBudgets, error) {
	return s.budgetsOf(s.db.WithContext(ctx), agentID)
}

func (s *Service) budgetsOf(db *gorm.DB, agentID int64) (AgentBudgets, error) {
	var rows []store.AgentBudget
	if err := db.Where("agent_id = ?", agentID).Limit(1).Find(&rows).Error; err != nil {
		return s.budgetsFrom(0, 0), fmt.Errorf("read budgets of agent %d: %w", agentID, err)
	}
	if len(rows) == 1 {
		return s.budgetsFrom(rows[0].MemoryTokens, rows[0].ProfileTokens), nil
	}
	return s.budgetsFrom(0, 0), nil
}

// budgetsFrom are the budgets given an agent's overrides (0: the default).
func (s *Service) budgetsFrom(memory, profile int) AgentBudgets {
	b := AgentBudgets{MemoryTokens: s.budgets.Memory, ProfileTokens: s.budgets.Profile}
	if memory > 0 {
		b.MemoryTokens, b.MemoryOverridden = memory, true
	}
	if profile > 0 {
		b.ProfileTokens, b.ProfileOverridden = profile, true
	}
	return b
}

// SetBudgets overrides an agent's budgets: nil leaves one as it is, 0 returns it to the
// default, 1 to config.MaxBudgetTokens sets it.
func (s *Service) SetBudgets(ctx context.Context, agentID int64, memory, profile *int) (AgentBudgets, error) {
	if err := ValidateBudgets(memory, profile); err != nil {
		return AgentBudgets{}, err
	}
	if _, err := s.EnsureAgent(ctx, agentID); err != nil {
		return AgentBudgets{}, err
	}
	if memory == nil && profile == nil {
		return s.Budgets(ctx, agentID)
	}
	row := store.AgentBudget{AgentID: agentID, UpdateTime: s.now().UTC()}
	upd := []string{"update_time"}
	if memory != nil {
		row.MemoryTokens = *memory
		upd = append(upd, "memory_tokens")
	}
	if profile != nil {
		row.ProfileTokens = *profile
		upd = append(upd, "profile_tokens")
	}
	// An upsert of only the values given, so two changes of different budgets don't undo
	// each other.
	if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "agent_id"}}, DoUpdates: clause.AssignmentColumns(upd),
	}).Create(&row).Error; err != nil {
		return AgentBudgets{}, fmt.Errorf("set budgets of agent %d: %w", agentID, err)
	}
	return s.Budgets(ctx, agentID)
}

// ValidateBudgets checks budgets as SetBudgets takes them, so that a caller changing more
// than the budgets can refuse a bad one before it changes anything.
func ValidateBudgets(memory, profile *int) error {
	for _, v := range []struct {
		name string
		p    *int
	}{{MemoryFile, memory}, {ProfileFile, profile}} {
		if v.p != nil && (*v.p < 0 || *v.p > config.MaxBudgetTokens) {
			return invalidf("the budget of %s must be 1 to %d tokens, or 0 for the default (mate.memory.budget.*), got %d",
				v.name, config.MaxBudgetTokens, *v.p)
		}
	}
	return nil
}

// tokenCount is a file's token count as its row stores it: n tokens of the content of
// version, counted with encoding.
type tokenCount struct {
	n        int
	encoding string
	version  int64
}

// countInto sets a budgeted core file's token count for the version it is about to be
// written as: was's count when the content is was's (flags changed, say) and was counted,
// else counted now. Other files are not counted (their count reads as none).
func (s *Service) countInto(row *store.WorkspaceFile, was *store.WorkspaceFile) {
	if !IsBudgeted(row.Filename) {
		row.TokenCount, row.TokenEncoding, row.TokenVersion = 0, "", 0
		return
	}
	enc := s.tokenizer().Name()
	if was != nil && was.Content == row.Content && was.TokenVersion == was.Version && was.TokenEncoding == enc {
		row.TokenCount, row.TokenEncoding, row.TokenVersion = was.TokenCount, enc, row.Version
		return
	}
	row.TokenCount, row.TokenEncoding, row.TokenVersion = s.CountTokens(row.Content), enc, row.Version
}

// FileTokens is the token count of f's content with the tokenizer of the budgets: the one
// stored with f's version (counted in the write that made it), else counted now. A file
// whose version has no count of this tokenizer yet (written before counts were stored, or
// by a process that does not store them) is counted once: the count is stored with the
// version, unless the file has changed since it was read.
func (s *Service) FileTokens(ctx context.Context, f *File) int {
	enc := s.tokenizer().Name()
	if f.Version > 0 && f.count.version == f.Version && f.count.encoding == enc {
		return f.count.n
	}
	n := s.CountTokens(f.Content)
	f.count = tokenCount{n: n, encoding: enc, version: f.Version}
	if f.id > 0 && f.Version > 0 && IsBudgeted(f.Filename) {
		// Only the count columns, and only for the version counted: a later version keeps
		// its own (the compare on version), and update_time is left alone (nothing that
		// watches the file changed).
		if err := s.db.WithContext(ctx).Exec("UPDATE mate_workspace_file SET token_count = ?, token_encoding = ?, token_version = ? "+
			"WHERE id = ? AND version = ?", n, enc, f.Version, f.id, f.Version).Error; err != nil {
			s.log.Warn("token count of a core file not stored (it is counted again at its next read)",
				"agentId", f.AgentID, "file", f.Filename, "version", f.Version, "err", err)
		}
	}
	return n
}

// annotate sets a budgeted file's tokens and budget.
func (s *Service) annotate(ctx context.Context, f *File, b AgentBudgets) {
	if !IsBudgeted(f.Filename) {
		return
	}
	n, budget := s.FileTokens(ctx, f), b.For(f.Filename)
	f.Tokens, f.BudgetTokens = &n, &budget
}

// afterWrite annotates a budgeted file written, observes its use of the budget and warns
// when the write left it over budget. A failure to read the budgets loses nothing but the
// annotation: the write has committed.
func (s *Service) afterWrite(ctx context.Context, agentID int64, f *File, actor string) {
	if !IsBudgeted(f.Filename) {
		return
	}
	b, err := s.Budgets(ctx, agentID)
	if err != nil {
		s.log.Warn("budget of a core file not checked", "agentId", agentID, "file", f.Filename, "err", err)
		return
	}
	s.annotate(ctx, f, b)
	n, budget := *f.Tokens, *f.BudgetTokens
	s.budgetMetrics.ratio.WithLabelValues(f.Filename).Observe(float64(n) / float64(budget))
	if n > budget {
		s.budgetMetrics.over.WithLabelValues(f.Filename).Inc()
		s.log.Warn("a write left a core file over its token budget", "agentId", agentID, "file", f.Filename,
			"tokens", n, "budgetTokens", budget, "version", f.Version, "actor", actor)
	}
}

// OverBudget is one budgeted file of an agent over its budget.
type OverBudget = api.OverBudget

// overBudgetScan is how many core files one scan query reads at a time.
const overBudgetScan = 500

// ListOverBudget lists the budgeted files over their budgets, by agent id then file name, at
// most limit, by the counts stored with the files' versions (a file without one is counted
// now); it reads every agent's MEMORY.md and PROFILE.md a page at a time (an operator's
// question, not a hot path).
func (s *Service) ListOverBudget(ctx context.Context, limit int) ([]OverBudget, error) {
	if limit <= 0 || limit > MaxAgentPage {
		return nil, invalidf("limit must be 1 to %d, got %d", MaxAgentPage, limit)
	}
	db := s.db.WithContext(ctx)
	var overrides []store.AgentBudget
	if err := db.Find(&overrides).Error; err != nil {
		return nil, fmt.Errorf("read agent budgets: %w", err)
	}
	own := make(map[int64]store.AgentBudget, len(overrides))
	for _, o := range overrides {
		own[o.AgentID] = o
	}
	out := []OverBudget{}
	var lastID int64
	for {
		var rows []store.WorkspaceFile
		if err := db.Select("id", "agent_id", "filename", "content", "version", "update_time", "token_count", "token_encoding", "token_version").
			Where("deleted = 0 AND filename IN ? AND id > ?", []string{MemoryFile, ProfileFile}, lastID).
			Order("id").Limit(overBudgetScan).Find(&rows).Error; err != nil {
			return nil, fmt.Errorf("read core files: %w", err)
		}
		for _, r := range rows {
			lastID = r.ID
			if !IsBudgeted(r.Filename) { // case-insensitive collation guard
				continue
			}
			b := AgentBudgets{MemoryTokens: s.budgets.Memory, ProfileTokens: s.budgets.Profile}
			if o, ok := own[r.AgentID]; ok {
				if o.MemoryTokens > 0 {
					b.MemoryTokens = o.MemoryTokens
				}
				if o.ProfileTokens > 0 {
					b.ProfileTokens = o.ProfileTokens
				}
			}
			f := toFile(r)
			if n := s.FileTokens(ctx, &f); n > b.For(r.Filename) {
				out = append(out, OverBudget{AgentID: r.AgentID, Filename: r.Filename, Tokens: n,
					BudgetTokens: b.For(r.Filename), Version: r.Version, UpdateTime: r.UpdateTime})
			}
		}
		if len(rows) < overBudgetScan {
			break
		}
	}
	sortOverBudget(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func sortOverBudget(out []OverBudget) {
	sort.Slice(out, func(i, j int) bool {
		if out[i].AgentID != out[j].AgentID {
			return out[i].AgentID < out[j].AgentID
		}
		return out[i].Filename < out[j].Filename
	})
}
