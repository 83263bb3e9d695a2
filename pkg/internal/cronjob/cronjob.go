// Package cronjob manages scheduled jobs (mate_cron_job): MateClaw's cron jobs with a
// 5-field expression in an IANA time zone, of task type "text" (a message the agent gets
// from its chat service) or "emergence" (memory consolidation). It validates jobs, keeps
// next_run_time true, gives every agent its "Memory Consolidation" job when the agent is
// first seen, and offers the scheduler the due jobs and a compare-and-swap to claim a slot.
package cronjob

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/matememory/matememory/pkg/api"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/store"
)

// Task types.
const (
	// TaskText sends TriggerMessage to the agent through its chat service (MateClaw's kind).
	TaskText = "text"
	// TaskEmergence consolidates the agent's daily notes into MEMORY.md.
	TaskEmergence = "emergence"
)

// ConsolidationName is the name of the emergence job every agent gets.
const ConsolidationName = "Memory Consolidation"

// Limits of the text columns.
const (
	maxNameChars = 128
	maxTextBytes = 65535
)

// Job is a cron job: the wire type api.CronJob, with the methods the scheduler uses. Its
// fields are api.CronJob's, so the REST port answers with api.CronJob(job).
type Job api.CronJob

// Schedule parses the job's expression in its time zone.
func (j Job) Schedule() (*Schedule, error) { return Parse(j.CronExpression, j.Timezone) }

// Input is a job as a client sends it. Create and Replace treat a missing optional field as
// its default; Patch leaves it unchanged.
type Input struct {
	AgentID        *int64  `json:"agentId"`
	Name           *string `json:"name"`
	CronExpression *string `json:"cronExpression"`
	// Timezone defaults to the agent's time zone.
	Timezone *string `json:"timezone"`
	// TaskType is "text" (default) or "emergence".
	TaskType *string `json:"taskType"`
	// TriggerMessage is required for task type text.
	TriggerMessage *string `json:"triggerMessage"`
	RequestBody    *string `json:"requestBody"`
	// Enabled defaults to true.
	Enabled *bool `json:"enabled"`
}

// Agents records agents on first sight (workspace.Service does); a job for an agent not
// seen before makes the agent known, with its core files and its consolidation job.
type Agents interface {
	EnsureAgent(ctx context.Context, agentID int64) (store.Agent, error)
}

// Service is the cron job service.
type Service struct {
	db                *gorm.DB
	agents            Agents
	now               func() time.Time
	consolidationCron string
}

// Option configures a Service.
type Option func(*Service)

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option { return func(s *Service) { s.now = now } }

// WithConsolidationCron sets the schedule of each agent's Memory Consolidation job
// (mate.memory.emergence-cron, default "0 2 * * *").
func WithConsolidationCron(expr string) Option {
	return func(s *Service) { s.consolidationCron = expr }
}

// New builds the service. agents may be nil when jobs are only read (the scheduler).
func New(db *gorm.DB, agents Agents, opts ...Option) (*Service, error) {
	s := &Service{db: db, agents: agents, now: time.Now, consolidationCron: "0 2 * * *"}
	for _, o := range opts {
		o(s)
	}
	if _, err := Parse(s.consolidationCron, "UTC"); err != nil {
		return nil, fmt.Errorf("mate.memory.emergence-cron: %w", err)
	}
	return s, nil
}

