package goclient_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/client"
	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/apptest"
)

// requireRoute fails fast, with a clear message, when the app does not serve method path;
// the OpenAPI document lists every registered route.
func requireRoute(t *testing.T, a *app.App, method, path string) {
	t.Helper()
	resp, err := http.Get("http://" + a.Addr + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if _, ok := doc.Paths[path][strings.ToLower(method)]; !ok {
		t.Fatalf("endpoint %s %s is not registered by the app (see app.build)", method, path)
	}
}

// chat stores a short exchange worth remembering.
func chat(t *testing.T, c *client.Client, agentID int64, conv string) {
	t.Helper()
	_, err := c.StoreMessages(ctx(t), agentID, conv,
		client.Message{Role: "user", Content: "My name is Ada and I drink green tea every morning."},
		client.Message{Role: "assistant", Content: "Noted, Ada: green tea in the morning."},
		client.Message{Role: "user", Content: "I am writing a compiler in Go this month."},
		client.Message{Role: "assistant", Content: "A Go compiler project, this month. Good luck!"},
	)
	if err != nil {
		t.Fatal(err)
	}
}

// waitRuns polls the run ledger until match finds a run, or fails at the deadline.
func waitRuns(t *testing.T, c *client.Client, agentID int64, f client.RunFilter, match func(client.Run) bool) client.Run {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		runs, err := c.Runs(ctx(t), agentID, f)
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(runs, match); i >= 0 {
			return runs[i]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no matching run for agent %d (%+v) within the deadline; runs: %+v", agentID, f, runs)
		}
		<-tick.C
	}
}

func TestPublishCompletion(t *testing.T) {
	a := apptest.Start(t, "k1=1;k2=2")
	requireRoute(t, a, "POST", "/api/v1/events/conversation-completed")
	requireRoute(t, a, "GET", "/api/v1/memory/{agentId}/runs")
	c := newClient(t, a, "k1")
	chat(t, c, 1, "c-pub")

	e := &event.ConversationCompletedEvent{AgentID: 1, ConversationID: "c-pub",
		UserMessage: "I am writing a compiler in Go this month.", AssistantReply: "A Go compiler project, this month. Good luck!",
		MessageCount: 4, TriggerSource: event.TriggerWeb}
	ack, err := c.PublishCompletion(ctx(t), e)
	if err != nil {
		t.Fatal(err)
	}
	if e.EventID == "" || ack.EventID != e.EventID || ack.Seq == 0 || ack.Duplicate {
		t.Fatalf("ack = %+v for event %q", ack, e.EventID)
	}
	// A retry of the same event (the id was filled in on e) is stored once.
	again, err := c.PublishCompletion(ctx(t), e)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.EventID != ack.EventID {
		t.Fatalf("retry ack = %+v, want a duplicate of %+v", again, ack)
	}

	// Any trigger source is accepted (issue 10.5); a message whose tool calls are not an
	// OpenAI tool_calls array is not.
	bad := &event.ConversationCompletedEvent{AgentID: 1, ConversationID: "c-pub", TriggerSource: "pigeon",
		Messages: []event.Message{{Role: "assistant", ToolCalls: []byte(`"call"`)}}}
	if _, err := c.PublishCompletion(ctx(t), bad); !client.IsBadRequest(err) || !strings.Contains(err.Error(), "toolCalls") {
		t.Fatalf("invalid event: err = %v", err)
	}
	other := &event.ConversationCompletedEvent{AgentID: 2, ConversationID: "c", TriggerSource: event.TriggerWeb}
	if _, err := c.PublishCompletion(ctx(t), other); !client.IsForbidden(err) {
		t.Fatalf("event for another agent: err = %v", err)
	}

	// The summarizer handles the event: a run of it reaches the ledger.
	run := waitRuns(t, c, 1, client.RunFilter{Kind: "summarize"}, func(r client.Run) bool {
		return r.EventID == e.EventID || slices.Contains(r.Conversations, "c-pub")
	})
	if run.AgentID != 1 || run.Kind != "summarize" || run.Status == "" {
		t.Fatalf("run = %+v", run)
	}
	// No LLM is configured here: the offline provider's digest names the conversation in its
	// daily entry, which must be there once although the event was published twice.
	if run.Status != "completed" || run.Provider != "offline" {
		t.Fatalf("run = %+v, want a completed run of the offline provider", run)
	}
	var daily string
	for _, f := range run.FilesChanged {
		if strings.HasPrefix(f, "memory/") {
			daily = f
		}
	}
	if daily == "" {
		t.Fatalf("completed run changed no daily note: %+v", run)
	}
	f, err := c.ReadFile(ctx(t), 1, daily)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(f.Content, "c-pub"); n != 1 {
		t.Fatalf("%s mentions the conversation %d times, want once:\n%s", daily, n, f.Content)
	}
}

