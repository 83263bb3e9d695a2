package client

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/matememory/matememory/pkg/api"
	"net/http"
	"net/url"
)

// ToolDefinition is an OpenAI function-calling tool definition, ready to pass to a model.
type ToolDefinition = api.ToolDefinition

// ToolFunction is the function part of a ToolDefinition. Parameters is a JSON Schema; it
// has no agent id: the agent is bound by the URL CallTool posts to.
type ToolFunction = api.ToolFunction

// Tools returns the four workspace memory tools described in language ("zh", "en", or ""
// for the server's default).
func (c *Client) Tools(ctx context.Context, language string) ([]ToolDefinition, error) {
	var q url.Values
	if language != "" {
		q = url.Values{"language": {language}}
	}
	var out []ToolDefinition
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/api/v1/tools", query: q}, &out)
	return out, err
}

// CallOption configures one CallTool.
type CallOption func(*request)

// WithToolCallID records the model's tool-call id in the history of a file the call
// changes.
func WithToolCallID(id string) CallOption {
	return func(r *request) {
		if r.header == nil {
			r.header = http.Header{}
		}
		r.header.Set("X-Tool-Call-Id", id)
	}
}

// CallTool runs tool name for agentID. args are the tool's arguments: the JSON string the
// model produced (string, []byte or json.RawMessage) or a value to encode; nil means none.
// The result is the tool's JSON output, to hand back to the model as the tool message. A
// call the model got wrong (unknown file, bad arguments) is an *APIError whose Msg is meant
// for the model to read.
func (c *Client) CallTool(ctx context.Context, agentID int64, name string, args any, opts ...CallOption) (json.RawMessage, error) {
	var body any
	switch v := args.(type) {
	case nil:
		body = json.RawMessage("{}")
	case string:
		body = rawArgs([]byte(v))
	case []byte:
		body = rawArgs(v)
	case json.RawMessage:
		body = rawArgs(v)
	default:
		body = v
	}
	r := request{method: http.MethodPost, path: agentPath(agentID) + "/tools/" + seg(name), body: body}
	for _, o := range opts {
		o(&r)
	}
	var out json.RawMessage
	if _, err := c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func rawArgs(b []byte) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 {
		return json.RawMessage("{}")
	}
	return b
}
