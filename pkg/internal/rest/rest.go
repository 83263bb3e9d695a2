// Package rest is MateMemory's HTTP port: every route of the REST API (MCP has its own
// transport, pkg/internal/mcpserver), each a thin handler that reads a request, calls an
// application service and answers with the wire types of pkg/api. The services' errors are
// fault's; httpapi.Classify maps them to statuses.
package rest

import (
	"context"
	"errors"
	"github.com/matememory/matememory/pkg/api"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/tool"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// RegisterWorkspace adds the workspace file routes, the system-prompt injection and the
// agent settings.
//
// A filename may contain '/', so the file routes take the rest of the path; …/history,
// …/rollback and …/blame (RegisterBlame) are told apart from a filename by their suffix (a filename always ends in .md)
// and are documented as operations of their own.
func RegisterWorkspace(s *httpapi.Server, ws *workspace.Service) {
	h := wsHandlers{ws: ws}
	const files = "/api/v1/agents/{agentId}/files"
	tags := []string{"Workspace"}
	rest := map[string]any{httpapi.MetaRest: "filename", httpapi.MetaParamDoc: filenameDoc}
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: files, OperationID: "listFiles", Tags: tags,
		Summary: "List an agent's workspace files", Description: "Without content, sorted by sort_order then name; ?prefix= filters by name prefix.",
		Errors: []int{403}}, h.list)
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: files + "/{filename}", OperationID: "getFile", Tags: tags,
		Summary: "Read a workspace file", Description: "The ETag is the file's version.", Metadata: rest,
		Errors: []int{403, 404, 405}}, h.get)
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: files + "/{filename}/history", OperationID: "getFileHistory", Tags: tags,
		Summary: "List a file's previous versions", Description: "Newest first, each with its content, action, actor and ref (the X-Request-Id or tool call id of the change).",
		Metadata: map[string]any{httpapi.MetaRest: "filename", httpapi.MetaSuffix: "history", httpapi.MetaParamDoc: filenameDoc},
		Errors:   []int{403, 404}}, h.history)
	httpapi.Register(s, huma.Operation{Method: http.MethodPut, Path: files + "/{filename}", OperationID: "writeFile", Tags: tags,
		Summary:     "Create or replace a file's content",
		Description: "If-Match: <version> writes only over that version (a stale one gets 409); If-Match: 0 creates only (409 when the file exists); If-None-Match: * creates only too, with RFC 9110's 412 when the file exists. 201 when the write created the file.",
		Metadata:    map[string]any{httpapi.MetaRest: "filename", httpapi.MetaAlso: []int{http.StatusCreated}},
		Errors:      []int{403, 404, 405, 409, 412}}, h.put)
	httpapi.Register(s, huma.Operation{Method: http.MethodPatch, Path: files + "/{filename}", OperationID: "setFileFlags", Tags: tags,
		Summary: "Change whether a file is injected and its order", Description: "If-Match optional.",
		Metadata: rest, Errors: []int{403, 404, 405, 409}}, h.patch)
	httpapi.Register(s, huma.Operation{Method: http.MethodDelete, Path: files + "/{filename}", OperationID: "deleteFile", Tags: tags,
		Summary: "Delete a file (logically; its history stays)", Description: "If-Match optional.",
		Metadata: rest, Errors: []int{403, 404, 405, 409}}, h.delete)
	httpapi.Register(s, huma.Operation{Method: http.MethodPost, Path: files + "/{filename}/rollback", OperationID: "rollbackFile", Tags: tags,
		Summary: "Make a previous version of a file current again", Description: "The version comes from …/history; If-Match optional.",
		Metadata: map[string]any{httpapi.MetaRest: "filename", httpapi.MetaSuffix: "rollback", httpapi.MetaParamDoc: filenameDoc,
			httpapi.MetaFallback: "POST is not supported on a file; use PUT to write it, or POST …/{filename}/rollback"},
		Errors: []int{403, 404, 409}}, h.rollback)
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: "/api/v1/agents/{agentId}/system-prompt", OperationID: "getSystemPrompt", Tags: tags,
		Summary: "The workspace injection for the system prompt", Description: "Enabled files by sort_order, each as --- NAME --- and its content.",
		Errors: []int{403}}, h.systemPrompt)
	agents := []string{"Agents"}
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: "/api/v1/agents", OperationID: "listAgents", Tags: agents,
		Summary: "The agents the caller may see, in id order", Description: "A page at a time: nextAfter is set when a page is full; pass it as ?after= for the next."}, h.listAgents)
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: "/api/v1/agents/{agentId}", OperationID: "getAgent", Tags: agents,
		Summary: "An agent's settings", Description: "Seeds the agent's core files when it is first seen.", Errors: []int{403}}, h.getAgent)
	httpapi.Register(s, huma.Operation{Method: http.MethodPatch, Path: "/api/v1/agents/{agentId}", OperationID: "updateAgent", Tags: agents,
		Summary:     "Change an agent's settings (language, timezone, core file budgets)",
		Description: "memoryBudgetTokens and profileBudgetTokens override mate.memory.budget.* for this agent (0 returns to the default).",
		Errors:      []int{403}}, h.patchAgent)
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: "/api/v1/admin/agents/over-budget", OperationID: "listOverBudget", Tags: []string{"Admin"},
		Summary:     "The core files over their token budgets (admin key)",
		Description: "Every agent's MEMORY.md and PROFILE.md counted now with the agents' tokenizer, by agent id then file; a context request cuts such a file explicitly when it does not fit (docs/window.md).",
		Errors:      []int{403}}, h.overBudget)
	registerMateClaw(s, h)
}