func toJob(r store.CronJob) Job {
	return Job{ID: r.ID, AgentID: r.AgentID, Name: r.Name, CronExpression: r.CronExpression,
		Timezone: r.Timezone, TaskType: r.TaskType, TriggerMessage: r.TriggerMessage,
		RequestBody: r.RequestBody, Enabled: r.Enabled, NextRunTime: utcPtr(r.NextRunTime),
		LastRunTime: utcPtr(r.LastRunTime), CreateTime: r.CreateTime.UTC(), UpdateTime: r.UpdateTime.UTC()}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// nextRun is the first slot after now for an enabled job, nil for a disabled one.
func nextRun(sched *Schedule, enabled bool, now time.Time) *time.Time {
	if !enabled {
		return nil
	}
	n := sched.Next(now)
	if n.IsZero() {
		return nil
	}
	return &n
}

// validate checks the fields of a complete job and returns its schedule.
func validate(r *store.CronJob) (*Schedule, error) {
	r.Name = strings.TrimSpace(r.Name)
	switch {
	case r.AgentID <= 0:
		return nil, invalidf("agentId must be a positive number, got %d", r.AgentID)
	case r.Name == "":
		return nil, invalidf("name is required, e.g. \"Daily stand-up reminder\"")
	case utf8.RuneCountInString(r.Name) > maxNameChars:
		return nil, invalidf("name is %d characters long; at most %d allowed", utf8.RuneCountInString(r.Name), maxNameChars)
	case !utf8.ValidString(r.Name) || !utf8.ValidString(r.TriggerMessage) || !utf8.ValidString(r.RequestBody):
		return nil, invalidf("name, triggerMessage and requestBody must be valid UTF-8")
	case len(r.TriggerMessage) > maxTextBytes:
		return nil, invalidf("triggerMessage is %d bytes; at most %d allowed", len(r.TriggerMessage), maxTextBytes)
	case len(r.RequestBody) > maxTextBytes:
		return nil, invalidf("requestBody is %d bytes; at most %d allowed", len(r.RequestBody), maxTextBytes)
	}
	switch r.TaskType {
	case TaskText:
		if strings.TrimSpace(r.TriggerMessage) == "" {
			return nil, invalidf("triggerMessage is required for task type %q: it is the message the agent receives when the job fires", TaskText)
		}
	case TaskEmergence:
	default:
		return nil, invalidf("taskType %q is not supported; accepted: %s, %s", r.TaskType, TaskText, TaskEmergence)
	}
	r.CronExpression = strings.TrimSpace(r.CronExpression)
	r.Timezone = strings.TrimSpace(r.Timezone)
	if len(r.Timezone) > 64 {
		return nil, invalidf("timezone %q is not an IANA time zone (e.g. Asia/Shanghai, UTC)", r.Timezone)
	}
	if len(r.CronExpression) > 64 {
		return nil, invalidf("cronExpression is %d bytes; at most 64 allowed", len(r.CronExpression))
	}
	return Parse(r.CronExpression, r.Timezone)
}

// apply copies the fields set in in onto r; with defaults, unset optional fields get their
// default values (Create, Replace).
func apply(r *store.CronJob, in Input, defaults bool, agentTZ string) {
	if in.Name != nil {
		r.Name = *in.Name
	}
	if in.CronExpression != nil {
		r.CronExpression = *in.CronExpression
	}
	switch {
	case in.Timezone != nil && strings.TrimSpace(*in.Timezone) != "":
		r.Timezone = *in.Timezone
	case defaults || in.Timezone != nil:
		r.Timezone = agentTZ
	}
	switch {
	case in.TaskType != nil && *in.TaskType != "":
		r.TaskType = *in.TaskType
	case defaults:
		r.TaskType = TaskText
	}
	switch {
	case in.TriggerMessage != nil:
		r.TriggerMessage = *in.TriggerMessage
	case defaults:
		r.TriggerMessage = ""
	}
	switch {
	case in.RequestBody != nil:
		r.RequestBody = *in.RequestBody
	case defaults:
		r.RequestBody = ""
	}
	switch {
	case in.Enabled != nil:
		r.Enabled = *in.Enabled
	case defaults:
		r.Enabled = true
	}
}

func (s *Service) agentTimezone(ctx context.Context, agentID int64) (string, error) {
	if agentID <= 0 {
		return "", invalidf("agentId must be a positive number, got %d", agentID)
	}
	if s.agents == nil {
		return "UTC", nil
	}
	a, err := s.agents.EnsureAgent(ctx, agentID)
	if err != nil {
		return "", err
	}
	return a.Timezone, nil
}

// Create validates and stores a new job, computing its next run.
func (s *Service) Create(ctx context.Context, in Input) (Job, error) {
	if in.AgentID == nil {
		return Job{}, invalidf("agentId is required")
	}
	tz, err := s.agentTimezone(ctx, *in.AgentID)
	if err != nil {
		return Job{}, err
	}
	now := s.now().UTC()
	r := store.CronJob{AgentID: *in.AgentID, CreateTime: now, UpdateTime: now}
	apply(&r, in, true, tz)
	sched, err := validate(&r)
	if err != nil {
		return Job{}, err
	}
	r.NextRunTime = nextRun(sched, r.Enabled, now)
	if err := s.db.WithContext(ctx).Create(&r).Error; err != nil {
		if store.IsDuplicate(err) {
			return Job{}, &conflictError{agentID: r.AgentID, name: r.Name}
		}
		return Job{}, fmt.Errorf("create cron job for agent %d: %w", r.AgentID, err)
	}
	return toJob(r), nil
}

// Get reads a live job.
func (s *Service) Get(ctx context.Context, id int64) (Job, error) {
	r, err := s.load(s.db.WithContext(ctx), id)
	if err != nil {
		return Job{}, err
	}
	return toJob(r), nil
}

func (s *Service) load(db *gorm.DB, id int64) (store.CronJob, error) {
	var r store.CronJob
	err := db.Where("id = ? AND deleted = 0", id).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return r, &notFoundError{id: id}
	}
	if err != nil {
		return r, fmt.Errorf("read cron job %d: %w", id, err)
	}
	return r, nil
}

