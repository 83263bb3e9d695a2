// Package rest holds MateMemory's HTTP handlers: thin ports that decode a request, call the
// application services and return data for the envelope.
package rest

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/matememory/matememory/pkg/httpapi"
	"github.com/matememory/matememory/pkg/store"
	"github.com/matememory/matememory/pkg/workspace"
)

// RegisterWorkspace adds the workspace file routes, the system-prompt injection and the
// agent settings.
//
// The filename is the rest of the path and may contain '/', so …/history and …/rollback are
// told apart from a filename by their suffix (a filename always ends in .md).
func RegisterWorkspace(s *httpapi.Server, ws *workspace.Service) {
	h := wsHandlers{ws: ws}
	const files = "/api/v1/agents/{agentId}/files"
	s.Handle("GET "+files, "List an agent's workspace files (?prefix= filters by name prefix), sorted by sort_order then name", h.list)
	s.Handle("GET "+files+"/{path...}", "Read a workspace file; …/{filename}/history lists its previous versions", h.get)
	s.Handle("PUT "+files+"/{path...}", `Create or replace a file's content {"content":"..."}; If-Match: <version> (0 = create only), a stale version gets 409`, h.put)
	s.Handle("PATCH "+files+"/{path...}", `Change whether a file is injected and its order {"enabled":true,"sortOrder":5}; If-Match optional`, h.patch)
	s.Handle("DELETE "+files+"/{path...}", "Delete a file (logically); If-Match optional", h.delete)
	s.Handle("POST "+files+"/{path...}", `…/{filename}/rollback {"version":N}: make a previous version current again; If-Match optional`, h.post)
	s.Handle("GET /api/v1/agents/{agentId}/system-prompt", "The workspace injection for the system prompt: enabled files by sort_order, each as --- NAME --- and its content", h.systemPrompt)
	s.Handle("GET /api/v1/agents", "The agents the caller may see, in id order (?after=<agentId>&limit=1..1000, default 100); nextAfter is set when a page is full", h.listAgents)
	s.Handle("GET /api/v1/agents/{agentId}", "An agent's settings (language, timezone); seeds its core files when first seen", h.getAgent)
	s.Handle("PATCH /api/v1/agents/{agentId}", `Change an agent's settings {"language":"en","timezone":"Asia/Shanghai"}`, h.patchAgent)
	registerMateClaw(s, h)
}

type wsHandlers struct {
	ws *workspace.Service
}

// fileTarget is what a {path...} names: a file, or its history or rollback.
type fileTarget struct {
	agentID int64
	name    string
	suffix  string // "", "history" or "rollback"
}

func target(r *http.Request) (fileTarget, error) {
	id, err := httpapi.AgentID(r)
	if err != nil {
		return fileTarget{}, err
	}
	t := fileTarget{agentID: id, name: r.PathValue("path")}
	for _, sfx := range []string{"history", "rollback"} {
		if base, ok := strings.CutSuffix(t.name, "/"+sfx); ok {
			t.name, t.suffix = base, sfx
			break
		}
	}
	return t, nil
}

func (t fileTarget) only(r *http.Request, suffixes ...string) error {
	for _, s := range suffixes {
		if t.suffix == s {
			return nil
		}
	}
	switch t.suffix {
	case "":
		return httpapi.Errorf(http.StatusMethodNotAllowed, "%s is not supported on a file; use GET, PUT, PATCH or DELETE", r.Method)
	default:
		return httpapi.Errorf(http.StatusMethodNotAllowed, "%s is not supported on …/%s", r.Method, t.suffix)
	}
}

// fileReply answers a file with its version as the ETag, so a client can send it back in
// If-Match.
func fileReply(status int, f workspace.File, data any) any {
	return httpapi.Reply(status, http.Header{"Etag": {strconv.Quote(strconv.FormatInt(f.Version, 10))}}, data)
}

