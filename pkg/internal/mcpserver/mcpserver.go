// Package mcpserver serves the WorkspaceMemoryTool over the Model Context Protocol (the
// official Go SDK): streamable HTTP on the API at /api/v1/agents/{agentId}/mcp, and stdio for
// a local agent. It serves tools (the four file tools, history, rollback, append, delete and,
// when enabled, memory search) and the agent's memory files as resources
// (memory://{+filename}), with list-changed and updated notifications when a file changes.
//
// Every server is bound to one agent when it is built: the agent comes from the URL the
// caller was authorized for (HTTP) or from the command line (stdio), never from a tool
// argument. The tools' input schemas have no agent id, and an agentId argument is refused.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/panics"
	"github.com/matememory/matememory/pkg/internal/recall"
	"github.com/matememory/matememory/pkg/internal/tool"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// Implementation name and version reported to MCP clients.
const (
	ServerName    = "matememory"
	ServerVersion = "1"
)

// Caller is what the MCP server needs from the WorkspaceMemoryTool; *tool.Tools satisfies it.
type Caller interface {
	// CallFull runs any tool of FullDefinitions for agentID.
	CallFull(ctx context.Context, agentID int64, name string, args json.RawMessage) (any, error)
	// FullDefinitions are the tools served, with the rules of their arguments in their schemas.
	FullDefinitions(language string) []tool.Definition
}

// Transport names the way a server is reached, for the messages it gives.
type Transport int

// The transports.
const (
	HTTP Transport = iota
	Stdio
)

// Options configure New.
type Options struct {
	// Language ("zh" or "en") picks the tool descriptions and titles.
	Language string
	// Transport says how the caller reaches the server (HTTP by default).
	Transport Transport
	// Notify, when true, advertises and sends resources list-changed and updated
	// notifications (the server's owner must call Server.Changed on every file change).
	Notify bool
	// Log receives failed calls and the SDK's warnings; nil discards them.
	Log *slog.Logger
	// Guard recovers, logs and counts a panic in a method handler, which then answers an
	// internal error instead of taking the process down; nil: one that logs to Log.
	Guard *panics.Guard
}

// CacheScope is the cacheScope of every cacheable result (lists, resources/read).
const CacheScope = "private"

// Server is an MCP server bound to one agent.
type Server struct {
	*mcp.Server
	tools   Caller
	agentID int64
	opts    Options
	guard   *panics.Guard
	res     *resources
	// notifying counts the change notifications on their way to this server's sessions
	// (Hub.Changed sends them on their own goroutines; they read the database).
	notifying sync.WaitGroup
}

// New builds an MCP server whose tools and resources act for agentID only.
func New(t Caller, agentID int64, o Options) *Server {
	caps := &mcp.ServerCapabilities{
		// Tools never change at run time: no tools list-changed notifications. No logging,
		// prompts or completions: nothing is advertised that is not served.
		Tools:     &mcp.ToolCapabilities{},
		Resources: &mcp.ResourceCapabilities{Subscribe: o.Notify, ListChanged: o.Notify},
	}
	so := &mcp.ServerOptions{
		Logger:       sdkLogger(o.Log),
		Capabilities: caps,
		Instructions: instructions(o.Language, agentID, hasSearch(t)),
		// Every list and read result is about one agent's memory (its files, their content)
		// and answered to that agent's key: only the requesting client may cache it, never a
		// shared intermediary (the SDK's default is "public").
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.CacheScope = CacheScope },
	}
	if o.Guard == nil {
		o.Guard = panics.New(o.Log, nil)
	}
	s := &Server{tools: t, agentID: agentID, opts: o, guard: o.Guard}
	s.res = newResources(s)
	if o.Notify {
		so.SubscribeHandler = s.res.subscribe
		so.UnsubscribeHandler = func(context.Context, *mcp.UnsubscribeRequest) error { return nil }
	}
	s.Server = mcp.NewServer(&mcp.Implementation{Name: ServerName, Title: "MateMemory workspace memory", Version: ServerVersion}, so)
	s.AddReceivingMiddleware(unserved)
	for _, d := range t.FullDefinitions(o.Language) {
		s.addTool(d)
	}
	s.res.register()
	s.AddReceivingMiddleware(canonical)
	// Added last, so it is the outermost: it recovers a panic of every method handler and
	// every other middleware.
	s.AddReceivingMiddleware(s.recovering)
	return s
}

// recovering turns a panic in a method handler into an internal error for that request;
// the session and the process go on.
func (s *Server) recovering(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (res mcp.Result, err error) {
		if perr := s.guard.Do("mcp.method", func() { res, err = next(ctx, method, req) },
			"agent", s.agentID, "method", method); perr != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error while serving " + method}
		}
		return res, err
	}
}

// unserved answers "method not found" for the methods of capabilities the server does not
// advertise (the SDK would answer them with empty results).
func unserved(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "prompts/list", "prompts/get", "logging/setLevel", "completion/complete":
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound,
				Message: fmt.Sprintf("method %q not found: this server serves tools and resources only", method)}
		}
		return next(ctx, method, req)
	}
}