// Filter narrows List.
type Filter struct {
	// AgentIDs, when non-nil, limits the jobs to these agents (an empty slice matches none).
	AgentIDs []int64
	// AgentID, when positive, limits the jobs to one agent.
	AgentID int64
	// TaskType, when set, limits the jobs to one task type.
	TaskType string
	Limit    int
	Offset   int
}

// List returns live jobs ordered by agent then id.
func (s *Service) List(ctx context.Context, f Filter) ([]Job, error) {
	q := s.db.WithContext(ctx).Where("deleted = 0")
	if f.AgentIDs != nil {
		if len(f.AgentIDs) == 0 {
			return []Job{}, nil
		}
		q = q.Where("agent_id IN ?", f.AgentIDs)
	}
	if f.AgentID > 0 {
		q = q.Where("agent_id = ?", f.AgentID)
	}
	if f.TaskType != "" {
		q = q.Where("task_type = ?", f.TaskType)
	}
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 500
	}
	var rows []store.CronJob
	if err := q.Order("agent_id, id").Limit(f.Limit).Offset(f.Offset).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list cron jobs: %w", err)
	}
	out := make([]Job, len(rows))
	for i, r := range rows {
		out[i] = toJob(r)
	}
	return out, nil
}

// Replace overwrites a job with in (PUT): unset optional fields take their defaults. The
// agent of a job cannot change.
func (s *Service) Replace(ctx context.Context, id int64, in Input) (Job, error) {
	return s.update(ctx, id, in, true)
}

// Patch changes the fields set in in.
func (s *Service) Patch(ctx context.Context, id int64, in Input) (Job, error) {
	return s.update(ctx, id, in, false)
}

func (s *Service) update(ctx context.Context, id int64, in Input, replace bool) (Job, error) {
	var out store.CronJob
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		cur, err := s.load(tx, id)
		if err != nil {
			return err
		}
		if in.AgentID != nil && *in.AgentID != cur.AgentID {
			return invalidf("agentId of cron job %d is %d and cannot change; create a job for agent %d instead", id, cur.AgentID, *in.AgentID)
		}
		if replace && (in.Name == nil || in.CronExpression == nil) {
			return invalidf("PUT replaces the whole job: name and cronExpression are required (use PATCH to change some fields)")
		}
		tz := cur.Timezone
		if in.Timezone != nil && strings.TrimSpace(*in.Timezone) == "" || replace && in.Timezone == nil {
			if tz, err = s.agentTimezone(ctx, cur.AgentID); err != nil {
				return err
			}
		}
		next := cur
		apply(&next, in, replace, tz)
		sched, err := validate(&next)
		if err != nil {
			return err
		}
		now := s.now().UTC()
		next.UpdateTime = now
		if next.CronExpression != cur.CronExpression || next.Timezone != cur.Timezone ||
			next.Enabled != cur.Enabled || next.Enabled && next.NextRunTime == nil {
			next.NextRunTime = nextRun(sched, next.Enabled, now)
		}
		res := tx.Model(&store.CronJob{}).Where("id = ? AND deleted = 0", id).Select("*").Omit("id", "create_time", "deleted", "last_run_time").Updates(&next)
		if res.Error != nil {
			if store.IsDuplicate(res.Error) {
				return &conflictError{agentID: next.AgentID, name: next.Name}
			}
			return fmt.Errorf("update cron job %d: %w", id, res.Error)
		}
		if res.RowsAffected != 1 {
			return &notFoundError{id: id}
		}
		out = next
		return nil
	})
	if err != nil {
		return Job{}, err
	}
	return toJob(out), nil
}

