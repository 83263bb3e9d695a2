package app_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/event"
	"github.com/matememory/matememory/pkg/internal/apptest"
)

// TestIntakeTakesTheSpecsEvents holds both intakes, REST and an event read from the stream
// (pkg/event's decoding), to the spec's ConversationCompletedEvent record: every field but
// the ids may be absent or null (MateClaw checks userMessage != null; Jackson writes a null
// String as null), wrong types stay refused, and the two intakes agree on each shape.
func TestIntakeTakesTheSpecsEvents(t *testing.T) {
	a := apptest.Start(t, "")
	base := "http://" + a.Addr
	n := 0
	id := func() string { n++; return fmt.Sprintf(`"eventId":"e-intake-%d",`, n) }
	for _, c := range []struct {
		name, body string
		ok         bool
		msg        string
	}{
		{"the spec's record", `{"agentId":1,"conversationId":"c1","userMessage":"please remember my cat is called Miso","assistantReply":"Noted.","messageCount":4,"triggerSource":"web"}`, true, ""},
		{"MateClaw's record with null strings (Jackson)", `{"agentId":1,"conversationId":"c1","userMessage":null,"assistantReply":null,"messageCount":4,"triggerSource":null}`, true, ""},
		{"a tool-only turn: no userMessage", `{"agentId":1,"conversationId":"c1","assistantReply":"Done.","messageCount":6,"triggerSource":"channel"}`, true, ""},
		{"no assistantReply", `{"agentId":1,"conversationId":"c1","userMessage":"hello there, how are you","messageCount":4,"triggerSource":"web"}`, true, ""},
		{"no triggerSource", `{"agentId":1,"conversationId":"c1","userMessage":"hello there, how are you","assistantReply":"Fine.","messageCount":4}`, true, ""},
		{"no messageCount", `{"agentId":1,"conversationId":"c1","userMessage":"hello there, how are you","assistantReply":"Fine.","triggerSource":"web"}`, true, ""},
		{"null messageCount", `{"agentId":1,"conversationId":"c1","messageCount":null}`, true, ""},
		{"the ids alone", `{"agentId":1,"conversationId":"c1"}`, true, ""},
		{"null optional extras", `{"agentId":1,"conversationId":"c1","eventId":null,"occurredAt":null,"turnStatus":null,"finishReason":null,"messages":null}`, true, ""},
		{"an inline tool call message with null content", `{"agentId":1,"conversationId":"c1","messages":[{"role":"assistant","content":null,"toolCalls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","toolCallId":"call_1","content":"ok","name":null}]}`, true, ""},
		{"userMessage of the wrong type", `{"agentId":1,"conversationId":"c1","userMessage":5}`, false, "userMessage"},
		{"messageCount of the wrong type", `{"agentId":1,"conversationId":"c1","messageCount":"4"}`, false, "messageCount"},
		{"triggerSource of the wrong type", `{"agentId":1,"conversationId":"c1","triggerSource":true}`, false, "triggerSource"},
		{"messages of the wrong type", `{"agentId":1,"conversationId":"c1","messages":{}}`, false, "messages"},
		{"no agentId", `{"conversationId":"c1","userMessage":"hello there, how are you"}`, false, "agentId"},
		{"null agentId", `{"agentId":null,"conversationId":"c1"}`, false, "agentId"},
		{"no conversationId", `{"agentId":1,"userMessage":"hello there, how are you"}`, false, "conversationId"},
		{"null conversationId", `{"agentId":1,"conversationId":null}`, false, "conversationId"},
	} {
		body := c.body
		if c.ok && !strings.Contains(body, `"eventId"`) {
			body = "{" + id() + body[1:]
		}
		r := do(t, "POST", base+"/api/v1/events/conversation-completed", "", body)
		switch {
		case c.ok && r.status != http.StatusAccepted:
			t.Errorf("%s: REST %d %s; want 202", c.name, r.status, r.Msg)
		case !c.ok && (r.status != http.StatusBadRequest || !strings.Contains(r.Msg, c.msg)):
			t.Errorf("%s: REST %d %q; want 400 naming %s", c.name, r.status, r.Msg, c.msg)
		}
		// The same payload read from the stream (an id from its headers, as a publisher
		// that does not set eventId gives it).
		_, err := event.DecodeCompletedMsg([]byte(body), map[string][]string{"Nats-Msg-Id": {"1:e-stream"}})
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: the stream's decoding refuses it: %v", c.name, err)
		case !c.ok && (err == nil || !strings.Contains(err.Error(), c.msg)):
			t.Errorf("%s: the stream's decoding gives %v; want a refusal naming %s", c.name, err, c.msg)
		}
	}
}
