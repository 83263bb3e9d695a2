package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/api"
)

// TestChatMessageJSON: content is null for an assistant message that only calls tools and a
// string otherwise; it reads back from a string or null, and multi-part content is refused.
func TestChatMessageJSON(t *testing.T) {
	call := []api.ToolCall{{ID: "c1", Type: "function", Function: api.FunctionCall{Name: "f", Arguments: "{}"}}}
	for _, tc := range []struct {
		name string
		in   api.ChatMessage
		want string
	}{
		{"text", api.ChatMessage{Role: "user", Content: "hi"}, `{"role":"user","content":"hi"}`},
		{"empty text", api.ChatMessage{Role: "assistant"}, `{"role":"assistant","content":""}`},
		{"calls only", api.ChatMessage{Role: "assistant", ToolCalls: call},
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`},
		{"tool result", api.ChatMessage{Role: "tool", Content: "1", ToolCallID: "c1"}, `{"role":"tool","content":"1","tool_call_id":"c1"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.in)
			if err != nil || string(b) != tc.want {
				t.Fatalf("marshal: %s %v; want %s", b, err, tc.want)
			}
			var back api.ChatMessage
			if err := json.Unmarshal(b, &back); err != nil || back.Role != tc.in.Role || back.Content != tc.in.Content ||
				back.ToolCallID != tc.in.ToolCallID || len(back.ToolCalls) != len(tc.in.ToolCalls) {
				t.Fatalf("round trip: %+v %v; want %+v", back, err, tc.in)
			}
		})
	}
	var m api.ChatMessage
	if err := json.Unmarshal([]byte(`{"role":"user","content":[{"type":"text","text":"a"}]}`), &m); err == nil ||
		!strings.Contains(err.Error(), "content must be a string or null") {
		t.Fatalf("multi-part content: %v", err)
	}
	// A reader of an answer ignores a field it does not know (the server's schema refuses
	// one in a request).
	if err := json.Unmarshal([]byte(`{"role":"assistant","content":"x","reasoning":"y"}`), &m); err != nil || m.Content != "x" {
		t.Fatalf("unknown field: %+v %v", m, err)
	}
}
