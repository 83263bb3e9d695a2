package api

import "time"

// Blame is a file's line-level provenance: every line of its current version with the
// change that introduced it and the change that last kept it, computed from the file's
// history as git blame computes it from commits.
type Blame struct {
	AgentID  int64       `json:"agentId"`
	Filename string      `json:"filename"`
	Version  int64       `json:"version"`
	Count    int         `json:"count"`
	Lines    []BlameLine `json:"lines"`
}

// BlameLine is one line of a file with its origins.
type BlameLine struct {
	// Number counts from 1.
	Number int    `json:"number"`
	Text   string `json:"text"`
	// Introduced is the change whose version first held the line as it reads now.
	Introduced LineOrigin `json:"introduced"`
	// Confirmed is the newest change that changed the file and still held the line; it
	// equals Introduced when no later change kept it.
	Confirmed LineOrigin `json:"confirmed"`
}

// LineOrigin is a change of a file and, when a pipeline run made it, the run behind it.
type LineOrigin struct {
	Version int64 `json:"version"`
	// Actor is who made the change (api, tool, summarizer, emergence, …); empty for a
	// file's creation by seeding.
	Actor  string `json:"actor,omitempty"`
	Action string `json:"action,omitempty"`
	// Ref is the change's reference: a pipeline run's id, an X-Request-Id or a tool call id.
	Ref  string    `json:"ref,omitempty"`
	Time time.Time `json:"time"`
	// EventID, Conversations and RunKind come from the ledger's run named by Ref.
	EventID       string   `json:"eventId,omitempty"`
	Conversations []string `json:"conversations,omitempty"`
	RunKind       string   `json:"runKind,omitempty"`
}
