// Package bundle writes and reads an agent's memory as a portable bundle (docs/bundle.md):
// JSON Lines, a manifest on the first line, one record per line, checksums on the last. The
// export streams from the database page by page, so its memory stays bounded whatever the
// agent's size; the import spools the body to a temporary file, validates all of it, then
// applies it in one transaction (all or nothing), merging without overwriting newer data.
//
// The package knows no transport: the REST route, the CLI and the console call it.
package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/matememory/matememory/pkg/internal/fault"
	"hash"
	"time"
)

// Format is the bundle's format name, in its manifest.
const Format = "matememory-agent-bundle"

// Version is the format version this build writes and the newest it reads.
const Version = 1

// ContentType is the bundle's media type.
const ContentType = "application/x-ndjson"

// Record kinds, in the order they appear in a bundle (history records follow their file).
const (
	KindManifest  = "manifest"
	KindAgent     = "agent"
	KindFile      = "file"
	KindHistory   = "history"
	KindCron      = "cron"
	KindMessage   = "message"
	KindRun       = "run"
	KindChecksums = "checksums"
)

// recordKinds are the kinds of data records (between the manifest and the checksums), in
// bundle order; a kind's rank is its index.
var recordKinds = []string{KindAgent, KindFile, KindHistory, KindCron, KindMessage, KindRun}

func rank(kind string) int {
	for i, k := range recordKinds {
		if k == kind {
			return i
		}
	}
	return -1
}

// Includes says which optional parts a bundle holds (files, settings and cron jobs always).
type Includes struct {
	History  bool `json:"history" doc:"Previous versions of every file."`
	Messages bool `json:"messages" doc:"The stored conversation messages."`
	Ledger   bool `json:"ledger" doc:"The run ledger (summarize and emergence attempts)."`
}

// Counts is how many records of each kind a bundle holds.
type Counts struct {
	Agent   int64 `json:"agent"`
	File    int64 `json:"file"`
	History int64 `json:"history"`
	Cron    int64 `json:"cron"`
	Message int64 `json:"message"`
	Run     int64 `json:"run"`
}

func (c *Counts) add(kind string) {
	switch kind {
	case KindAgent:
		c.Agent++
	case KindFile:
		c.File++
	case KindHistory:
		c.History++
	case KindCron:
		c.Cron++
	case KindMessage:
		c.Message++
	case KindRun:
		c.Run++
	}
}

func (c Counts) get(kind string) int64 {
	return map[string]int64{KindAgent: c.Agent, KindFile: c.File, KindHistory: c.History,
		KindCron: c.Cron, KindMessage: c.Message, KindRun: c.Run}[kind]
}

// Manifest is a bundle's first line.
type Manifest struct {
	Kind      string    `json:"kind"`
	Format    string    `json:"format"`
	Version   int       `json:"version"`
	AgentID   int64     `json:"agentId"`
	CreatedAt time.Time `json:"createdAt"`
	Generator string    `json:"generator,omitempty"`
	Includes  Includes  `json:"includes"`
	Counts    Counts    `json:"counts"`
}

// Agent is the agent's settings.
type Agent struct {
	Kind       string    `json:"kind"`
	Language   string    `json:"language"`
	Timezone   string    `json:"timezone"`
	CreateTime time.Time `json:"createTime"`
}

// File is one live workspace file.
type File struct {
	Kind       string    `json:"kind"`
	Filename   string    `json:"filename"`
	Content    string    `json:"content"`
	FileSize   int64     `json:"fileSize"`
	Enabled    bool      `json:"enabled"`
	SortOrder  int       `json:"sortOrder"`
	Version    int64     `json:"version"`
	CreateTime time.Time `json:"createTime"`
	UpdateTime time.Time `json:"updateTime"`
}

// History is one previous version of the file named by the last file record.
type History struct {
	Kind       string    `json:"kind"`
	Filename   string    `json:"filename"`
	Version    int64     `json:"version"`
	Content    string    `json:"content"`
	Enabled    bool      `json:"enabled"`
	Action     string    `json:"action"`
	Actor      string    `json:"actor"`
	Ref        string    `json:"ref"`
	CreateTime time.Time `json:"createTime"`
}