// Delete removes a job logically (its name can then be used again).
func (s *Service) Delete(ctx context.Context, id int64) error {
	res := s.db.WithContext(ctx).Model(&store.CronJob{}).Where("id = ? AND deleted = 0", id).
		Updates(map[string]any{"deleted": id, "update_time": s.now().UTC()})
	if res.Error != nil {
		return fmt.Errorf("delete cron job %d: %w", id, res.Error)
	}
	if res.RowsAffected == 0 {
		return &notFoundError{id: id}
	}
	return nil
}

// ConsolidationHook returns the hook that gives a newly seen agent its Memory Consolidation
// job: task type emergence, schedule expr (mate.memory.emergence-cron), the agent's time
// zone. It runs in the transaction that records the agent, so the job exists exactly when
// the agent does. Pass it to workspace.WithAgentHook; now may be nil (time.Now).
func ConsolidationHook(expr string, now func() time.Time) func(tx *gorm.DB, agent store.Agent) error {
	if now == nil {
		now = time.Now
	}
	return func(tx *gorm.DB, agent store.Agent) error {
		return createConsolidation(tx, agent, expr, now().UTC())
	}
}

func createConsolidation(tx *gorm.DB, agent store.Agent, expr string, now time.Time) error {
	tz := agent.Timezone
	if _, err := config.LoadLocation(tz); err != nil {
		// An agent whose zone this process cannot load still gets its job, in UTC.
		tz = "UTC"
	}
	sched, err := Parse(expr, tz)
	if err != nil {
		return fmt.Errorf("consolidation job for agent %d (mate.memory.emergence-cron): %w", agent.ID, err)
	}
	r := store.CronJob{AgentID: agent.ID, Name: ConsolidationName, CronExpression: sched.Expression(),
		Timezone: tz, TaskType: TaskEmergence, Enabled: true, NextRunTime: nextRun(sched, true, now),
		CreateTime: now, UpdateTime: now}
	// DoNothing: a live job of that name (made by hand, or by a racing process) is kept.
	if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&r).Error; err != nil {
		return fmt.Errorf("create consolidation job for agent %d: %w", agent.ID, err)
	}
	return nil
}

// BackfillConsolidation gives a consolidation job to every recorded agent that never had
// one (agents seen before this version). An agent whose job was deleted is left alone: the
// deleted row shows someone removed it on purpose. It returns how many jobs it created.
func (s *Service) BackfillConsolidation(ctx context.Context) (int, error) {
	var agents []store.Agent
	err := s.db.WithContext(ctx).Where("NOT EXISTS (SELECT 1 FROM mate_cron_job j WHERE j.agent_id = mate_agent.id AND j.name = ?)", ConsolidationName).
		Order("id").Find(&agents).Error
	if err != nil {
		return 0, fmt.Errorf("find agents without a consolidation job: %w", err)
	}
	for _, a := range agents {
		if err := createConsolidation(s.db.WithContext(ctx), a, s.consolidationCron, s.now().UTC()); err != nil {
			return 0, err
		}
	}
	return len(agents), nil
}

// Due returns up to limit enabled live jobs whose next run is at or before now, oldest first.
func (s *Service) Due(ctx context.Context, now time.Time, limit int) ([]Job, error) {
	var rows []store.CronJob
	err := s.db.WithContext(ctx).
		Where("enabled = ? AND deleted = 0 AND next_run_time IS NOT NULL AND next_run_time <= ?", true, now.UTC()).
		Order("next_run_time, id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("find due cron jobs: %w", err)
	}
	out := make([]Job, len(rows))
	for i, r := range rows {
		out[i] = toJob(r)
	}
	return out, nil
}

// Advance moves a job's next run from 'from' to next (nil: no further slot) and sets its last
// run, only if next_run_time still equals from: a compare-and-swap, so that of several
// schedulers that saw the same due slot exactly one advances it. lastRun nil leaves the last
// run as it is (slots skipped, none fired). It reports whether this call won.
func (s *Service) Advance(ctx context.Context, id int64, from time.Time, next *time.Time, lastRun *time.Time) (bool, error) {
	upd := map[string]any{"next_run_time": utcPtr(next), "update_time": s.now().UTC()}
	if lastRun != nil {
		upd["last_run_time"] = lastRun.UTC()
	}
	res := s.db.WithContext(ctx).Model(&store.CronJob{}).
		Where("id = ? AND deleted = 0 AND next_run_time = ?", id, from.UTC()).Updates(upd)
	if res.Error != nil {
		return false, fmt.Errorf("advance cron job %d: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}
