// Package tool is the WorkspaceMemoryTool: the four operations an agent may call on its own
// memory files, their OpenAI function-calling definitions, and their safety rules. The agent
// is always the caller's; no definition contains an agent id.
package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/matememory/matememory/pkg/api"
	"github.com/matememory/matememory/pkg/internal/fault"
	"strings"
	"time"

	"github.com/matememory/matememory/pkg/internal/blame"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// Tool names, as the model sees them.
const (
	ListFiles = "list_workspace_memory_files"
	ReadFile  = "read_workspace_memory_file"
	WriteFile = "write_workspace_memory_file"
	EditFile  = "edit_workspace_memory_file"
)

// Names lists the four tools in the order Definitions returns them.
var Names = []string{ListFiles, ReadFile, WriteFile, EditFile}

// Tools executes the workspace memory tools.
type Tools struct {
	ws     *workspace.Service
	recall Searcher // nil: no recall tools
	blame  Blamer
}

// New builds the tools over a workspace service.
func New(ws *workspace.Service) *Tools { return &Tools{ws: ws, blame: blame.New(ws, nil)} }

// DefaultLanguage is the language of definitions when the caller names none.
func (t *Tools) DefaultLanguage() string { return t.ws.Language() }

// Definition is an OpenAI function-calling tool definition.
type (
	Definition = api.ToolDefinition
	// Function is the function part of a Definition.
	Function = api.ToolFunction
)

// badArgs is a tool call the caller got wrong: fault's one invalid-input error.
func badArgs(format string, args ...any) error { return fault.Invalidf(format, args...) }

// ErrUnknownTool is matched by the error Call returns for a name that is not a tool (a kind
// of fault.ErrNotFound).
var ErrUnknownTool = fault.New(fault.ErrNotFound, "unknown tool")

type unknownTool struct{ name string }

func (e *unknownTool) Error() string {
	return fmt.Sprintf("unknown tool %q; available: %s", e.name, strings.Join(Names, ", "))
}
func (e *unknownTool) Unwrap() error { return ErrUnknownTool }

// FileInfo is one entry of a listing.
type FileInfo struct {
	Filename   string    `json:"filename"`
	Enabled    bool      `json:"enabled"`
	FileSize   int64     `json:"fileSize"`
	UpdateTime time.Time `json:"updateTime"`
	// Tokens and BudgetTokens are set for a budgeted core file (MEMORY.md, PROFILE.md): the
	// tokens its content takes and the budget it should keep to.
	Tokens       *int `json:"tokens,omitempty"`
	BudgetTokens *int `json:"budgetTokens,omitempty"`
}

// ListResult is the output of list_workspace_memory_files.
type ListResult struct {
	AgentID int64      `json:"agentId"`
	Count   int        `json:"count"`
	Files   []FileInfo `json:"files"`
}

// ReadResult is the output of read_workspace_memory_file.
type ReadResult struct {
	AgentID    int64     `json:"agentId"`
	Filename   string    `json:"filename"`
	Enabled    bool      `json:"enabled"`
	FileSize   int64     `json:"fileSize"`
	Content    string    `json:"content"`
	UpdateTime time.Time `json:"updateTime"`
	// Version is what write_workspace_memory_file's expectedVersion takes.
	Version int64 `json:"version"`
	// Tokens and BudgetTokens are set for a budgeted core file, as in FileInfo.
	Tokens       *int `json:"tokens,omitempty"`
	BudgetTokens *int `json:"budgetTokens,omitempty"`
}

// WriteResult is the output of write_workspace_memory_file.
type WriteResult struct {
	AgentID      int64  `json:"agentId"`
	Filename     string `json:"filename"`
	Created      bool   `json:"created"`
	Overwritten  bool   `json:"overwritten"`
	Enabled      bool   `json:"enabled"`
	BytesWritten int    `json:"bytesWritten"`
	Version      int64  `json:"version"`
	Message      string `json:"message"`
}

// EditResult is the output of edit_workspace_memory_file.
type EditResult struct {
	AgentID       int64  `json:"agentId"`
	Filename      string `json:"filename"`
	Replacements  int    `json:"replacements"`
	ReplaceAll    bool   `json:"replaceAll"`
	FileSizeAfter int64  `json:"fileSizeAfter"`
	Version       int64  `json:"version"`
	Message       string `json:"message"`
}

type listArgs struct {
	FilenamePrefix *string `json:"filenamePrefix"`
}

type readArgs struct {
	Filename *string `json:"filename"`
}

type writeArgs struct {
	Filename        *string `json:"filename"`
	Content         *string `json:"content"`
	ExpectedVersion *int64  `json:"expectedVersion"`
}

type editArgs struct {
	Filename   *string `json:"filename"`
	OldText    *string `json:"oldText"`
	NewText    *string `json:"newText"`
	ReplaceAll *bool   `json:"replaceAll"`
}

type refKey struct{}

// WithRef attaches a reference (the model's tool-call id, a request id) that Call records in
// the file's history as the origin of its change.
func WithRef(ctx context.Context, ref string) context.Context {
	return context.WithValue(ctx, refKey{}, ref)
}

func refFrom(ctx context.Context) string {
	s, _ := ctx.Value(refKey{}).(string)
	return s
}

