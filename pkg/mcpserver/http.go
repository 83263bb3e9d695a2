package mcpserver

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/matememory/matememory/pkg/httpapi"
)

// Path is where the API serves MCP for the agent in {agentId}.
const Path = "/api/v1/agents/{agentId}/mcp"

// Tools is what the HTTP handler needs from the WorkspaceMemoryTool; *tool.Tools satisfies it.
type Tools interface {
	Caller
	DefaultLanguage() string
}

// maxCachedServers bounds the per-agent server cache; past it the cache starts over
// (a server is cheap to rebuild, it holds no session state).
const maxCachedServers = 4096

// Handler serves MCP over streamable HTTP. It must run behind httpapi's authentication
// (Register mounts it with HandleRaw): it checks the caller may act for the agent in the
// path (403 otherwise) and hands the request to a server bound to that agent.
//
// The server is stateless (no Mcp-Session-Id): every request is authorized and bound on its
// own, so a session can never carry one agent's binding into another's URL, and any API
// replica can answer any request without sticky sessions.
type Handler struct {
	tools Tools
	log   *slog.Logger
	sdk   *mcp.StreamableHTTPHandler

	mu      sync.Mutex
	servers map[binding]*mcp.Server
}

// binding is the agent and description language a request is served for.
type binding struct {
	agentID  int64
	language string
}

type bindingKey struct{}

// NewHandler builds the streamable HTTP handler. log receives SDK diagnostics; nil discards
// them.
func NewHandler(t Tools, log *slog.Logger) *Handler {
	h := &Handler{tools: t, log: log, servers: map[binding]*mcp.Server{}}
	h.sdk = mcp.NewStreamableHTTPHandler(h.server, &mcp.StreamableHTTPOptions{
		Stateless: true,
		// Plain JSON replies: a stateless tools server sends nothing but the response, and
		// JSON passes through proxies that buffer event streams.
		JSONResponse:        true,
		Logger:              sdkLogger(log),
		MaxRequestBodyBytes: httpapi.MaxBodyBytes,
	})
	return h
}

// Register mounts the handler at Path on s, behind s's authentication.
func Register(s *httpapi.Server, t Tools, log *slog.Logger) *Handler {
	h := NewHandler(t, log)
	s.HandleRaw("POST "+Path, "Model Context Protocol (streamable HTTP, stateless, JSON responses): the four workspace memory tools bound to the agent in the URL (?language=zh|en for their descriptions)", h)
	// The SDK answers these with 405 (no standalone event stream, no sessions to delete);
	// registering them keeps clients from getting the API's 404 instead.
	s.HandleRaw("GET "+Path, "MCP standalone event stream: not offered by this stateless server (405)", h)
	s.HandleRaw("DELETE "+Path, "MCP session termination: not needed by this stateless server (405)", h)
	return h
}

// ServeHTTP authorizes the agent in the path and serves MCP for it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, err := httpapi.AgentID(r)
	if err != nil {
		writeError(w, err)
		return
	}
	lang := r.URL.Query().Get("language")
	switch lang {
	case "":
		lang = h.tools.DefaultLanguage()
	case "zh", "en":
	default:
		writeError(w, httpapi.BadRequest("language %q is not supported; accepted: zh, en", lang))
		return
	}
	ctx := context.WithValue(r.Context(), bindingKey{}, binding{agentID: id, language: lang})
	h.sdk.ServeHTTP(w, r.WithContext(ctx))
}

// server returns the MCP server for the request's binding (getServer of the SDK handler).
func (h *Handler) server(r *http.Request) *mcp.Server {
	b, ok := r.Context().Value(bindingKey{}).(binding)
	if !ok {
		return nil // not reached through ServeHTTP: the SDK answers 400
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.servers[b]; s != nil {
		return s
	}
	if len(h.servers) >= maxCachedServers {
		h.servers = map[binding]*mcp.Server{}
	}
	s := New(h.tools, b.agentID, b.language, h.log)
	h.servers[b] = s
	return s
}

// writeError answers with the API's error envelope.
func writeError(w http.ResponseWriter, err error) {
	status, msg := httpapi.Classify(err)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": status, "msg": msg})
}
