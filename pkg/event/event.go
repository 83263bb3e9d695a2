// Package event is MateMemory's public event contract: the ConversationCompletedEvent a
// chat service publishes when a reply is done, the manual summarize request, their subjects
// on JetStream, and a Publisher that returns only once JetStream has stored the event.
//
// A chat service in Go imports this package and either posts the event to
// POST /api/v1/events/conversation-completed or publishes it straight onto JetStream:
//
//	nc, _ := nats.Connect(url)
//	pub, _ := eventpub.NewPublisher(nc) // pkg/eventpub
//	defer pub.Close()
//	ack, err := pub.PublishCompleted(ctx, &event.ConversationCompletedEvent{
//		AgentID: 7, ConversationID: "c-42", UserMessage: "...", AssistantReply: "...",
//		MessageCount: 6, TriggerSource: event.TriggerWeb,
//	})
//
// The package is the contract only and depends on the standard library alone (and on
// MateMemory's error vocabulary, itself standard library only: InvalidError is its one
// invalid-input error); the Go client, pkg/client, builds on it, and pkg/eventpub publishes
// on JetStream with nats.go.
package event

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/matememory/matememory/pkg/internal/fault"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// The names chat services need. They are defined here, and MateMemory's own catalogue
// (pkg/internal/bus) refers to them.
const (
	// Stream is the JetStream stream that stores both subjects below.
	Stream = "MATE_EVENTS"
	// SubjectCompleted is the prefix of mate.conversation.completed.<agentId>.
	SubjectCompleted = "mate.conversation.completed"
	// SubjectSummarize is the prefix of mate.memory.summarize.<agentId>.
	SubjectSummarize = "mate.memory.summarize"
	// StreamAgentTriggers is the stream a chat service consumes cron triggers from (with a
	// durable consumer of its own): subject SubjectAgentTrigger.<agentId>.
	StreamAgentTriggers = "MATE_AGENT_TRIGGERS"
	// SubjectAgentTrigger is the prefix of mate.agent.trigger.<agentId>.
	SubjectAgentTrigger = "mate.agent.trigger"
)

// Trigger sources: the spec's "web" / "channel" / "cron", plus "api". Any other source is
// accepted too (a chat service may name its own channels); only TriggerCron is treated
// differently (skipped while skip-cron-conversations is true).
const (
	TriggerWeb     = "web"
	TriggerChannel = "channel"
	TriggerCron    = "cron"
	TriggerAPI     = "api"
)

// TriggerSources lists the well-known trigger sources.
var TriggerSources = []string{TriggerWeb, TriggerChannel, TriggerCron, TriggerAPI}

// Turn outcomes (TurnStatus): a turn that did not complete normally is not extracted.
const (
	TurnCompleted  = "completed"
	TurnError      = "error"
	TurnStopped    = "stopped"
	TurnIncomplete = "incomplete"
)

// Limits checked by Validate.
const (
	MaxIDBytes             = 128
	MaxConversationIDBytes = 128
	MaxInlineMessages      = 1000
	// MaxLabelBytes bounds triggerSource, turnStatus and finishReason.
	MaxLabelBytes = 64
)