// filenameDoc documents a filename parameter with the workspace's rules as the tools' JSON
// Schema states them (tool.FilenamePattern); the service checks them, with messages that say
// which rule a name broke.
var filenameDoc = map[string]func(*huma.Schema){"filename": func(s *huma.Schema) {
	s.Pattern = tool.FilenamePattern // a drive prefix (C:) is refused too, as the description says
}}

type wsHandlers struct {
	ws *workspace.Service
}

// FileParams addresses one file (the parameters of a file operation).
type FileParams struct {
	httpapi.AgentPath
	Filename string `path:"filename" minLength:"1" maxLength:"256" example:"memory/2026-04-01.md" doc:"The file's name: a relative path ending in .md; it may contain '/' (send it as is or percent-encoded), never '.', '..', empty segments, a backslash, a drive prefix (C:) or control characters."`
}

// WriteParams are the parameters of a change to a file: its precondition and the caller's request id.
type WriteParams struct {
	FileParams
	IfMatch   string `header:"If-Match" example:"\"3\"" doc:"The version the change applies to (the ETag of a read); a stale one gets 409. 0 on PUT means create only. Absent or * means any."`
	RequestID string `header:"X-Request-Id" doc:"Kept in the file's history as the change's ref (its first 128 bytes, control characters removed)."`
}

// ctxCheck checks the caller may act for the agent and refuses a name that ends in the
// suffix of another operation (PUT …/history).
func (in FileParams) ctxCheck(ctx context.Context, method string) error {
	if err := httpapi.Act(ctx, in.AgentID); err != nil {
		return err
	}
	for _, sfx := range []string{"history", "rollback", "blame"} {
		if strings.HasSuffix(in.Filename, "/"+sfx) {
			return httpapi.Errorf(http.StatusMethodNotAllowed, "%s is not supported on …/%s", method, sfx)
		}
	}
	return nil
}

// expect reads the If-Match precondition. notCreate names a method ("PATCH", "DELETE")
// for which If-Match: 0 (create only) makes no sense.
func (in WriteParams) expect(notCreate string) (int64, error) {
	expect, err := httpapi.ParseIfMatch(in.IfMatch)
	if err != nil {
		return 0, err
	}
	if notCreate != "" && expect == workspace.CreateOnly {
		return 0, httpapi.BadRequest("If-Match: 0 (create only) does not apply to %s; send the file's version", notCreate)
	}
	return expect, nil
}

func (in WriteParams) change() workspace.Change {
	return workspace.Change{Actor: store.ActorAPI, Ref: httpapi.CleanRef(in.RequestID)}
}

type listInput struct {
	httpapi.AgentPath
	Prefix string `query:"prefix" example:"memory/" doc:"Only files whose name starts with this."`
}

// FileList is an agent's files without content.
type FileList struct {
	AgentID int64          `json:"agentId"`
	Count   int            `json:"count"`
	Files   []api.FileInfo `json:"files"`
}

func (h wsHandlers) list(ctx context.Context, in *listInput) (*httpapi.Response[FileList], error) {
	if err := httpapi.Act(ctx, in.AgentID); err != nil {
		return nil, err
	}
	files, err := h.ws.List(ctx, in.AgentID, in.Prefix)
	if err != nil {
		return nil, err
	}
	return httpapi.OK(FileList{AgentID: in.AgentID, Count: len(files), Files: files}), nil
}

func (h wsHandlers) get(ctx context.Context, in *FileParams) (*httpapi.Versioned[api.File], error) {
	if err := in.ctxCheck(ctx, http.MethodGet); err != nil {
		return nil, err
	}
	f, err := h.ws.Get(ctx, in.AgentID, in.Filename)
	if err != nil {
		return nil, err
	}
	return httpapi.AnswerVersion(http.StatusOK, f.Version, f.File), nil
}

