package rest

import (
	"context"
	"github.com/matememory/matememory/pkg/api"
	"net/http"
	"sort"

	"github.com/danielgtaylor/huma/v2"

	"github.com/matememory/matememory/pkg/internal/cronjob"
	"github.com/matememory/matememory/pkg/internal/httpapi"
)

// RegisterCronJobs adds the cron job routes. An admin key (or an agent key for "*") sees
// every job; a key scoped to some agents sees and manages only their jobs.
func RegisterCronJobs(s *httpapi.Server, svc *cronjob.Service) {
	h := cronHandlers{svc: svc}
	const base = "/api/v1/cron-jobs"
	tags := []string{"Cron jobs"}
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: base, OperationID: "listCronJobs", Tags: tags,
		Summary: "List cron jobs", Description: "An agent-scoped key sees only its agents' jobs.", Errors: []int{403}}, h.list)
	httpapi.Register(s, huma.Operation{Method: http.MethodPost, Path: base, OperationID: "createCronJob", Tags: tags,
		Summary:       "Create a cron job",
		Description:   "agentId, name and cronExpression are required (triggerMessage too for taskType text); a bad expression or time zone gets 400. timezone defaults to the agent's, taskType to text, enabled to true.",
		DefaultStatus: http.StatusCreated, Errors: []int{403, 409}}, h.create)
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: base + "/{id}", OperationID: "getCronJob", Tags: tags,
		Summary: "Read a cron job, with its next and last run", Errors: []int{404}}, h.get)
	httpapi.Register(s, huma.Operation{Method: http.MethodPut, Path: base + "/{id}", OperationID: "replaceCronJob", Tags: tags,
		Summary: "Replace a cron job", Description: "name and cronExpression required; omitted optional fields take their defaults.",
		Errors: []int{404, 409}}, h.replace)
	httpapi.Register(s, huma.Operation{Method: http.MethodPatch, Path: base + "/{id}", OperationID: "updateCronJob", Tags: tags,
		Summary: "Change some fields of a cron job", Description: `e.g. {"enabled":false}; omitted fields stay as they are.`,
		Errors: []int{404, 409}}, h.patch)
	httpapi.Register(s, huma.Operation{Method: http.MethodDelete, Path: base + "/{id}", OperationID: "deleteCronJob", Tags: tags,
		Summary: "Delete a cron job", Errors: []int{404}}, h.delete)
}

type cronHandlers struct {
	svc *cronjob.Service
}

