// Package mcpserver serves the WorkspaceMemoryTool over the Model Context Protocol (the
// official Go SDK): streamable HTTP on the API at /api/v1/agents/{agentId}/mcp, and stdio for
// a local agent.
//
// Every server is bound to one agent when it is built: the agent comes from the URL the
// caller was authorized for (HTTP) or from the command line (stdio), never from a tool
// argument. The tools' input schemas have no agent id, and an agentId argument is refused by
// the tools themselves, exactly as on the REST execution endpoint.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/matememory/matememory/pkg/httpapi"
	"github.com/matememory/matememory/pkg/tool"
)

// Implementation name and version reported to MCP clients.
const (
	ServerName    = "matememory"
	ServerVersion = "1"
)

// Caller is what the MCP tools need from the WorkspaceMemoryTool; *tool.Tools satisfies it.
type Caller interface {
	Call(ctx context.Context, agentID int64, name string, args json.RawMessage) (any, error)
}

// New builds an MCP server whose four memory tools act for agentID only. language ("zh" or
// "en") picks the tool descriptions. log receives failed calls and the SDK's warnings; nil
// discards them.
func New(t Caller, agentID int64, language string, log *slog.Logger) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: ServerName, Title: "MateMemory workspace memory", Version: ServerVersion},
		&mcp.ServerOptions{
			Logger: sdkLogger(log),
			// Tools only: no logging capability (the SDK's historical default).
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
			Instructions: instructions(language, agentID, hasSearch(t)),
		})
	defs := tool.Definitions(language)
	if d, ok := t.(interface {
		Definitions(string) []tool.Definition
	}); ok {
		defs = d.Definitions(language) // the recall tools too, when enabled
	}
	for _, d := range defs {
		s.AddTool(&mcp.Tool{
			Name:        d.Function.Name,
			Description: d.Function.Description,
			InputSchema: d.Function.Parameters,
			Annotations: annotations(d.Function.Name),
		}, handler(t, agentID, d.Function.Name, log))
	}
	return s
}

func instructions(language string, agentID int64, search bool) string {
	if language == "en" {
		s := fmt.Sprintf("Workspace memory of agent %d: list, read, write and edit its Markdown memory files (MEMORY.md, PROFILE.md, memory/YYYY-MM-DD.md...). Read a file before you change it.", agentID)
		if search {
			s += " Search all of it with search_workspace_memory before answering about past events, preferences or identifiers; read the lines a hit points at with read_workspace_memory_lines."
		}
		return s
	}
	s := fmt.Sprintf("智能体 %d 的工作区记忆：列出、读取、写入和编辑其 Markdown 记忆文件（MEMORY.md、PROFILE.md、memory/YYYY-MM-DD.md 等）。修改前先读取。", agentID)
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

// annotations tell clients which tools only read and which replace content.
func annotations(name string) *mcp.ToolAnnotations {
	closed := false
	switch name {
	case tool.ListFiles, tool.ReadFile, tool.SearchMemory, tool.ReadLines:
		return &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &closed}
	case tool.WriteFile:
		destructive := true
		return &mcp.ToolAnnotations{DestructiveHint: &destructive, IdempotentHint: true, OpenWorldHint: &closed}
	default: // EditFile
		destructive := true
		return &mcp.ToolAnnotations{DestructiveHint: &destructive, OpenWorldHint: &closed}
	}
}

// handler runs one tool for the bound agent. A failed call is a tool error (IsError) whose
// text is the message the REST endpoint would answer, so the model can read it and correct
// itself; only a canceled request is a protocol error.
func handler(t Caller, agentID int64, name string, log *slog.Logger) mcp.ToolHandler {
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
		out, err := t.Call(ctx, agentID, name, args)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return nil, err
			}
			status, msg := httpapi.Classify(err)
			if status >= 500 && log != nil {
				log.Error("mcp tool call failed", "agent", agentID, "tool", name, "err", err)
			}
			return &mcp.CallToolResult{
				IsError: true,
				Content: []mcp.Content{&mcp.TextContent{Text: msg}},
				// The HTTP status REST would answer (400, 404, 409...), for clients that branch on it.
				Meta: mcp.Meta{"matememory/status": status},
			}, nil
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