// FileHistory is a file's previous versions, newest first.
type FileHistory struct {
	AgentID  int64              `json:"agentId"`
	Filename string             `json:"filename"`
	Count    int                `json:"count"`
	History  []api.HistoryEntry `json:"history"`
}

func (h wsHandlers) history(ctx context.Context, in *FileParams) (*httpapi.Response[FileHistory], error) {
	if err := in.ctxCheck(ctx, http.MethodGet); err != nil {
		return nil, err
	}
	entries, err := h.ws.History(ctx, in.AgentID, in.Filename)
	if err != nil {
		return nil, err
	}
	return httpapi.OK(FileHistory{AgentID: in.AgentID, Filename: in.Filename, Count: len(entries), History: entries}), nil
}

type putBody struct {
	Content string `json:"content" example:"# Notes\n\n- likes green tea" doc:"The file's new content (at most the workspace's file size limit)."`
}

type putInput struct {
	WriteParams
	IfNoneMatch string `header:"If-None-Match" enum:"*" doc:"* creates only: the write is refused with 412 when the file exists (RFC 9110 create-only semantics). Combine it with no If-Match, or with If-Match: 0."`
	Body        putBody
}

func (h wsHandlers) put(ctx context.Context, in *putInput) (*httpapi.Versioned[api.WriteResult], error) {
	f, created, err := h.write(ctx, in)
	if err != nil {
		return nil, err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return httpapi.AnswerVersion(status, f.Version, api.WriteResult{File: f.File, Created: created}), nil
}

// write is the body of PUT on a file (native and MateClaw routes): the target and its
// If-Match, the {"content"} body, the compare-and-swap write.
func (h wsHandlers) write(ctx context.Context, in *putInput) (workspace.File, bool, error) {
	if err := in.ctxCheck(ctx, http.MethodPut); err != nil {
		return workspace.File{}, false, err
	}
	expect, err := in.expect("")
	if err != nil {
		return workspace.File{}, false, err
	}
	createOnly := in.IfNoneMatch == "*"
	if createOnly {
		if expect != workspace.AnyVersion && expect != workspace.CreateOnly {
			return workspace.File{}, false, httpapi.BadRequest("If-None-Match: * (create only) contradicts If-Match: %s (overwrite that version); send one of them", strings.TrimSpace(in.IfMatch))
		}
		expect = workspace.CreateOnly
	}
	f, created, err := h.ws.Write(ctx, in.AgentID, in.Filename, in.Body.Content, expect, in.change())
	if createOnly && errors.Is(err, workspace.ErrConflict) {
		// RFC 9110 §13.1.2: a failed If-None-Match on a write is 412, where If-Match: 0
		// (this API's own create-only) keeps its 409.
		return f, false, &httpapi.Error{Status: http.StatusPreconditionFailed, Msg: err.Error() + " (If-None-Match: * creates only)", Err: err}
	}
	return f, created, err
}

type patchBody struct {
	Enabled   *bool `json:"enabled,omitempty" doc:"Whether the file is injected into the system prompt."`
	SortOrder *int  `json:"sortOrder,omitempty" doc:"The file's place in the injection (ascending)."`
}

type patchInput struct {
	WriteParams
	Body patchBody
}

func (h wsHandlers) patch(ctx context.Context, in *patchInput) (*httpapi.Versioned[api.File], error) {
	if err := in.ctxCheck(ctx, http.MethodPatch); err != nil {
		return nil, err
	}
	expect, err := in.expect("PATCH")
	if err != nil {
		return nil, err
	}
	if in.Body.Enabled == nil && in.Body.SortOrder == nil {
		return nil, httpapi.BadRequest(`nothing to change: send "enabled" and/or "sortOrder"`)
	}
	f, err := h.ws.SetFlags(ctx, in.AgentID, in.Filename, in.Body.Enabled, in.Body.SortOrder, expect, in.change())
	if err != nil {
		return nil, err
	}
	return httpapi.AnswerVersion(http.StatusOK, f.Version, f.File), nil
}

// Deleted answers a delete.
type Deleted struct {
	AgentID  int64  `json:"agentId"`
	Filename string `json:"filename"`
	Deleted  bool   `json:"deleted"`
}

func (h wsHandlers) delete(ctx context.Context, in *WriteParams) (*httpapi.Response[Deleted], error) {
	if err := h.remove(ctx, in); err != nil {
		return nil, err
	}
	return httpapi.OK(Deleted{AgentID: in.AgentID, Filename: in.Filename, Deleted: true}), nil
}

func (h wsHandlers) remove(ctx context.Context, in *WriteParams) error {
	if err := in.ctxCheck(ctx, http.MethodDelete); err != nil {
		return err
	}
	expect, err := in.expect("DELETE")
	if err != nil {
		return err
	}
	return h.ws.Delete(ctx, in.AgentID, in.Filename, expect, in.change())
}

type rollbackBody struct {
	Version int64 `json:"version" minimum:"1" example:"2" doc:"A previous version from …/history."`
}

type rollbackInput struct {
	WriteParams
	Body rollbackBody
}

func (h wsHandlers) rollback(ctx context.Context, in *rollbackInput) (*httpapi.Versioned[api.File], error) {
	if err := httpapi.Act(ctx, in.AgentID); err != nil {
		return nil, err
	}
	expect, err := in.expect("")
	if err != nil {
		return nil, err
	}
	if expect == workspace.CreateOnly {
		return nil, httpapi.BadRequest("If-Match: 0 (create only) does not apply to a rollback; send the file's version")
	}
	f, err := h.ws.Rollback(ctx, in.AgentID, in.Filename, in.Body.Version, expect, in.change())
	if err != nil {
		return nil, err
	}
	return httpapi.AnswerVersion(http.StatusOK, f.Version, f.File), nil
}

// SystemPrompt is the workspace injection for the system prompt.
type SystemPrompt struct {
	AgentID int64  `json:"agentId"`
	Content string `json:"content"`
}

func (h wsHandlers) systemPrompt(ctx context.Context, in *httpapi.AgentPath) (*httpapi.Response[SystemPrompt], error) {
	if err := httpapi.Act(ctx, in.AgentID); err != nil {
		return nil, err
	}
	content, err := h.ws.SystemPrompt(ctx, in.AgentID)
	if err != nil {
		return nil, err
	}
	return httpapi.OK(SystemPrompt{AgentID: in.AgentID, Content: content}), nil
}

func viewAgent(a store.Agent, b workspace.AgentBudgets) api.Agent {
	return api.Agent{AgentID: a.ID, Language: a.Language, Timezone: a.Timezone, CreateTime: a.CreateTime, Budgets: api.Budgets(b)}
}

func (h wsHandlers) getAgent(ctx context.Context, in *httpapi.AgentPath) (*httpapi.Response[api.Agent], error) {
	if err := httpapi.Act(ctx, in.AgentID); err != nil {
		return nil, err
	}
	a, err := h.ws.EnsureAgent(ctx, in.AgentID)
	if err != nil {
		return nil, err
	}
	b, err := h.ws.Budgets(ctx, in.AgentID)
	if err != nil {
		return nil, err
	}
	return httpapi.OK(viewAgent(a, b)), nil
}

type agentBody struct {
	Language *string `json:"language,omitempty" enum:"zh,en" doc:"The language of the agent's files and prompts."`
	Timezone *string `json:"timezone,omitempty" example:"Asia/Shanghai" doc:"An IANA time zone."`
	// The budgets' bounds are checked by the service, whose message names the file.
	MemoryBudgetTokens  *int `json:"memoryBudgetTokens,omitempty" example:"4000" doc:"MEMORY.md's token budget for this agent: 1 to 1000000, or 0 for the default (mate.memory.budget.memory-tokens)."`
	ProfileBudgetTokens *int `json:"profileBudgetTokens,omitempty" example:"1200" doc:"PROFILE.md's token budget for this agent: 1 to 1000000, or 0 for the default (mate.memory.budget.profile-tokens)."`
}

type agentInput struct {
	httpapi.AgentPath
	Body agentBody
}

func (h wsHandlers) patchAgent(ctx context.Context, in *agentInput) (*httpapi.Response[api.Agent], error) {
	if err := httpapi.Act(ctx, in.AgentID); err != nil {
		return nil, err
	}
	b := in.Body
	if b.Language == nil && b.Timezone == nil && b.MemoryBudgetTokens == nil && b.ProfileBudgetTokens == nil {
		return nil, httpapi.BadRequest(`nothing to change: send "language" (zh, en), "timezone" (e.g. Asia/Shanghai), "memoryBudgetTokens" and/or "profileBudgetTokens"`)
	}
	if (b.Language != nil && *b.Language == "") || (b.Timezone != nil && *b.Timezone == "") {
		return nil, httpapi.BadRequest("language and timezone must not be empty strings; leave a setting out to keep it")
	}
	// The budgets are checked first, and the language and time zone by UpdateAgent before the
	// budgets are written, so a bad value changes nothing.
	if err := workspace.ValidateBudgets(b.MemoryBudgetTokens, b.ProfileBudgetTokens); err != nil {
		return nil, err
	}
	a, err := h.ws.UpdateAgent(ctx, in.AgentID, deref(b.Language), deref(b.Timezone))
	if err != nil {
		return nil, err
	}
	budgets, err := h.ws.SetBudgets(ctx, in.AgentID, b.MemoryBudgetTokens, b.ProfileBudgetTokens)
	if err != nil {
		return nil, err
	}
	return httpapi.OK(viewAgent(a, budgets)), nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
