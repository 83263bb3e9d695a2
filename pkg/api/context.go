package api

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ChatMessage is one chat message in OpenAI's chat-completions format, as the context
// window is exchanged (note the snake_case tool fields, unlike a stored message).
type ChatMessage struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is one function call of an assistant message.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and carries its JSON arguments as a string.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// wireMessage is ChatMessage as JSON, its content kept raw (a string or null).
type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

// MarshalJSON writes content as null for an assistant message that only calls tools, as the
// OpenAI API itself does (some providers reject an empty string there).
func (m ChatMessage) MarshalJSON() ([]byte, error) {
	w := wireMessage{Role: m.Role, Name: m.Name, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
	if m.Content == "" && len(m.ToolCalls) > 0 {
		w.Content = json.RawMessage("null")
	} else {
		b, err := json.Marshal(m.Content)
		if err != nil {
			return nil, err
		}
		w.Content = b
	}
	return json.Marshal(w)
}

// UnmarshalJSON accepts content as a string or null. Fields it does not know are ignored
// here, as a reader of an answer should; the server refuses them in a request by its
// schema, which names the field and the ones accepted (a misspelt "toolCalls" would
// otherwise lose the calls without a word).
func (m *ChatMessage) UnmarshalJSON(b []byte) error {
	var w wireMessage
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*m = ChatMessage{Role: w.Role, Name: w.Name, ToolCalls: w.ToolCalls, ToolCallID: w.ToolCallID}
	raw := bytes.TrimSpace(w.Content)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
	case raw[0] == '"':
		if err := json.Unmarshal(raw, &m.Content); err != nil {
			return err
		}
	default:
		return fmt.Errorf("content must be a string or null (multi-part content is not supported)")
	}
	return nil
}

// ContextTokens is the token account of a context window.
type ContextTokens struct {
	// Total is what the messages cost, reply priming included; it is at most Budget.
	Total  int `json:"total"`
	Budget int `json:"budget"`
	// Trigger is the total above which compaction starts (budget × compact-trigger-ratio).
	Trigger int `json:"trigger"`
	// System is the system message, Workspace the part of it the workspace files take.
	System    int `json:"system"`
	Workspace int `json:"workspace"`
	Summary   int `json:"summary"`
	History   int `json:"history"`
	Current   int `json:"current"`
	Priming   int `json:"priming"`
	// Recall is the part of the system message the memory-recall block takes.
	Recall int `json:"recall,omitempty"`
	// Before is what the whole history would have cost without compaction.
	Before int `json:"before"`
}

// ContextRecall reports what the recall step of a context window did.
type ContextRecall struct {
	Query    string `json:"query"`
	Mode     string `json:"mode,omitempty"`
	Degraded bool   `json:"degraded,omitempty"`
	Notice   string `json:"notice,omitempty"`
	// Hits found, Included in the block (the rest did not fit MaxTokens or the budget).
	Hits     int         `json:"hits"`
	Included int         `json:"included"`
	Tokens   int         `json:"tokens"`
	Sources  []MemoryHit `json:"sources,omitempty"`
}

// WorkspaceCut is one workspace file the system message could not hold whole: the model
// sees a marker where it was cut (or, for a file left out whole, one after the files kept),
// saying what was left out and how to find it (issue 22: never a silent truncation).
type WorkspaceCut struct {
	Filename string `json:"filename"`
	// Tokens is what the file's block takes whole, KeptTokens what of it the message holds
	// (0: left out whole).
	Tokens     int `json:"tokens"`
	KeptTokens int `json:"keptTokens"`
	// Lines and KeptLines count the file's content lines.
	Lines     int `json:"lines"`
	KeptLines int `json:"keptLines"`
}

// ContextResult is an assembled context window and an account of how it was made.
type ContextResult struct {
	// Messages are in OpenAI chat format, in order: system, summary (a user message with
	// the marker), history, current user message.
	Messages  []ChatMessage `json:"messages"`
	Tokens    ContextTokens `json:"tokens"`
	Tokenizer string        `json:"tokenizer"`
	// Exact is false when the count is an estimate (the model's tokenizer is unknown).
	Exact    bool   `json:"exact"`
	Model    string `json:"model,omitempty"`
	Language string `json:"language"`
	// HistorySource is "store" (mate_message) or "inline".
	HistorySource string `json:"historySource"`
	// HistoryMessages is how many history messages there were. Summarized + Trimmed + Kept
	// always equals it: nothing disappears unaccounted.
	HistoryMessages int `json:"historyMessages"`
	// HistoryRead is how many messages were read: fewer than HistoryMessages when the early
	// history is covered by a cached summary and only the messages after it were read.
	HistoryRead int `json:"historyRead"`
	// CurrentFromHistory: the last stored message was the current user message itself (the
	// chat service stored it before asking), so it is used once, last.
	CurrentFromHistory bool `json:"currentFromHistory,omitempty"`
	// Compacted is true when any history was summarized or trimmed.
	Compacted bool `json:"compacted"`
	// Emergency is true for a retry after a context-length error (last 2 exchanges only).
	Emergency bool `json:"emergency,omitempty"`
	// Summarized is how many of the earliest messages the summary stands for.
	Summarized int `json:"summarized"`
	// SummaryKind is "llm", "extractive" (degraded) or "" (no summary).
	SummaryKind string `json:"summaryKind,omitempty"`
	// Trimmed is how many messages were dropped without a summary standing for them.
	Trimmed int `json:"trimmed"`
	// Kept is how many history messages are included verbatim.
	Kept int `json:"kept"`
	// CacheHit: the summary came from the shared cache (or from another replica's call).
	CacheHit bool `json:"cacheHit"`
	// LLMCalls made by this request.
	LLMCalls int `json:"llmCalls"`
	// Degraded: compaction could not use the LLM; DegradedReason says why.
	Degraded       bool   `json:"degraded"`
	DegradedReason string `json:"degradedReason,omitempty"`
	// FlushRequested: a summarize request was published for messages evicted before the
	// summarizer extracted them; FlushReason says why not otherwise.
	FlushRequested bool   `json:"flushRequested"`
	FlushReason    string `json:"flushReason,omitempty"`
	FlushID        string `json:"flushId,omitempty"`
	// SkippedMessages is how many stored messages could not be used (tool_calls that are not
	// an OpenAI tool_calls array) and were left out; Warnings names each. They are not in
	// HistoryMessages.
	SkippedMessages int `json:"skippedMessages,omitempty"`
	// Warnings are unusual decisions the caller may want to log.
	Warnings []string `json:"warnings,omitempty"`
	// Recall reports the recall step, when asked for.
	Recall *ContextRecall `json:"recall,omitempty"`
	// WorkspaceCut lists the workspace files the system message could not hold whole: each
	// is cut, or left out, with a marker the model sees, and a warning says so.
	WorkspaceCut []WorkspaceCut `json:"workspaceCut,omitempty"`
}