// cronScope is the set of agents the caller may see: nil means all.
func cronScope(ctx context.Context) []int64 {
	p := httpapi.PrincipalFrom(ctx)
	if p.Open || p.Admin || p.AllAgents {
		return nil
	}
	ids := make([]int64, 0, len(p.Agents))
	for id, ok := range p.Agents {
		if ok {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// cronAuthorize lets operators (admin keys) manage every cron job, and agent keys their
// agents' jobs.
func cronAuthorize(ctx context.Context, agentID int64) error {
	if httpapi.PrincipalFrom(ctx).Admin {
		return nil
	}
	return httpapi.Act(ctx, agentID)
}

type cronListInput struct {
	AgentID  int64  `query:"agentId" minimum:"1" doc:"Only this agent's jobs."`
	TaskType string `query:"taskType" enum:"text,emergence" doc:"Only jobs of this task type."`
	Limit    int    `query:"limit" minimum:"1" doc:"At most this many jobs."`
	Offset   int    `query:"offset" minimum:"0" doc:"Skip this many jobs."`
}

// JobList is a page of cron jobs.
type JobList struct {
	Count int           `json:"count"`
	Jobs  []api.CronJob `json:"jobs"`
}

func (h cronHandlers) list(ctx context.Context, in *cronListInput) (*httpapi.Response[JobList], error) {
	f := cronjob.Filter{AgentIDs: cronScope(ctx), TaskType: in.TaskType, Limit: in.Limit, Offset: in.Offset}
	if in.AgentID > 0 {
		if err := cronAuthorize(ctx, in.AgentID); err != nil {
			return nil, err
		}
		f.AgentID = in.AgentID
	}
	jobs, err := h.svc.List(ctx, f)
	if err != nil {
		return nil, err
	}
	return httpapi.OK(JobList{Count: len(jobs), Jobs: each(jobs, func(j cronjob.Job) api.CronJob { return api.CronJob(j) })}), nil
}

// The bodies of the three writes, one type each, so that the document says what each
// requires: the schemas huma validates a body with are these types' (cronjob.Input, the
// service's, serves all three and so can require nothing).

// JobOptions are the fields every write of a cron job may leave out (embedded in the bodies;
// exported so that huma documents its fields as the bodies' own).
type JobOptions struct {
	Timezone       *string `json:"timezone,omitempty" example:"Asia/Shanghai" doc:"An IANA time zone; the agent's when absent (on create and replace)."`
	TaskType       *string `json:"taskType,omitempty" enum:"text,emergence" doc:"text (the default) sends triggerMessage to the agent; emergence runs the memory consolidation."`
	TriggerMessage *string `json:"triggerMessage,omitempty" maxLength:"65535" doc:"The message the agent receives when the job fires; required for task type text."`
	RequestBody    *string `json:"requestBody,omitempty" maxLength:"65535" doc:"Kept with the job for MateClaw's clients."`
	Enabled        *bool   `json:"enabled,omitempty" doc:"Whether the job runs; true when absent (on create and replace)."`
}

// cronCreateBody is POST's body: the agent, the name and the schedule are required.
type cronCreateBody struct {
	AgentID        int64  `json:"agentId" minimum:"1" example:"1" doc:"The agent the job runs for."`
	Name           string `json:"name" minLength:"1" maxLength:"128" example:"Daily stand-up reminder" doc:"Unique per agent."`
	CronExpression string `json:"cronExpression" minLength:"1" example:"0 9 * * 1-5" doc:"Five fields: minute hour day-of-month month day-of-week."`
	JobOptions
}

// cronReplaceBody is PUT's body: the whole job, so the name and the schedule are required.
type cronReplaceBody struct {
	AgentID        *int64 `json:"agentId,omitempty" minimum:"1" doc:"The job's own agent, if sent: a job cannot move to another agent."`
	Name           string `json:"name" minLength:"1" maxLength:"128" example:"Daily stand-up reminder"`
	CronExpression string `json:"cronExpression" minLength:"1" example:"0 9 * * 1-5"`
	JobOptions
}

// cronPatchBody is PATCH's body: only the fields sent change.
type cronPatchBody struct {
	AgentID        *int64  `json:"agentId,omitempty" minimum:"1" doc:"The job's own agent, if sent: a job cannot move to another agent."`
	Name           *string `json:"name,omitempty" minLength:"1" maxLength:"128"`
	CronExpression *string `json:"cronExpression,omitempty" minLength:"1" example:"0 9 * * 1-5"`
	JobOptions
}

func (o JobOptions) input(agentID *int64, name, cron *string) cronjob.Input {
	return cronjob.Input{AgentID: agentID, Name: name, CronExpression: cron, Timezone: o.Timezone, TaskType: o.TaskType,
		TriggerMessage: o.TriggerMessage, RequestBody: o.RequestBody, Enabled: o.Enabled}
}

type cronCreateInput struct {
	Body cronCreateBody
}

func (h cronHandlers) create(ctx context.Context, in *cronCreateInput) (*httpapi.Response[api.CronJob], error) {
	b := in.Body
	if err := cronAuthorize(ctx, b.AgentID); err != nil {
		return nil, err
	}
	j, err := h.svc.Create(ctx, b.input(&b.AgentID, &b.Name, &b.CronExpression))
	if err != nil {
		return nil, err
	}
	return httpapi.Answer(http.StatusCreated, api.CronJob(j)), nil
}

// JobPath is the {id} path parameter of a cron job operation.
type JobPath struct {
	ID int64 `path:"id" minimum:"1" doc:"The cron job's id."`
}

type cronReplaceInput struct {
	JobPath
	Body cronReplaceBody
}

type cronPatchInput struct {
	JobPath
	Body cronPatchBody
}

// job reads the {id} job and checks the caller may act for its agent; a job of another
// agent is reported as not found, so ids do not reveal other tenants' jobs.
func (h cronHandlers) job(ctx context.Context, id int64) (cronjob.Job, error) {
	j, err := h.svc.Get(ctx, id)
	if err != nil {
		return cronjob.Job{}, err
	}
	if p := httpapi.PrincipalFrom(ctx); !p.Admin && !p.MayAct(j.AgentID) {
		return cronjob.Job{}, cronjob.NotFound(id)
	}
	return j, nil
}

func (h cronHandlers) get(ctx context.Context, in *JobPath) (*httpapi.Response[api.CronJob], error) {
	j, err := h.job(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	return httpapi.OK(api.CronJob(j)), nil
}

func (h cronHandlers) replace(ctx context.Context, in *cronReplaceInput) (*httpapi.Response[api.CronJob], error) {
	b := in.Body
	return h.update(ctx, in.ID, b.input(b.AgentID, &b.Name, &b.CronExpression), true)
}

func (h cronHandlers) patch(ctx context.Context, in *cronPatchInput) (*httpapi.Response[api.CronJob], error) {
	b := in.Body
	return h.update(ctx, in.ID, b.input(b.AgentID, b.Name, b.CronExpression), false)
}

func (h cronHandlers) update(ctx context.Context, id int64, body cronjob.Input, replace bool) (*httpapi.Response[api.CronJob], error) {
	j, err := h.job(ctx, id)
	if err != nil {
		return nil, err
	}
	var out cronjob.Job
	if replace {
		out, err = h.svc.Replace(ctx, j.ID, body)
	} else {
		out, err = h.svc.Patch(ctx, j.ID, body)
	}
	if err != nil {
		return nil, err
	}
	return httpapi.OK(api.CronJob(out)), nil
}

// JobDeleted answers a delete.
type JobDeleted struct {
	ID      int64 `json:"id"`
	Deleted bool  `json:"deleted"`
}

func (h cronHandlers) delete(ctx context.Context, in *JobPath) (*httpapi.Response[JobDeleted], error) {
	j, err := h.job(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if err := h.svc.Delete(ctx, j.ID); err != nil {
		return nil, err
	}
	return httpapi.OK(JobDeleted{ID: j.ID, Deleted: true}), nil
}
