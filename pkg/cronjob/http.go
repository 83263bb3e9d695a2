package cronjob

import (
	"net/http"
	"sort"
	"strconv"

	"github.com/matememory/matememory/pkg/httpapi"
)

// RegisterHTTP adds the cron job routes. An admin key (or an agent key for "*") sees every
// job; a key scoped to some agents sees and manages only their jobs.
func RegisterHTTP(s *httpapi.Server, svc *Service) {
	h := handlers{svc: svc}
	const base = "/api/v1/cron-jobs"
	s.Handle("GET "+base, "List cron jobs (?agentId= filters by agent, ?taskType=text|emergence, ?limit=, ?offset=); an agent-scoped key sees only its agents' jobs", h.list)
	s.Handle("POST "+base, `Create a cron job {"agentId":1,"name":"...","cronExpression":"0 9 * * 1-5","timezone":"Asia/Shanghai","taskType":"text"|"emergence","triggerMessage":"...","enabled":true}; a bad expression or time zone gets 400`, h.create)
	s.Handle("GET "+base+"/{id}", "Read a cron job, with its next and last run", h.get)
	s.Handle("PUT "+base+"/{id}", "Replace a cron job (name and cronExpression required; omitted optional fields take their defaults)", h.replace)
	s.Handle("PATCH "+base+"/{id}", `Change some fields of a cron job, e.g. {"enabled":false}`, h.patch)
	s.Handle("DELETE "+base+"/{id}", "Delete a cron job", h.delete)
}

type handlers struct {
	svc *Service
}

// scope is the set of agents the caller may see: nil means all.
func scope(r *http.Request) []int64 {
	p := httpapi.PrincipalFrom(r.Context())
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

// authorize lets operators (admin keys) manage every cron job, and agent keys their
// agents' jobs.
func authorize(r *http.Request, agentID int64) error {
	if httpapi.PrincipalFrom(r.Context()).Admin {
		return nil
	}
	return httpapi.Authorize(r, agentID)
}

func queryInt(r *http.Request, name string, min int) (int, error) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < min {
		return 0, httpapi.BadRequest("%s must be a whole number of at least %d, got %q", name, min, raw)
	}
	return n, nil
}

func (h handlers) list(r *http.Request) (any, error) {
	f := Filter{AgentIDs: scope(r), TaskType: r.URL.Query().Get("taskType")}
	if raw := r.URL.Query().Get("agentId"); raw != "" {
		id, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || id <= 0 {
			return nil, httpapi.BadRequest("agentId must be a positive integer, got %q", raw)
		}
		if err := authorize(r, id); err != nil {
			return nil, err
		}
		f.AgentID = id
	}
	if f.TaskType != "" && f.TaskType != TaskText && f.TaskType != TaskEmergence {
		return nil, httpapi.BadRequest("taskType %q is not supported; accepted: %s, %s", f.TaskType, TaskText, TaskEmergence)
	}
	var err error
	if f.Limit, err = queryInt(r, "limit", 1); err != nil {
		return nil, err
	}
	if f.Offset, err = queryInt(r, "offset", 0); err != nil {
		return nil, err
	}
	jobs, err := h.svc.List(r.Context(), f)
	if err != nil {
		return nil, err
	}
	return map[string]any{"count": len(jobs), "jobs": jobs}, nil
}

func (h handlers) create(r *http.Request) (any, error) {
	var in Input
	if err := httpapi.Decode(r, &in); err != nil {
		return nil, err
	}
	if in.AgentID == nil {
		return nil, httpapi.BadRequest("agentId is required")
	}
	if *in.AgentID <= 0 {
		return nil, httpapi.BadRequest("agentId must be a positive number, got %d", *in.AgentID)
	}
	if err := authorize(r, *in.AgentID); err != nil {
		return nil, err
	}
	j, err := h.svc.Create(r.Context(), in)
	if err != nil {
		return nil, err
	}
	return httpapi.Created(j), nil
}

// job reads the {id} job and checks the caller may act for its agent; a job of another
// agent is reported as not found, so ids do not reveal other tenants' jobs.
func (h handlers) job(r *http.Request) (Job, error) {
	id, err := httpapi.PathInt64(r, "id")
	if err != nil {
		return Job{}, err
	}
	j, err := h.svc.Get(r.Context(), id)
	if err != nil {
		return Job{}, err
	}
	if p := httpapi.PrincipalFrom(r.Context()); !p.Admin && !p.MayAct(j.AgentID) {
		return Job{}, &notFoundError{id: id}
	}
	return j, nil
}

func (h handlers) get(r *http.Request) (any, error) {
	return h.job(r)
}

func (h handlers) replace(r *http.Request) (any, error) {
	return h.update(r, true)
}

func (h handlers) patch(r *http.Request) (any, error) {
	return h.update(r, false)
}

func (h handlers) update(r *http.Request, replace bool) (any, error) {
	j, err := h.job(r)
	if err != nil {
		return nil, err
	}
	var in Input
	if err := httpapi.Decode(r, &in); err != nil {
		return nil, err
	}
	if replace {
		return h.svc.Replace(r.Context(), j.ID, in)
	}
	return h.svc.Patch(r.Context(), j.ID, in)
}

func (h handlers) delete(r *http.Request) (any, error) {
	j, err := h.job(r)
	if err != nil {
		return nil, err
	}
	if err := h.svc.Delete(r.Context(), j.ID); err != nil {
		return nil, err
	}
	return map[string]any{"id": j.ID, "deleted": true}, nil
}