func TestSummarize(t *testing.T) {
	a := apptest.Start(t, "")
	requireRoute(t, a, "POST", "/api/v1/memory/{agentId}/summarize/{conversationId}")
	requireRoute(t, a, "GET", "/api/v1/memory/{agentId}/runs")
	c := newClient(t, a, "")
	chat(t, c, 2, "c-sum")

	out, err := c.Summarize(ctx(t), 2, "c-sum")
	if err != nil {
		t.Fatal(err)
	}
	switch out.Status {
	case client.StatusCompleted, client.StatusSkipped, client.StatusRefused:
	default:
		t.Fatalf("summarize = %+v", out)
	}
	if out.Status != client.StatusCompleted && out.Reason == "" {
		t.Fatalf("summarize %s without a reason: %+v", out.Status, out)
	}
	if out.RunID != "" {
		waitRuns(t, c, 2, client.RunFilter{Kind: "summarize"}, func(r client.Run) bool { return r.RunID == out.RunID })
	}
}

func TestEmergence(t *testing.T) {
	a := apptest.Start(t, "")
	requireRoute(t, a, "POST", "/api/v1/memory/{agentId}/emergence")
	requireRoute(t, a, "GET", "/api/v1/memory/{agentId}/runs")
	c := newClient(t, a, "")
	if _, err := c.WriteFile(ctx(t), 3, "memory/2026-04-01.md", "# 2026-04-01\n\n- Ada drinks green tea every morning\n", client.AnyVersion); err != nil {
		t.Fatal(err)
	}
	out, err := c.Emergence(ctx(t), 3)
	var ae *client.APIError
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusInternalServerError:
		// The spec's failure answer is a truthful outcome too; it must say so in its words.
		if !strings.HasPrefix(ae.Msg, "记忆整合失败") {
			t.Fatalf("emergence failure message %q", ae.Msg)
		}
		return
	case err != nil:
		t.Fatal(err)
	}
	switch out.Status {
	case client.StatusCompleted, client.StatusSkipped:
	default:
		t.Fatalf("emergence = %+v", out)
	}
	if out.RunID != "" {
		waitRuns(t, c, 3, client.RunFilter{Kind: "emergence"}, func(r client.Run) bool { return r.RunID == out.RunID })
	}
}

func TestAssembleContext(t *testing.T) {
	a := apptest.Start(t, "")
	requireRoute(t, a, "POST", "/api/v1/agents/{agentId}/conversations/{conversationId}/context")
	c := newClient(t, a, "")
	chat(t, c, 4, "c-ctx")

	res, err := c.AssembleContext(ctx(t), 4, "c-ctx", client.ContextRequest{
		SystemPrompt: "You are a helpful assistant.", UserMessage: "What do I drink?", Model: "gpt-4o-mini"})
	if err != nil {
		t.Fatal(err)
	}
	n := len(res.Messages)
	if n < 2 || res.Messages[0].Role != "system" || !strings.Contains(res.Messages[0].Content, "You are a helpful assistant.") {
		t.Fatalf("messages = %+v", res.Messages)
	}
	if last := res.Messages[n-1]; last.Role != "user" || last.Content != "What do I drink?" {
		t.Fatalf("last message = %+v, want the current user message", last)
	}
	if res.HistorySource != "store" || res.HistoryMessages != 4 || res.Tokens.Total <= 0 || res.Tokens.Total > res.Tokens.Budget {
		t.Fatalf("result = %+v", res)
	}

	// Inline, empty history: only the system prompt and the current message.
	res, err = c.AssembleContext(ctx(t), 4, "c-ctx", client.ContextRequest{
		SystemPrompt: "sys", UserMessage: "hello", Messages: []client.ChatMessage{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.HistorySource != "inline" || res.HistoryMessages != 0 || len(res.Messages) != 2 {
		t.Fatalf("inline empty history: %+v", res)
	}

	retry, err := c.RetryContext(ctx(t), 4, "c-ctx", client.ContextRequest{SystemPrompt: "sys", UserMessage: "again?"})
	if err != nil {
		t.Fatal(err)
	}
	if !retry.Emergency || retry.LLMCalls != 0 {
		t.Fatalf("retry = %+v", retry)
	}

	_, err = c.AssembleContext(ctx(t), 4, "c-ctx", client.ContextRequest{SystemPrompt: "sys", UserMessage: "hi", MaxInputTokens: 5})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("budget below the system prompt: err = %v, want 413", err)
	}
	if _, err := c.AssembleContext(ctx(t), 4, "c-ctx", client.ContextRequest{SystemPrompt: "sys"}); !client.IsBadRequest(err) {
		t.Fatalf("no user message: err = %v, want 400", err)
	}
}
