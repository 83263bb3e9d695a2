package window

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/matememory/matememory/pkg/api"
	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/tokens"
)

// Roles of chat messages.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one chat message in OpenAI's chat-completions format (content null for an
// assistant message that only calls tools). The REST port's schema refuses a field it does
// not know, naming it.
type Message = api.ChatMessage

// ToolCall is one function call of an assistant message.
type ToolCall = api.ToolCall

// FunctionCall names the function and carries its JSON arguments as a string.
type FunctionCall = api.FunctionCall

// validateHistory checks inline history messages.
func validateHistory(msgs []Message) error {
	for i, m := range msgs {
		if err := validateMessage(m); err != nil {
			return invalidf("messages[%d]: %s", i, err.Error())
		}
	}
	return nil
}

func validateMessage(m Message) error {
	switch m.Role {
	case RoleSystem, RoleUser, RoleAssistant, RoleTool:
	case "":
		return fmt.Errorf("role is missing; accepted: system, user, assistant, tool")
	default:
		return fmt.Errorf("role %q is not supported; accepted: system, user, assistant, tool", m.Role)
	}
	if !utf8.ValidString(m.Content) {
		return fmt.Errorf("content is not valid UTF-8")
	}
	if m.Role == RoleTool && m.ToolCallID == "" {
		return fmt.Errorf("a tool message needs tool_call_id (the id of the call it answers)")
	}
	if m.Role != RoleTool && m.ToolCallID != "" {
		return fmt.Errorf("tool_call_id is only allowed on tool messages")
	}
	if len(m.ToolCalls) > 0 && m.Role != RoleAssistant {
		return fmt.Errorf("tool_calls are only allowed on assistant messages")
	}
	seen := map[string]bool{}
	for j, c := range m.ToolCalls {
		switch {
		case c.ID == "":
			return fmt.Errorf("tool_calls[%d].id is empty", j)
		case seen[c.ID]:
			return fmt.Errorf("tool_calls[%d].id %q is repeated", j, c.ID)
		case c.Type != "" && c.Type != "function":
			return fmt.Errorf("tool_calls[%d].type %q is not supported; accepted: function", j, c.Type)
		case c.Function.Name == "":
			return fmt.Errorf("tool_calls[%d].function.name is empty", j)
		}
		seen[c.ID] = true
	}
	return nil
}

// fromStored converts a mate_message row to a chat message.
func fromStored(m conversation.Message) (Message, error) {
	out := Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
	if raw := bytes.TrimSpace(m.ToolCalls); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		if err := json.Unmarshal(raw, &out.ToolCalls); err != nil {
			return out, &DataError{Msg: fmt.Sprintf("stored message %d of conversation %q has tool_calls that are not an OpenAI tool_calls array: %v", m.ID, m.ConversationID, err)}
		}
	}
	for i := range out.ToolCalls {
		if out.ToolCalls[i].Type == "" {
			out.ToolCalls[i].Type = "function"
		}
	}
	return out, nil
}

// item is a history message with what assembly needs to know about it.
type item struct {
	Message
	// id is the mate_message id (0 for inline history).
	id     int64
	tokens int
	hash   [32]byte
}

func counted(m Message) tokens.Message {
	tm := tokens.Message{Role: m.Role, Content: m.Content, Name: m.Name}
	for _, c := range m.ToolCalls {
		tm.ToolCalls = append(tm.ToolCalls, tokens.ToolCall{Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	return tm
}

// contentHash identifies a message by what it says (not by its row id), so inline and
// stored copies of a conversation share cache entries.
func contentHash(m Message) [32]byte {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field(m.Role)
	field(m.Name)
	field(m.Content)
	field(m.ToolCallID)
	for _, c := range m.ToolCalls {
		field(c.ID)
		field(c.Function.Name)
		field(c.Function.Arguments)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// oneLine collapses whitespace and cuts s to at most n runes, marking the cut.
func oneLine(s string, n int, cut string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + cut
}
