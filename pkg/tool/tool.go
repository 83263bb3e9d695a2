// Package tool is the WorkspaceMemoryTool: the four operations an agent may call on its own
// memory files, their OpenAI function-calling definitions, and their safety rules. The agent
// is always the caller's; no definition contains an agent id.
package tool

import (
	"context"
	"encoding/json"

	"github.com/matememory/matememory/pkg/workspace"
)

// Tools executes the workspace memory tools.
type Tools struct {
	ws *workspace.Service
}

// New builds the tools over a workspace service.
func New(ws *workspace.Service) *Tools { return &Tools{ws: ws} }

// Definition is an OpenAI function-calling tool definition.
type Definition struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function is the function part of a Definition.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Definitions returns the four tools (TODO: foundation helper).
func Definitions(language string) []Definition { return nil }

// Call runs tool name for agentID with JSON arguments.
func (t *Tools) Call(ctx context.Context, agentID int64, name string, args json.RawMessage) (any, error) {
	return nil, nil
}
