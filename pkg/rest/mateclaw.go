package rest

import (
	"net/http"
	"time"

	"github.com/matememory/matememory/pkg/httpapi"
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
	s.Handle("GET "+base+"/files", "MateClaw route: the agent's files without content, by sort order then name", h.mcList)
	s.Handle("GET "+base+"/files/{path...}", "MateClaw route: read a file", h.get)
	s.Handle("PUT "+base+"/files/{path...}", `MateClaw route: create or replace a file {"content":"..."} (200 either way); If-Match optional`, h.mcPut)
	s.Handle("DELETE "+base+"/files/{path...}", "MateClaw route: delete a file (logically); If-Match optional", h.mcDelete)
	s.Handle("GET "+base+"/prompt-files", "MateClaw route: the files injected into the system prompt, in order", h.promptFiles)
	s.Handle("PUT "+base+"/prompt-files", `MateClaw route: inject exactly these files, in this order {"files":["AGENTS.md","SOUL.md"]}; every other file is disabled`, h.setPromptFiles)
}

// mcFile is a file as MateClaw's WorkspaceFileEntity shows it (content null in listings).
type mcFile struct {
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

func (h wsHandlers) mcList(r *http.Request) (any, error) {
	id, err := httpapi.AgentID(r)
	if err != nil {
		return nil, err
	}
	files, err := h.ws.List(r.Context(), id, "")
	if err != nil {
		return nil, err
	}
	out := make([]mcFile, len(files))
	for i, f := range files {
		out[i] = mcFile{AgentID: id, Filename: f.Filename, FileSize: f.FileSize, Enabled: f.Enabled,
			SortOrder: f.SortOrder, Version: f.Version, UpdateTime: f.UpdateTime}
	}
	return out, nil
}

func (h wsHandlers) mcPut(r *http.Request) (any, error) {
	f, _, err := h.write(r)
	if err != nil {
		return nil, err
	}
	return fileReply(http.StatusOK, f, f), nil
}

func (h wsHandlers) mcDelete(r *http.Request) (any, error) {
	t, expect, err := writeTarget(r, "DELETE")
	if err != nil {
		return nil, err
	}
	if err := h.ws.Delete(r.Context(), t.agentID, t.name, expect, change(r)); err != nil {
		return nil, err
	}
	return nil, nil
}

func (h wsHandlers) promptFiles(r *http.Request) (any, error) {
	id, err := httpapi.AgentID(r)
	if err != nil {
		return nil, err
	}
	return h.ws.PromptFiles(r.Context(), id)
}

type promptFilesBody struct {
	Files *[]string `json:"files"`
}

func (h wsHandlers) setPromptFiles(r *http.Request) (any, error) {
	id, err := httpapi.AgentID(r)
	if err != nil {
		return nil, err
	}
	var b promptFilesBody
	if err := httpapi.Decode(r, &b); err != nil {
		return nil, err
	}
	if b.Files == nil {
		return nil, httpapi.BadRequest(`files is required: {"files":["AGENTS.md","SOUL.md",...]} (an empty list disables every file)`)
	}
	return h.ws.SetPromptFiles(r.Context(), id, *b.Files, change(r))
}
