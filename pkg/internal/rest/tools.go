package rest

import (
	"context"
	"encoding/json"
	"github.com/matememory/matememory/pkg/api"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/tool"
)

// RegisterTools adds the tool routes: the definitions a chat service hands to its model and
// the execution endpoint bound to the agent in the URL.
func RegisterTools(s *httpapi.Server, t *tool.Tools) {
	tags := []string{"Tools"}
	httpapi.Register(s, huma.Operation{Method: http.MethodGet, Path: "/api/v1/tools", OperationID: "listTools", Tags: tags,
		Summary:     "The workspace memory tools as OpenAI function-calling definitions",
		Description: "The recall tools are included when enabled. They carry no agent id: the agent is bound when a tool runs."},
		func(ctx context.Context, in *toolsInput) (*httpapi.Response[[]api.ToolDefinition], error) {
			lang := in.Language
			if lang == "" {
				lang = t.DefaultLanguage()
			}
			return httpapi.OK(t.Definitions(lang)), nil
		})
	httpapi.Register(s, huma.Operation{Method: http.MethodPost, Path: "/api/v1/agents/{agentId}/tools/{toolName}", OperationID: "callTool", Tags: tags,
		Summary:     "Run a workspace memory tool for the agent in the URL",
		Description: "The body is the tool's JSON arguments (see listTools; an agentId is not one of them); data is the tool's result. X-Tool-Call-Id (or X-Request-Id) is kept in the file history.",
		Errors:      []int{403, 404, 409}},
		func(ctx context.Context, in *toolCallInput) (*httpapi.Response[any], error) {
			if err := httpapi.Act(ctx, in.AgentID); err != nil {
				return nil, err
			}
			if ref := httpapi.CleanRef(in.ToolCallID); ref != "" {
				ctx = tool.WithRef(ctx, ref)
			} else if ref := httpapi.CleanRef(in.RequestID); ref != "" {
				ctx = tool.WithRef(ctx, ref)
			}
			var args json.RawMessage
			if in.Body != nil {
				args = *in.Body
			}
			res, err := t.Call(ctx, in.AgentID, in.ToolName, args)
			if err != nil {
				return nil, err
			}
			return httpapi.OK(res), nil
		})
}

type toolsInput struct {
	Language string `query:"language" enum:"zh,en" doc:"The language of the descriptions; the server's default when absent."`
}

type toolCallInput struct {
	httpapi.AgentPath
	ToolName   string           `path:"toolName" example:"read_workspace_memory_file" doc:"A tool name from listTools."`
	ToolCallID string           `header:"X-Tool-Call-Id" doc:"The model's tool call id, kept in the file history (its first 128 bytes)."`
	RequestID  string           `header:"X-Request-Id" doc:"Kept in the file history when X-Tool-Call-Id is absent (its first 128 bytes)."`
	Body       *json.RawMessage `doc:"The tool's arguments, a JSON object; none for tools without arguments."`
}