// Call runs tool name for agentID with JSON arguments (an object; empty means {}). The agent
// is the caller's own: an agentId among the arguments is refused, never obeyed.
func (t *Tools) Call(ctx context.Context, agentID int64, name string, args json.RawMessage) (any, error) {
	if t.isRecallTool(name) {
		return t.callRecall(ctx, agentID, name, args)
	}
	switch name {
	case ListFiles, ReadFile, WriteFile, EditFile:
	default:
		return nil, &unknownTool{name: name}
	}
	agent, err := t.ws.EnsureAgent(ctx, agentID)
	if err != nil {
		return nil, err
	}
	ch := workspace.Change{Actor: store.ActorTool, Ref: refFrom(ctx)}
	switch name {
	case ListFiles:
		var a listArgs
		if err := decodeArgs(name, args, &a); err != nil {
			return nil, err
		}
		return t.list(ctx, agentID, deref(a.FilenamePrefix))
	case ReadFile:
		var a readArgs
		if err := decodeArgs(name, args, &a); err != nil {
			return nil, err
		}
		if err := require(name, "filename", a.Filename); err != nil {
			return nil, err
		}
		return t.read(ctx, agentID, *a.Filename)
	case WriteFile:
		var a writeArgs
		if err := decodeArgs(name, args, &a); err != nil {
			return nil, err
		}
		if err := require(name, "filename", a.Filename); err != nil {
			return nil, err
		}
		if err := require(name, "content", a.Content); err != nil {
			return nil, err
		}
		expect := workspace.AnyVersion
		if a.ExpectedVersion != nil {
			if *a.ExpectedVersion < 0 {
				return nil, badArgs("%s: expectedVersion must be the version read_workspace_memory_file returned, or 0 to create a new file; got %d", name, *a.ExpectedVersion)
			}
			expect = *a.ExpectedVersion
		}
		return t.write(ctx, agentID, agent.Language, *a.Filename, *a.Content, expect, ch)
	default: // EditFile
		var a editArgs
		if err := decodeArgs(name, args, &a); err != nil {
			return nil, err
		}
		if err := require(name, "filename", a.Filename); err != nil {
			return nil, err
		}
		if err := require(name, "oldText", a.OldText); err != nil {
			return nil, err
		}
		if err := require(name, "newText", a.NewText); err != nil {
			return nil, err
		}
		return t.edit(ctx, agentID, agent.Language, *a.Filename, *a.OldText, *a.NewText, deref(a.ReplaceAll), ch)
	}
}

func (t *Tools) list(ctx context.Context, agentID int64, prefix string) (ListResult, error) {
	infos, err := t.ws.List(ctx, agentID, prefix)
	if err != nil {
		return ListResult{}, err
	}
	out := ListResult{AgentID: agentID, Count: len(infos), Files: make([]FileInfo, 0, len(infos))}
	for _, f := range infos {
		out.Files = append(out.Files, FileInfo{Filename: f.Filename, Enabled: f.Enabled, FileSize: f.FileSize, UpdateTime: f.UpdateTime,
			Tokens: f.Tokens, BudgetTokens: f.BudgetTokens})
	}
	return out, nil
}

func (t *Tools) read(ctx context.Context, agentID int64, name string) (ReadResult, error) {
	f, err := t.ws.Get(ctx, agentID, name)
	if err != nil {
		return ReadResult{}, err
	}
	return ReadResult{AgentID: agentID, Filename: f.Filename, Enabled: f.Enabled, FileSize: f.FileSize,
		Content: f.Content, UpdateTime: f.UpdateTime, Version: f.Version, Tokens: f.Tokens, BudgetTokens: f.BudgetTokens}, nil
}

func (t *Tools) write(ctx context.Context, agentID int64, lang, name, content string, expect int64, ch workspace.Change) (WriteResult, error) {
	f, created, err := t.ws.Write(ctx, agentID, name, content, expect, ch)
	if err != nil {
		return WriteResult{}, err
	}
	msg := text(lang, "工作区记忆文件已覆写", "Workspace memory file overwritten")
	if created {
		msg = text(lang, "工作区记忆文件已创建", "Workspace memory file created")
	}
	return WriteResult{AgentID: agentID, Filename: f.Filename, Created: created, Overwritten: !created,
		Enabled: f.Enabled, BytesWritten: len(content), Version: f.Version, Message: msg}, nil
}

func (t *Tools) edit(ctx context.Context, agentID int64, lang, name, oldText, newText string, replaceAll bool, ch workspace.Change) (EditResult, error) {
	f, n, err := t.ws.Edit(ctx, agentID, name, oldText, newText, replaceAll, workspace.AnyVersion, ch)
	if err != nil {
		return EditResult{}, err
	}
	return EditResult{AgentID: agentID, Filename: f.Filename, Replacements: n, ReplaceAll: replaceAll,
		FileSizeAfter: f.FileSize, Version: f.Version, Message: text(lang, "工作区记忆文件编辑成功", "Workspace memory file edited")}, nil
}

// decodeArgs reads a JSON object strictly: unknown fields are refused, and so is an agentId,
// with a message that says where the agent comes from.
func decodeArgs(tool string, raw json.RawMessage, v any) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	// Unmarshal also refuses trailing data, so the decoder below sees exactly one object.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return badArgs("%s: arguments must be a JSON object: %v", tool, err)
	}
	for k := range fields {
		if strings.EqualFold(k, "agentId") || strings.EqualFold(k, "agent_id") {
			return badArgs("%s: agentId is not an argument: the agent is the caller's own, taken from the URL and the API key", tool)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			return badArgs("%s: argument %s must be a %s, got %s", tool, te.Field, jsonType(te.Type.Kind().String()), te.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return badArgs("%s: %s; accepted: %s", tool, strings.TrimPrefix(err.Error(), "json: "), strings.Join(ArgNames(tool), ", "))
		}
		return badArgs("%s: invalid arguments: %v", tool, err)
	}
	return nil
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "int", "int64":
		return "whole number"
	case "ptr":
		return "value of the documented type"
	}
	return kind
}

func require[T any](tool, field string, v *T) error {
	if v == nil {
		return badArgs("%s: argument %s is required", tool, field)
	}
	return nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func text(lang, zh, en string) string {
	if lang == "en" {
		return en
	}
	return zh
}
