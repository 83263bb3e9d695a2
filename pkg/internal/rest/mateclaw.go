package rest

import (
	"context"
	"github.com/matememory/matememory/pkg/api"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// registerMateClaw adds MateClaw's workspace routes (WorkspaceFileController), mapped on the
// same service, so MateClaw's admin UI and clients work unchanged:
//
//	GET    /api/v1/agents/{agentId}/workspace/files            files without content
//	GET    /api/v1/agents/{agentId}/workspace/files/{name...}  one file
//	PUT    /api/v1/agents/{agentId}/workspace/files/{name...}  {"content":"..."}: create or replace
//	DELETE /api/v1/agents/{agentId}/workspace/files/{name...}
//	GET    /api/v1/agents/{agentId}/workspace/prompt-files     enabled files, in order
//	PUT    /api/v1/agents/{agentId}/workspace/prompt-files     {"files":[...]}: enable these, in this order
//
// They answer 200 on success as MateClaw does (a create is not 201), with MateClaw's field
// names; If-Match works on them as on the native routes.
func registerMateClaw(s *httpapi.Server, h wsHandlers) {
	const base = "/api/v1/agents/{agentId}/workspace"
	tags := []string{"MateClaw"}
	rest := map[string]any{httpapi.MetaRest: "filename", httpapi.MetaParamDoc: filenameDoc}
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: base + "/files", OperationID: "mateclawListFiles", Tags: tags,
		Summary: "MateClaw: the agent's files without content, by sort order then name", Errors: []int{403}}, h.mcList)
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: base + "/files/{filename}", OperationID: "mateclawGetFile", Tags: tags,
		Summary: "MateClaw: read a file", Metadata: rest, Errors: []int{403, 404, 405}}, h.get)
	httpapi.Register(s, huma.Operation{Method: http.MethodPut, Path: base + "/files/{filename}", OperationID: "mateclawWriteFile", Tags: tags,
		Summary: "MateClaw: create or replace a file (200 either way)", Description: "If-Match and If-None-Match: * optional, as on the native route (412 when If-None-Match: * finds the file).",
		Metadata: rest, Errors: []int{403, 404, 405, 409, 412}}, h.mcPut)
	httpapi.Register(s, huma.Operation{Method: http.MethodDelete, Path: base + "/files/{filename}", OperationID: "mateclawDeleteFile", Tags: tags,
		Summary: "MateClaw: delete a file (logically)", Description: "If-Match optional; data is null.",
		Metadata: rest, Errors: []int{403, 404, 405, 409}}, h.mcDelete)
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: base + "/prompt-files", OperationID: "mateclawPromptFiles", Tags: tags,
		Summary: "MateClaw: the files injected into the system prompt, in order", Errors: []int{403}}, h.promptFiles)
	httpapi.Register(s, huma.Operation{Method: http.MethodPut, Path: base + "/prompt-files", OperationID: "mateclawSetPromptFiles", Tags: tags,
		Summary: "MateClaw: inject exactly these files, in this order; every other file is disabled", Errors: []int{403, 404}}, h.setPromptFiles)
}

// MateClawFile is a file as MateClaw's WorkspaceFileEntity shows it (content null in listings).
type MateClawFile struct {
	AgentID    int64     `json:"agentId"`
	Filename   string    `json:"filename"`
	Content    *string   `json:"content"`
	FileSize   int64     `json:"fileSize"`
	Enabled    bool      `json:"enabled"`
	SortOrder  int       `json:"sortOrder"`
	Version    int64     `json:"version"`
	UpdateTime time.Time `json:"updateTime"`
	Deleted    int       `json:"deleted"`
}

func (h wsHandlers) mcList(ctx context.Context, in *httpapi.AgentPath) (*httpapi.Response[[]MateClawFile], error) {
	if err := httpapi.Act(ctx, in.AgentID); err != nil {
		return nil, err
	}
	files, err := h.ws.List(ctx, in.AgentID, "")
	if err != nil {
		return nil, err
	}
	out := make([]MateClawFile, len(files))
	for i, f := range files {
		out[i] = MateClawFile{AgentID: in.AgentID, Filename: f.Filename, FileSize: f.FileSize, Enabled: f.Enabled,
			SortOrder: f.SortOrder, Version: f.Version, UpdateTime: f.UpdateTime}
	}
	return httpapi.OK(out), nil
}

func (h wsHandlers) mcPut(ctx context.Context, in *putInput) (*httpapi.Versioned[api.File], error) {
	f, _, err := h.write(ctx, in)
	if err != nil {
		return nil, err
	}
	return httpapi.AnswerVersion(http.StatusOK, f.Version, f.File), nil
}

func (h wsHandlers) mcDelete(ctx context.Context, in *WriteParams) (*httpapi.Response[any], error) {
	if err := h.remove(ctx, in); err != nil {
		return nil, err
	}
	return httpapi.OK[any](nil), nil
}

func (h wsHandlers) promptFiles(ctx context.Context, in *httpapi.AgentPath) (*httpapi.Response[[]string], error) {
	if err := httpapi.Act(ctx, in.AgentID); err != nil {
		return nil, err
	}
	names, err := h.ws.PromptFiles(ctx, in.AgentID)
	if err != nil {
		return nil, err
	}
	return httpapi.OK(names), nil
}

type promptFilesBody struct {
	Files []string `json:"files" nullable:"false" example:"[\"AGENTS.md\",\"SOUL.md\"]" doc:"The files to inject, in order (an empty list disables every file)."`
}

type promptFilesInput struct {
	httpapi.AgentPath
	RequestID string `header:"X-Request-Id" doc:"Kept in the files' history as the change's ref (its first 128 bytes)."`
	Body      promptFilesBody
}

func (h wsHandlers) setPromptFiles(ctx context.Context, in *promptFilesInput) (*httpapi.Response[[]string], error) {
	if err := httpapi.Act(ctx, in.AgentID); err != nil {
		return nil, err
	}
	names, err := h.ws.SetPromptFiles(ctx, in.AgentID, in.Body.Files, workspace.Change{Actor: store.ActorAPI, Ref: httpapi.CleanRef(in.RequestID)})
	if err != nil {
		return nil, err
	}
	return httpapi.OK(names), nil
}