// AgentID is the agent the server acts for.
func (s *Server) AgentID() int64 { return s.agentID }

func instructions(language string, agentID int64, search bool) string {
	if language == "en" {
		s := fmt.Sprintf("Workspace memory of agent %d: list, read, write, edit, append to, roll back and delete its Markdown memory files (MEMORY.md, PROFILE.md, memory/YYYY-MM-DD.md...), also readable as resources memory://{filename}. Read a file before you change it.", agentID)
		if search {
			s += " Search all of it with search_workspace_memory before answering about past events, preferences or identifiers; read the lines a hit points at with read_workspace_memory_lines."
		}
		return s
	}
	s := fmt.Sprintf("智能体 %d 的工作区记忆：列出、读取、写入、编辑、追加、回滚和删除其 Markdown 记忆文件（MEMORY.md、PROFILE.md、memory/YYYY-MM-DD.md 等），也可作为资源 memory://{filename} 读取。修改前先读取。", agentID)
	if search {
		s += "回答涉及过去的事情、偏好或标识符的问题前，先用 search_workspace_memory 检索全部记忆；用 read_workspace_memory_lines 读取命中的行。"
	}
	return s
}

// hasSearch reports whether the caller offers the recall tools.
func hasSearch(t Caller) bool {
	r, ok := t.(interface{ RecallEnabled() bool })
	return ok && r.RecallEnabled()
}

// outputTypes are the Go types of the tools' structured results; their JSON Schemas are the
// tools' output schemas.
var outputTypes = map[string]reflect.Type{
	tool.ListFiles:    reflect.TypeFor[tool.ListResult](),
	tool.ReadFile:     reflect.TypeFor[tool.ReadResult](),
	tool.WriteFile:    reflect.TypeFor[tool.WriteResult](),
	tool.EditFile:     reflect.TypeFor[tool.EditResult](),
	tool.HistoryFile:  reflect.TypeFor[tool.HistoryResult](),
	tool.BlameFile:    reflect.TypeFor[tool.BlameResult](),
	tool.RollbackFile: reflect.TypeFor[tool.RollbackResult](),
	tool.AppendFile:   reflect.TypeFor[tool.AppendResult](),
	tool.DeleteFile:   reflect.TypeFor[tool.DeleteResult](),
	tool.SearchMemory: reflect.TypeFor[recall.Result](),
	tool.ReadLines:    reflect.TypeFor[tool.LinesResult](),
}

// OutputSchema is the JSON Schema of a tool's structured result (nil for an unknown tool).
func OutputSchema(name string) *jsonschema.Schema {
	t, ok := outputTypes[name]
	if !ok {
		return nil
	}
	s, err := jsonschema.ForType(t, nil)
	if err != nil {
		panic(fmt.Sprintf("output schema of %s: %v", name, err)) // static types: cannot fail
	}
	return s
}

var titles = map[string][2]string{ // zh, en
	tool.ListFiles:    {"列出记忆文件", "List memory files"},
	tool.ReadFile:     {"读取记忆文件", "Read a memory file"},
	tool.WriteFile:    {"写入记忆文件", "Write a memory file"},
	tool.EditFile:     {"编辑记忆文件", "Edit a memory file"},
	tool.HistoryFile:  {"记忆文件历史", "Memory file history"},
	tool.BlameFile:    {"记忆文件每行的来源", "Where each line of a memory file came from"},
	tool.RollbackFile: {"回滚记忆文件", "Roll back a memory file"},
	tool.AppendFile:   {"追加到记忆文件", "Append to a memory file"},
	tool.DeleteFile:   {"删除记忆文件", "Delete a memory file"},
	tool.SearchMemory: {"检索记忆", "Search memory"},
	tool.ReadLines:    {"读取记忆文件的行", "Read lines of a memory file"},
}

func title(name, language string) string {
	t, ok := titles[name]
	if !ok {
		return name
	}
	if language == "en" {
		return t[1]
	}
	return t[0]
}

// addTool serves one tool: its arguments are validated against its input schema (the same
// schema clients see, by jsonschema-go) before the tool runs.
func (s *Server) addTool(d tool.Definition) {
	name := d.Function.Name
	var in jsonschema.Schema
	if err := json.Unmarshal(d.Function.Parameters, &in); err != nil {
		panic(fmt.Sprintf("input schema of %s: %v", name, err))
	}
	resolved, err := in.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("input schema of %s: %v", name, err))
	}
	t := &mcp.Tool{
		Name:        name,
		Title:       title(name, s.opts.Language),
		Description: d.Function.Description,
		InputSchema: d.Function.Parameters,
		Annotations: annotations(name, title(name, s.opts.Language)),
	}
	if out := OutputSchema(name); out != nil {
		t.OutputSchema = out
	}
	s.AddTool(t, s.handler(name, resolved))
}