func (h wsHandlers) list(r *http.Request) (any, error) {
	id, err := httpapi.AgentID(r)
	if err != nil {
		return nil, err
	}
	prefix := r.URL.Query().Get("prefix")
	files, err := h.ws.List(r.Context(), id, prefix)
	if err != nil {
		return nil, err
	}
	return map[string]any{"agentId": id, "count": len(files), "files": files}, nil
}

func (h wsHandlers) get(r *http.Request) (any, error) {
	t, err := target(r)
	if err != nil {
		return nil, err
	}
	switch t.suffix {
	case "":
		f, err := h.ws.Get(r.Context(), t.agentID, t.name)
		if err != nil {
			return nil, err
		}
		return fileReply(http.StatusOK, f, f), nil
	case "history":
		entries, err := h.ws.History(r.Context(), t.agentID, t.name)
		if err != nil {
			return nil, err
		}
		return map[string]any{"agentId": t.agentID, "filename": t.name, "count": len(entries), "history": entries}, nil
	}
	return nil, t.only(r, "", "history")
}

type putBody struct {
	Content *string `json:"content"`
}

// putResult is the file written and whether the write created it.
type putResult struct {
	workspace.File
	Created bool `json:"created"`
}

// writeTarget reads the file a write addresses and its If-Match precondition. notCreate
// names a method ("PATCH", "DELETE") for which If-Match: 0 (create only) makes no sense.
func writeTarget(r *http.Request, notCreate string) (fileTarget, int64, error) {
	t, err := target(r)
	if err != nil {
		return t, 0, err
	}
	if err := t.only(r, ""); err != nil {
		return t, 0, err
	}
	expect, err := httpapi.IfMatch(r)
	if err != nil {
		return t, 0, err
	}
	if notCreate != "" && expect == workspace.CreateOnly {
		return t, 0, httpapi.BadRequest("If-Match: 0 (create only) does not apply to %s; send the file's version", notCreate)
	}
	return t, expect, nil
}

