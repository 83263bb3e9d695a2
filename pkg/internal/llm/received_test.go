package llm_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/matememory/matememory/pkg/internal/llm"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
)

// TestFakeReceivesSameRequest: the fake endpoint reads the same request from the current
// client as from the baseline path (openai-go's Chat.Completions.New, as before): model,
// messages and roles, max_tokens (not max_completion_tokens), response_format only in
// JSON mode, temperature only when set.
func TestFakeReceivesSameRequest(t *testing.T) {
	fake := llmtest.New(t, func(llmtest.Received) llmtest.Reply { return llmtest.Reply{Content: "{}"} })
	temp := 0.3
	zero := 0.0
	cases := []struct {
		name string
		req  llm.Request
	}{
		{"extract", llm.Request{Messages: []llm.Message{{Role: "system", Content: "Extract."}, {Role: "user", Content: "我们 <b>&</b>"}}, MaxTokens: 900, JSON: true}},
		{"temperature", llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}, Temperature: &temp}},
		{"zero temperature", llm.Request{Messages: []llm.Message{{Role: "assistant", Content: "a"}, {Role: "other", Content: "b"}}, MaxTokens: 1, Temperature: &zero}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(fake.Received())
			if _, err := llm.CompleteBaseline(llm.NewOpenAI(fake.Config()), context.Background(), tc.req); err != nil {
				t.Fatal(err)
			}
			if _, err := llm.NewOpenAI(fake.Config()).Complete(context.Background(), tc.req); err != nil {
				t.Fatal(err)
			}
			rec := fake.Received()[before:]
			if len(rec) != 2 {
				t.Fatalf("%d requests received, want 2", len(rec))
			}
			old, cur := rec[0], rec[1]
			if !reflect.DeepEqual(old, cur) {
				t.Errorf("received\nbefore %+v\nnow    %+v", old, cur)
			}
			if cur.Model != "fake-model" || len(cur.Messages) != len(tc.req.Messages) {
				t.Errorf("model %q, %d messages", cur.Model, len(cur.Messages))
			}
			for i, m := range cur.Messages {
				want := tc.req.Messages[i].Role
				if want != "system" && want != "assistant" {
					want = "user"
				}
				if m.Role != want || m.Content != tc.req.Messages[i].Content {
					t.Errorf("message %d = %+v, want role %s content %q", i, m, want, tc.req.Messages[i].Content)
				}
			}
			if cur.MaxTokens != tc.req.MaxTokens || cur.MaxCompletionTokens != 0 {
				t.Errorf("max_tokens %d max_completion_tokens %d, want max_tokens %d", cur.MaxTokens, cur.MaxCompletionTokens, tc.req.MaxTokens)
			}
			if tc.req.JSON != (cur.ResponseFormat != nil) || (cur.ResponseFormat != nil && cur.ResponseFormat.Type != "json_object") {
				t.Errorf("response_format %+v with JSON=%v", cur.ResponseFormat, tc.req.JSON)
			}
			if (tc.req.Temperature == nil) != (cur.Temperature == nil) || (cur.Temperature != nil && *cur.Temperature != *tc.req.Temperature) {
				t.Errorf("temperature %v, want %v", cur.Temperature, tc.req.Temperature)
			}
		})
	}
}
