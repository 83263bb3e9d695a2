package event_test

import (
	"encoding/json"
	"errors"
	"github.com/matememory/matememory/pkg/internal/fault"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/event"
)

func valid() *event.ConversationCompletedEvent {
	return &event.ConversationCompletedEvent{EventID: "e1", AgentID: 7, ConversationID: "c1", UserMessage: "hello",
		AssistantReply: "hi", MessageCount: 4, TriggerSource: event.TriggerChannel}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mut    func(e *event.ConversationCompletedEvent)
		errHas string
	}{
		{"valid", func(*event.ConversationCompletedEvent) {}, ""},
		{"each trigger", func(e *event.ConversationCompletedEvent) { e.TriggerSource = event.TriggerAPI }, ""},
		{"zero messages", func(e *event.ConversationCompletedEvent) { e.MessageCount = 0 }, ""},
		{"agent", func(e *event.ConversationCompletedEvent) { e.AgentID = 0 }, "agentId must be a positive number, got 0"},
		{"negative agent", func(e *event.ConversationCompletedEvent) { e.AgentID = -3 }, "agentId must be a positive number, got -3"},
		{"conversation", func(e *event.ConversationCompletedEvent) { e.ConversationID = "" }, "conversationId is empty"},
		{"long conversation", func(e *event.ConversationCompletedEvent) { e.ConversationID = strings.Repeat("x", 129) }, "at most 128"},
		// Any source is accepted (a chat service's own channel names), and none at all.
		{"own trigger", func(e *event.ConversationCompletedEvent) { e.TriggerSource = "wecom-bot" }, ""},
		{"upper-case trigger", func(e *event.ConversationCompletedEvent) { e.TriggerSource = "WEB" }, ""},
		{"empty trigger", func(e *event.ConversationCompletedEvent) { e.TriggerSource = "" }, ""},
		{"trigger with a space", func(e *event.ConversationCompletedEvent) { e.TriggerSource = "we b" }, `triggerSource "we b" may not contain spaces`},
		{"long trigger", func(e *event.ConversationCompletedEvent) { e.TriggerSource = strings.Repeat("x", 65) }, "triggerSource is 65 bytes; at most 64"},
		{"turn outcome", func(e *event.ConversationCompletedEvent) {
			e.TurnStatus, e.FinishReason = event.TurnError, "error_fallback"
		}, ""},
		{"long finish reason", func(e *event.ConversationCompletedEvent) { e.FinishReason = strings.Repeat("x", 65) }, "finishReason is 65 bytes"},
		{"count", func(e *event.ConversationCompletedEvent) { e.MessageCount = -1 }, "messageCount must be 0 or more, got -1"},
		{"event id", func(e *event.ConversationCompletedEvent) { e.EventID = "a b" }, "may not contain spaces"},
		{"no event id", func(e *event.ConversationCompletedEvent) { e.EventID = "" }, "eventId is empty"},
		{"utf8", func(e *event.ConversationCompletedEvent) { e.UserMessage = "\xff" }, "userMessage is not valid UTF-8"},
		{"inline role", func(e *event.ConversationCompletedEvent) { e.Messages = []event.Message{{Role: "bot"}} }, `messages[0]: role "bot"`},
		{"inline tool", func(e *event.ConversationCompletedEvent) { e.Messages = []event.Message{{Role: "tool"}} }, "needs toolCallId"},
		{"several at once", func(e *event.ConversationCompletedEvent) { e.AgentID, e.MessageCount = 0, -1 }, "agentId must be a positive number, got 0; messageCount"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := valid()
			tc.mut(e)
			err := e.Validate()
			if tc.errHas == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var inv *event.InvalidError
			if !errors.As(err, &inv) || !strings.Contains(err.Error(), tc.errHas) || !errors.Is(err, fault.ErrInvalid) {
				t.Fatalf("err %v, want InvalidError with %q", err, tc.errHas)
			}
		})
	}
}

// Issue 9.4: event messages' toolCalls are checked exactly as the messages route checks
// them: a string or an object is refused with a message saying the expected shape.
func TestEventToolCallsValidated(t *testing.T) {
	for raw, want := range map[string]string{
		`"call it"`:   "got a string",
		`{"id":"c1"}`: "got an object",
		`[{"type":"function","function":{"name":"f","arguments":"{}"}}]`: "toolCalls[0].id is empty",
		`[{"id":"c1","function":{"name":"f","arguments":{"a":1}}}]`:      "JSON array of OpenAI tool calls",
		`[{"id":"c1","type":"function","function":{"arguments":"{}"}}]`:  "function.name is empty",
	} {
		e := valid()
		e.Messages = []event.Message{{Role: "assistant", ToolCalls: json.RawMessage(raw)}}
		err := e.Validate()
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "messages[0]") {
			t.Errorf("toolCalls %s: %v (want %q)", raw, err, want)
		}
	}
	e := valid()
	e.Messages = []event.Message{{Role: "assistant", ToolCalls: json.RawMessage(`[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]`)}, {Role: "assistant", ToolCalls: json.RawMessage(`null`)}}
	if err := e.Validate(); err != nil {
		t.Fatalf("valid tool calls refused: %v", err)
	}
}