// Cron is one live cron job.
type Cron struct {
	Kind           string     `json:"kind"`
	Name           string     `json:"name"`
	CronExpression string     `json:"cronExpression"`
	Timezone       string     `json:"timezone"`
	TaskType       string     `json:"taskType"`
	TriggerMessage string     `json:"triggerMessage"`
	RequestBody    string     `json:"requestBody"`
	Enabled        bool       `json:"enabled"`
	NextRunTime    *time.Time `json:"nextRunTime"`
	LastRunTime    *time.Time `json:"lastRunTime"`
	CreateTime     time.Time  `json:"createTime"`
	UpdateTime     time.Time  `json:"updateTime"`
}

// Message is one stored conversation message.
type Message struct {
	Kind           string    `json:"kind"`
	ConversationID string    `json:"conversationId"`
	Role           string    `json:"role"`
	Content        string    `json:"content"`
	ToolCalls      string    `json:"toolCalls"`
	ToolCallID     string    `json:"toolCallId"`
	Name           string    `json:"name"`
	CreateTime     time.Time `json:"createTime"`
}

// Run is one row of the run ledger. Conversations and FilesChanged are the stored JSON
// arrays, as text.
type Run struct {
	Kind          string    `json:"kind"`
	RunID         string    `json:"runId"`
	RunKind       string    `json:"runKind"`
	EventID       string    `json:"eventId"`
	Conversations string    `json:"conversations"`
	Status        string    `json:"status"`
	Reason        string    `json:"reason"`
	Model         string    `json:"model"`
	Provider      string    `json:"provider"`
	TokensIn      int       `json:"tokensIn"`
	TokensOut     int       `json:"tokensOut"`
	LatencyMs     int64     `json:"latencyMs"`
	FilesChanged  string    `json:"filesChanged"`
	Attempt       int       `json:"attempt"`
	CreateTime    time.Time `json:"createTime"`
}

// Checksums is a bundle's last line: the counts of records and SHA-256 digests (hex) over
// the lines, each with its "\n": per kind over that kind's lines, and All over every line
// before this one, the manifest included.
type Checksums struct {
	Kind   string            `json:"kind"`
	Counts Counts            `json:"counts"`
	SHA256 map[string]string `json:"sha256"`
	All    string            `json:"all"`
}

// digests accumulates the checksums of a bundle as its lines go by.
type digests struct {
	all    hash.Hash
	kinds  map[string]hash.Hash
	counts Counts
}

func newDigests() *digests {
	d := &digests{all: sha256.New(), kinds: map[string]hash.Hash{}}
	for _, k := range recordKinds {
		d.kinds[k] = sha256.New()
	}
	return d
}

// line adds one line (with its "\n") of kind (KindManifest counts towards All only).
func (d *digests) line(kind string, b []byte) {
	d.all.Write(b)
	if h := d.kinds[kind]; h != nil {
		h.Write(b)
		d.counts.add(kind)
	}
}

func (d *digests) sums() Checksums {
	c := Checksums{Kind: KindChecksums, Counts: d.counts, SHA256: map[string]string{}, All: hex.EncodeToString(d.all.Sum(nil))}
	for k, h := range d.kinds {
		c.SHA256[k] = hex.EncodeToString(h.Sum(nil))
	}
	return c
}

// verify compares the computed checksums with the bundle's own.
func (d *digests) verify(got Checksums) error {
	want := d.sums()
	for _, k := range recordKinds {
		if got.Counts.get(k) != want.Counts.get(k) {
			return invalidf("checksums line: %d %s records counted, the bundle holds %d; the bundle is damaged", got.Counts.get(k), k, want.Counts.get(k))
		}
		if got.SHA256[k] != want.SHA256[k] {
			return invalidf("checksums line: the SHA-256 of the %s records is %s, the bundle's lines give %s; the bundle is damaged or was edited", k, got.SHA256[k], want.SHA256[k])
		}
	}
	if got.All != want.All {
		return invalidf("checksums line: the overall SHA-256 is %s, the bundle's lines give %s; the bundle is damaged or was edited", got.All, want.All)
	}
	return nil
}

// Error is a refused export or import (a damaged or invalid bundle, a bad option, an unknown
// or non-empty agent), with a message that says what was wrong; its Kind is one of fault's
// (fault.ErrInvalid, fault.ErrNotFound, fault.ErrConflict).
type Error = fault.Error

func invalidf(format string, args ...any) error {
	return &Error{Kind: fault.ErrInvalid, Msg: fmt.Sprintf(format, args...)}
}