// annotations tell clients which tools only read and which replace or remove content.
func annotations(name, title string) *mcp.ToolAnnotations {
	closed, destructive, notDestructive := false, true, false
	switch name {
	case tool.ListFiles, tool.ReadFile, tool.SearchMemory, tool.ReadLines, tool.HistoryFile, tool.BlameFile:
		return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &closed}
	case tool.WriteFile, tool.DeleteFile:
		return &mcp.ToolAnnotations{Title: title, DestructiveHint: &destructive, IdempotentHint: true, OpenWorldHint: &closed}
	case tool.AppendFile:
		return &mcp.ToolAnnotations{Title: title, DestructiveHint: &notDestructive, OpenWorldHint: &closed}
	default: // EditFile, RollbackFile
		return &mcp.ToolAnnotations{Title: title, DestructiveHint: &destructive, OpenWorldHint: &closed}
	}
}

// agentArgMessage says where the agent comes from, in the caller's terms.
func (s *Server) agentArgMessage(name string) string {
	if s.opts.Transport == Stdio {
		return fmt.Sprintf("%s: agentId is not an argument: this stdio server acts for agent %d only, the one it was started for (--agent)", name, s.agentID)
	}
	return fmt.Sprintf("%s: agentId is not an argument: the agent is the caller's own, taken from the URL and the API key", name)
}

// handler runs one tool for the bound agent. A failed call is a tool error (IsError) whose
// text says what was wrong, so the model can read it and correct itself; for a call the
// tool refused it is the message the REST endpoint would answer. Only a canceled request is
// a protocol error.
func (s *Server) handler(name string, schema *jsonschema.Resolved) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if req.Extra != nil && req.Extra.Header != nil {
			if ref := httpapi.HeaderRef(req.Extra.Header, "X-Request-Id"); ref != "" {
				ctx = tool.WithRef(ctx, ref)
			}
		}
		var args json.RawMessage
		if req.Params != nil {
			args = req.Params.Arguments
		}
		if msg := s.checkArgs(name, schema, args); msg != "" {
			return toolError(msg, 400), nil
		}
		out, err := s.tools.CallFull(ctx, s.agentID, name, args)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil, err
			}
			status, msg := httpapi.Classify(err)
			if status >= 500 && s.opts.Log != nil {
				s.opts.Log.Error("mcp tool call failed", "agent", s.agentID, "tool", name, "err", err)
			}
			return toolError(msg, status), nil
		}
		// Markdown quotes ('>') and tags stay readable for the model: no HTML escaping.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(out); err != nil {
			return nil, fmt.Errorf("encode %s result: %w", name, err)
		}
		text := bytes.TrimRight(buf.Bytes(), "\n")
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: string(text)}},
			StructuredContent: json.RawMessage(text),
		}, nil
	}
}

// checkArgs validates a call's arguments against the tool's input schema and returns what
// is wrong ("" when nothing is). An agent id gets its own message; a filename the schema
// refuses gets the workspace's explanation of the rule it breaks.
func (s *Server) checkArgs(name string, schema *jsonschema.Resolved, raw json.RawMessage) string {
	var args any = map[string]any{}
	if t := bytes.TrimSpace(raw); len(t) > 0 && !bytes.Equal(t, []byte("null")) {
		if err := json.Unmarshal(t, &args); err != nil {
			return fmt.Sprintf("%s: arguments must be a JSON object: %v", name, err)
		}
	}
	if m, ok := args.(map[string]any); ok {
		for k := range m {
			if strings.EqualFold(k, "agentId") || strings.EqualFold(k, "agent_id") {
				return s.agentArgMessage(name)
			}
		}
		if f, ok := m["filename"].(string); ok {
			if err := workspace.ValidateName(f); err != nil && schema.Validate(args) != nil {
				return err.Error() // what REST answers too
			}
		}
	}
	if err := schema.Validate(args); err != nil {
		msg := fmt.Sprintf("%s: invalid arguments: %v", name, err)
		// A model that guessed an argument's name ("limit") learns the right one.
		accepted := tool.ArgNames(name)
		if m, ok := args.(map[string]any); ok && len(accepted) > 0 {
			for k := range m {
				if !slices.Contains(accepted, k) {
					return msg + "; accepted: " + strings.Join(accepted, ", ")
				}
			}
		}
		return msg
	}
	return ""
}

func toolError(msg string, status int) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: msg}},
		// The HTTP status REST would answer (400, 404, 409...), for clients that branch on it.
		Meta: mcp.Meta{"matememory/status": status},
	}
}

// sdkLogger passes the SDK's warnings and errors to log and drops its per-session info
// lines, which a stateless HTTP server would print for every request. nil stays nil.
func sdkLogger(log *slog.Logger) *slog.Logger {
	if log == nil {
		return nil
	}
	return slog.New(minLevel{Handler: log.With("component", "mcp").Handler(), min: slog.LevelWarn})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}