func (h wsHandlers) put(r *http.Request) (any, error) {
	f, created, err := h.write(r)
	if err != nil {
		return nil, err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return fileReply(status, f, putResult{File: f, Created: created}), nil
}

// write is the body of PUT on a file (native and MateClaw routes): the target and its
// If-Match, the {"content"} body, the compare-and-swap write.
func (h wsHandlers) write(r *http.Request) (workspace.File, bool, error) {
	t, expect, err := writeTarget(r, "")
	if err != nil {
		return workspace.File{}, false, err
	}
	var b putBody
	if err := httpapi.Decode(r, &b); err != nil {
		return workspace.File{}, false, err
	}
	if b.Content == nil {
		return workspace.File{}, false, httpapi.BadRequest(`content is required: {"content":"..."}`)
	}
	return h.ws.Write(r.Context(), t.agentID, t.name, *b.Content, expect, change(r))
}

type patchBody struct {
	Enabled   *bool `json:"enabled"`
	SortOrder *int  `json:"sortOrder"`
}

func (h wsHandlers) patch(r *http.Request) (any, error) {
	t, expect, err := writeTarget(r, "PATCH")
	if err != nil {
		return nil, err
	}
	var b patchBody
	if err := httpapi.Decode(r, &b); err != nil {
		return nil, err
	}
	if b.Enabled == nil && b.SortOrder == nil {
		return nil, httpapi.BadRequest(`nothing to change: send "enabled" and/or "sortOrder"`)
	}
	f, err := h.ws.SetFlags(r.Context(), t.agentID, t.name, b.Enabled, b.SortOrder, expect, change(r))
	if err != nil {
		return nil, err
	}
	return fileReply(http.StatusOK, f, f), nil
}

func (h wsHandlers) delete(r *http.Request) (any, error) {
	t, expect, err := writeTarget(r, "DELETE")
	if err != nil {
		return nil, err
	}
	if err := h.ws.Delete(r.Context(), t.agentID, t.name, expect, change(r)); err != nil {
		return nil, err
	}
	return map[string]any{"agentId": t.agentID, "filename": t.name, "deleted": true}, nil
}

type rollbackBody struct {
	Version *int64 `json:"version"`
}

func (h wsHandlers) post(r *http.Request) (any, error) {
	t, err := target(r)
	if err != nil {
		return nil, err
	}
	if t.suffix != "rollback" {
		if t.suffix == "" {
			return nil, httpapi.Errorf(http.StatusMethodNotAllowed, "POST is not supported on a file; use PUT to write it, or POST …/%s/rollback", t.name)
		}
		return nil, t.only(r, "rollback")
	}
	expect, err := httpapi.IfMatch(r)
	if err != nil {
		return nil, err
	}
	if expect == workspace.CreateOnly {
		return nil, httpapi.BadRequest("If-Match: 0 (create only) does not apply to a rollback; send the file's version")
	}
	var b rollbackBody
	if err := httpapi.Decode(r, &b); err != nil {
		return nil, err
	}
	if b.Version == nil {
		return nil, httpapi.BadRequest(`version is required: {"version":N} (see …/history)`)
	}
	f, err := h.ws.Rollback(r.Context(), t.agentID, t.name, *b.Version, expect, change(r))
	if err != nil {
		return nil, err
	}
	return fileReply(http.StatusOK, f, f), nil
}

func (h wsHandlers) systemPrompt(r *http.Request) (any, error) {
	id, err := httpapi.AgentID(r)
	if err != nil {
		return nil, err
	}
	content, err := h.ws.SystemPrompt(r.Context(), id)
	if err != nil {
		return nil, err
	}
	return map[string]any{"agentId": id, "content": content}, nil
}

// agentView is an agent's settings as the API shows them.
type agentView struct {
	AgentID    int64     `json:"agentId"`
	Language   string    `json:"language"`
	Timezone   string    `json:"timezone"`
	CreateTime time.Time `json:"createTime"`
}

func viewAgent(a store.Agent) agentView {
	return agentView{AgentID: a.ID, Language: a.Language, Timezone: a.Timezone, CreateTime: a.CreateTime}
}

func (h wsHandlers) getAgent(r *http.Request) (any, error) {
	id, err := httpapi.AgentID(r)
	if err != nil {
		return nil, err
	}
	a, err := h.ws.EnsureAgent(r.Context(), id)
	if err != nil {
		return nil, err
	}
	return viewAgent(a), nil
}

type agentBody struct {
	Language *string `json:"language"`
	Timezone *string `json:"timezone"`
}

func (h wsHandlers) patchAgent(r *http.Request) (any, error) {
	id, err := httpapi.AgentID(r)
	if err != nil {
		return nil, err
	}
	var b agentBody
	if err := httpapi.Decode(r, &b); err != nil {
		return nil, err
	}
	if b.Language == nil && b.Timezone == nil {
		return nil, httpapi.BadRequest(`nothing to change: send "language" (zh, en) and/or "timezone" (e.g. Asia/Shanghai)`)
	}
	if (b.Language != nil && *b.Language == "") || (b.Timezone != nil && *b.Timezone == "") {
		return nil, httpapi.BadRequest("language and timezone must not be empty strings; leave a setting out to keep it")
	}
	a, err := h.ws.UpdateAgent(r.Context(), id, deref(b.Language), deref(b.Timezone))
	if err != nil {
		return nil, err
	}
	return viewAgent(a), nil
}

// change records an API change, with the caller's request id when it sent one.
func change(r *http.Request) workspace.Change {
	return workspace.Change{Actor: store.ActorAPI, Ref: requestRef(r)}
}

func requestRef(r *http.Request) string { return headerRef(r, "X-Request-Id") }

// headerRef reads the first of the named headers that is set, made fit for the history's
// ref column (httpapi.HeaderRef, the same as MCP).
func headerRef(r *http.Request, names ...string) string { return httpapi.HeaderRef(r.Header, names...) }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
