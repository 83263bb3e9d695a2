package rest

import (
	"errors"
	"io"
	"net/http"

	"github.com/matememory/matememory/pkg/httpapi"
	"github.com/matememory/matememory/pkg/tool"
)

// RegisterTools adds the tool routes: the definitions a chat service hands to its model and
// the execution endpoint bound to the agent in the URL.
func RegisterTools(s *httpapi.Server, t *tool.Tools) {
	s.Handle("GET /api/v1/tools", "The WorkspaceMemoryTool operations (and the recall tools when enabled) as OpenAI function-calling definitions (?language=zh|en); they carry no agent id", func(r *http.Request) (any, error) {
		lang := r.URL.Query().Get("language")
		switch lang {
		case "":
			lang = t.DefaultLanguage()
		case "zh", "en":
		default:
			return nil, httpapi.BadRequest("language %q is not supported; accepted: zh, en", lang)
		}
		return t.Definitions(lang), nil
	})
	s.Handle("POST /api/v1/agents/{agentId}/tools/{toolName}", "Run a workspace memory tool for the agent in the URL; the body is the tool's JSON arguments (X-Tool-Call-Id is kept in the file history)", func(r *http.Request) (any, error) {
		id, err := httpapi.AgentID(r)
		if err != nil {
			return nil, err
		}
		args, err := readBody(r)
		if err != nil {
			return nil, err
		}
		ctx := r.Context()
		if ref := headerRef(r, "X-Tool-Call-Id", "X-Request-Id"); ref != "" {
			ctx = tool.WithRef(ctx, ref)
		}
		return t.Call(ctx, id, r.PathValue("toolName"), args)
	})
}

// readBody reads a raw body up to httpapi.MaxBodyBytes.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, httpapi.MaxBodyBytes))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, httpapi.Errorf(http.StatusRequestEntityTooLarge, "request body exceeds %d bytes", httpapi.MaxBodyBytes)
	}
	if err != nil {
		return nil, httpapi.BadRequest("read request body: %v", err)
	}
	return b, nil
}