// Message is a conversation message carried inline by a chat service that keeps its own
// store; MateMemory stores inline messages in mate_message once per event.
type Message struct {
	Role       string          `json:"role"`
	Content    string          `json:"content"`
	ToolCalls  json.RawMessage `json:"toolCalls,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	Name       string          `json:"name,omitempty"`
}

// ConversationCompletedEvent is published when a conversation turn is complete. The six
// fields after EventID and OccurredAt are the spec's record; MessageCount is the number of
// messages in the conversation so far and UserMessage the last user message.
type ConversationCompletedEvent struct {
	// EventID identifies the event among its agent's events; "<agentId>:<eventId>" is the
	// JetStream Nats-Msg-Id (MsgID), so publishing the same event twice (a client retry)
	// stores it once, and another agent's event with the same id is stored all the same. Empty: the publisher assigns a UUID (and
	// a retry then is a new event: set it yourself to make retries safe).
	EventID string `json:"eventId"`
	// OccurredAt is when the conversation completed; zero: the publisher sets it.
	OccurredAt     time.Time `json:"occurredAt"`
	AgentID        int64     `json:"agentId"`
	ConversationID string    `json:"conversationId"`
	// UserMessage is the last user message. Like every field but the ids it may be absent or
	// null (a tool-only turn has none): then, as in the spec's listener, the length pre-check
	// is skipped. Go reads null as "", so empty means the same.
	UserMessage    string `json:"userMessage"`
	AssistantReply string `json:"assistantReply"`
	MessageCount   int    `json:"messageCount"`
	// TriggerSource is where the turn came from: web, channel, cron, api or any name of the
	// chat service's own (cron conversations are skipped while skip-cron-conversations).
	TriggerSource string `json:"triggerSource"`
	// TurnStatus is how the turn ended: completed (or empty), error, stopped, incomplete, or
	// another status of the chat service's; anything but completed is not extracted.
	TurnStatus string `json:"turnStatus,omitempty"`
	// FinishReason is the agent loop's finish reason as MateClaw names it (normal,
	// return_direct, max_iterations_reached, error_fallback, incomplete, stopped, ...);
	// empty, normal and return_direct are extracted, every other reason is not.
	FinishReason string `json:"finishReason,omitempty"`
	// Messages, when set, are the conversation's new messages, stored by MateMemory before
	// extraction (for chat services that do not post messages to MateMemory's REST API).
	Messages []Message `json:"messages,omitempty"`
}

// SummarizeRequest asks for an extraction of one conversation: from the manual summarize
// endpoint (with ReplyTo: a core NATS subject the worker answers on with an Outcome; the
// cooldown does not apply) or from the context window when it evicts messages not yet
// extracted (Reason "context-eviction", no ReplyTo: coalesced under the cooldown like an
// event).
type SummarizeRequest struct {
	RequestID      string    `json:"requestId"`
	AgentID        int64     `json:"agentId"`
	ConversationID string    `json:"conversationId"`
	RequestedAt    time.Time `json:"requestedAt"`
	ReplyTo        string    `json:"replyTo,omitempty"`
	Reason         string    `json:"reason,omitempty"`
	// Force re-extracts a conversation already extracted up to its last message (after a
	// refused run, say): under the agent's lease like any extraction, and idempotent per
	// message range (the daily entry of a range is appended once).
	Force bool `json:"force,omitempty"`
}

// Outcome is what a worker answers to a SummarizeRequest with a ReplyTo.
type Outcome struct {
	RequestID string `json:"requestId"`
	// Status is completed, skipped, refused or failed.
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	RunID  string `json:"runId,omitempty"`
	// Retrying is true when a failure will be retried automatically.
	Retrying bool `json:"retrying,omitempty"`
}

// InvalidError is an event that can never be processed; its message (Msg) says what to fix.
// It is MateMemory's one invalid-input error (errors.Is matches it against every invalid
// input of the service).
type InvalidError = fault.Invalid

func invalidf(format string, args ...any) error {
	return &InvalidError{Msg: fmt.Sprintf(format, args...)}
}

// CompletedSubject is mate.conversation.completed.<agentId>.
func CompletedSubject(agentID int64) string {
	return SubjectCompleted + "." + strconv.FormatInt(agentID, 10)
}

// SummarizeSubject is mate.memory.summarize.<agentId>.
func SummarizeSubject(agentID int64) string {
	return SubjectSummarize + "." + strconv.FormatInt(agentID, 10)
}

// Subject is the event's subject.
func (e *ConversationCompletedEvent) Subject() string { return CompletedSubject(e.AgentID) }

// Complete fills an empty EventID (a UUID) and a zero OccurredAt (now).
func (e *ConversationCompletedEvent) Complete(now time.Time) {
	if e.EventID == "" {
		e.EventID = NewID()
	}
	if e.OccurredAt.IsZero() {
		e.OccurredAt = now.UTC()
	}
}

// Validate checks the event and says what is wrong in terms a caller can act on.
func (e *ConversationCompletedEvent) Validate() error {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if err := validateID("eventId", e.EventID); err != nil {
		add("%s", err.Error())
	}
	if e.AgentID <= 0 {
		add("agentId must be a positive number, got %d", e.AgentID)
	}
	if err := validateConversationID(e.ConversationID); err != nil {
		add("%s", err.Error())
	}
	for _, f := range []struct{ name, v string }{{"triggerSource", e.TriggerSource}, {"turnStatus", e.TurnStatus}, {"finishReason", e.FinishReason}} {
		if err := validateLabel(f.name, f.v); err != nil {
			add("%s", err.Error())
		}
	}
	if e.MessageCount < 0 {
		add("messageCount must be 0 or more, got %d", e.MessageCount)
	}
	if !utf8.ValidString(e.UserMessage) {
		add("userMessage is not valid UTF-8")
	}
	if !utf8.ValidString(e.AssistantReply) {
		add("assistantReply is not valid UTF-8")
	}
	if len(e.Messages) > MaxInlineMessages {
		add("messages has %d entries; at most %d per event", len(e.Messages), MaxInlineMessages)
	}
	for i, m := range e.Messages {
		if err := m.validate(); err != nil {
			add("messages[%d]: %s", i, err.Error())
		}
	}
	if len(errs) > 0 {
		return &InvalidError{Msg: "invalid ConversationCompletedEvent: " + strings.Join(errs, "; ")}
	}
	return nil
}

// Validate checks a summarize request.
func (r *SummarizeRequest) Validate() error {
	if err := validateID("requestId", r.RequestID); err != nil {
		return &InvalidError{Msg: "invalid SummarizeRequest: " + err.Error()}
	}
	if r.AgentID <= 0 {
		return invalidf("invalid SummarizeRequest: agentId must be a positive number, got %d", r.AgentID)
	}
	if err := validateConversationID(r.ConversationID); err != nil {
		return &InvalidError{Msg: "invalid SummarizeRequest: " + err.Error()}
	}
	return nil
}

var roles = []string{"user", "assistant", "system", "tool"}

func (m Message) validate() error {
	ok := false
	for _, r := range roles {
		ok = ok || m.Role == r
	}
	switch {
	case !ok:
		return invalidf("role %q is not supported; accepted: %s", m.Role, strings.Join(roles, ", "))
	case m.Role == "tool" && m.ToolCallID == "":
		return invalidf("a tool message needs toolCallId (the id of the call it answers)")
	case !utf8.ValidString(m.Content):
		return invalidf("content is not valid UTF-8")
	}
	return ValidateToolCalls(m.ToolCalls)
}

// validateLabel checks a free-form label (empty allowed): short, printable, no spaces.
func validateLabel(field, v string) error {
	if len(v) > MaxLabelBytes {
		return invalidf("%s is %d bytes; at most %d allowed", field, len(v), MaxLabelBytes)
	}
	for _, r := range v {
		if r == utf8.RuneError || unicode.IsSpace(r) || unicode.IsControl(r) {
			return invalidf("%s %q may not contain spaces or control characters", field, v)
		}
	}
	return nil
}

func validateID(field, id string) error {
	switch {
	case id == "":
		return invalidf("%s is empty", field)
	case len(id) > MaxIDBytes:
		return invalidf("%s is %d bytes; at most %d allowed", field, len(id), MaxIDBytes)
	}
	for _, r := range id {
		if r == utf8.RuneError || unicode.IsSpace(r) || unicode.IsControl(r) {
			return invalidf("%s %q may not contain spaces or control characters", field, id)
		}
	}
	return nil
}

func validateConversationID(id string) error {
	switch {
	case strings.TrimSpace(id) == "":
		return invalidf("conversationId is empty")
	case len(id) > MaxConversationIDBytes:
		return invalidf("conversationId is %d bytes; at most %d allowed", len(id), MaxConversationIDBytes)
	case !utf8.ValidString(id):
		return invalidf("conversationId is not valid UTF-8")
	}
	return nil
}

// DecodeCompleted parses and validates an event payload.
func DecodeCompleted(data []byte) (*ConversationCompletedEvent, error) {
	var e ConversationCompletedEvent
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, invalidf("ConversationCompletedEvent is not valid JSON: %v", err)
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return &e, nil
}

// DecodeSummarize parses and validates a summarize request payload.
func DecodeSummarize(data []byte) (*SummarizeRequest, error) {
	var r SummarizeRequest
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, invalidf("SummarizeRequest is not valid JSON: %v", err)
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// ValidateToolCalls checks a message's toolCalls: absent, null, or a JSON array of OpenAI
// tool calls ({"id", "type": "function", "function": {"name", "arguments": "<JSON string>"}}).
// The event intake and the messages route both check with it, so nothing is stored that
// context assembly cannot send to a model.
func ValidateToolCalls(raw json.RawMessage) error {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return nil
	}
	const shape = `toolCalls must be a JSON array of OpenAI tool calls, [{"id":"call_1","type":"function","function":{"name":"...","arguments":"{...}"}}]`
	if s[0] != '[' {
		return invalidf("%s; got %s", shape, jsonKind(s))
	}
	var calls []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal([]byte(s), &calls); err != nil {
		return invalidf("%s: %v", shape, err)
	}
	for i, c := range calls {
		switch {
		case c.ID == "":
			return invalidf("toolCalls[%d].id is empty", i)
		case c.Type != "" && c.Type != "function":
			return invalidf("toolCalls[%d].type %q is not supported; accepted: function", i, c.Type)
		case c.Function.Name == "":
			return invalidf("toolCalls[%d].function.name is empty", i)
		}
	}
	return nil
}

func jsonKind(s string) string {
	switch s[0] {
	case '{':
		return "an object"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	default:
		if !json.Valid([]byte(s)) {
			return "invalid JSON"
		}
		return "a number"
	}
}

// NewID returns a random (version 4) UUID, the id given to an event or request without one.
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("event: no randomness: " + err.Error()) // crypto/rand never fails on supported platforms
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
