package tokens

// Message is what counting needs of a chat message.
type Message struct {
	Role    string
	Content string
	Name    string
	// ToolCalls are an assistant message's function calls.
	ToolCalls []ToolCall
}

// ToolCall is one function call of an assistant message.
type ToolCall struct {
	Name      string
	Arguments string
}

// MessageTokens counts one message as OpenAI bills it in a chat request: the per-message
// wrapping, the role, the content, the name, and each tool call's name and JSON arguments.
// A tool result is a message whose content is the result.
func MessageTokens(t Tokenizer, m Message) int {
	n := PerMessage + t.Count(m.Role) + t.Count(m.Content)
	if m.Name != "" {
		n += PerName + t.Count(m.Name)
	}
	for _, c := range m.ToolCalls {
		n += PerToolCall + t.Count(c.Name) + t.Count(c.Arguments)
	}
	return n
}

// ChatTokens counts a whole request: every message plus the priming of the reply.
func ChatTokens(t Tokenizer, msgs []Message) int {
	n := ReplyPriming
	for _, m := range msgs {
		n += MessageTokens(t, m)
	}
	return n
}
