package bundle

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"github.com/matememory/matememory/pkg/internal/fault"
	"io"
	"os"
	"slices"
	"time"

	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/cronjob"
	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// Limits of a bundle an import accepts: the uniqueness checks keep one entry per file and
// cron job, so these bound the validator's memory whatever the bundle claims.
const (
	MaxFiles    = 1_000_000
	MaxCronJobs = 10_000
)

// maxLine bounds one line of a bundle: a file at the size limit with every byte escaped
// (\u00XX), plus the record's other fields.
func (s *Service) maxLine() int { return s.maxBytes*6 + 64<<10 }

// splitLines splits on "\n" only and keeps every other byte, so the digest of a line is the
// digest of exactly the bytes the exporter wrote.
func splitLines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

func (s *Service) scanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), s.maxLine())
	sc.Split(splitLines)
	return sc
}

// peek reads a line's kind. Its errors say what the line is, never a Go type: a bundle
// JSON-encoded as one string (a client that serialized the body as JSON) is told so.
func peek(line []byte) (string, error) {
	t := bytes.TrimLeft(line, " \t\r")
	switch {
	case len(t) > 0 && t[0] == '"':
		return "", fmt.Errorf("it is a JSON string, not an object: the bundle was sent JSON-encoded; send the export's bytes unchanged, Content-Type: %s", ContentType)
	case len(t) == 0 || t[0] != '{':
		return "", fmt.Errorf("not a JSON object (it starts with %q)", string(t[:min(len(t), 16)]))
	}
	var k struct {
		Kind json.RawMessage `json:"kind"`
	}
	if err := json.Unmarshal(line, &k); err != nil {
		return "", fmt.Errorf("not valid JSON: %v", err)
	}
	var kind string
	if len(k.Kind) > 0 && json.Unmarshal(k.Kind, &kind) != nil {
		return "", fmt.Errorf(`"kind" must be a string, got %s`, k.Kind)
	}
	if kind == "" {
		return "", fmt.Errorf(`no "kind"`)
	}
	return kind, nil
}

// strict decodes a record, refusing unknown fields and trailing data.
func strict(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON value on the line")
	}
	return nil
}

// spool copies the bundle into a temporary file while it validates every line, so nothing
// is written to the database before the whole bundle is known good, and memory stays
// bounded (what is kept per record is a name, for the uniqueness checks). The caller
// removes the file.
func (s *Service) spool(r io.Reader) (*os.File, Manifest, error) {
	f, err := os.CreateTemp(s.tempDir, "matememory-import-*.ndjson")
	if err != nil {
		return nil, Manifest{}, fmt.Errorf("spool the bundle: %w", err)
	}
	v := newValidator(s)
	sc := s.scanner(io.TeeReader(r, f))
	for sc.Scan() {
		if err := v.line(sc.Bytes()); err != nil {
			return f, v.manifest, err
		}
	}
	if err := sc.Err(); err != nil {
		if err == bufio.ErrTooLong {
			return f, v.manifest, invalidf("line %d is longer than %d bytes: no record of a valid bundle is that long", v.n+1, s.maxLine())
		}
		return f, v.manifest, fmt.Errorf("read the bundle: %w", err)
	}
	if err := v.end(); err != nil {
		return f, v.manifest, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return f, v.manifest, fmt.Errorf("spool the bundle: %w", err)
	}
	return f, v.manifest, nil
}

// validator checks a bundle line by line: its structure (manifest first, kinds in order,
// history after its file, checksums last), every record's fields, and the checksums.
type validator struct {
	s        *Service
	n        int
	manifest Manifest
	d        *digests
	last     int // rank of the last record's kind
	done     bool
	file     *File                 // the last file record
	lastVer  int64                 // the last history version of the current file
	names    map[[16]byte]struct{} // files, by a digest of the name: memory per file is fixed
	crons    map[string]bool
}

func newValidator(s *Service) *validator {
	return &validator{s: s, d: newDigests(), last: -1, names: map[[16]byte]struct{}{}, crons: map[string]bool{}}
}

func (v *validator) line(b []byte) error {
	v.n++
	if v.done {
		return invalidf("line %d: data after the checksums line; the checksums line must be the last", v.n)
	}
	kind, err := peek(b)
	if err != nil {
		return invalidf("line %d is not a bundle record: %v", v.n, err)
	}
	if v.n == 1 {
		return v.header(kind, b)
	}
	if kind == KindChecksums {
		var c Checksums
		if err := strict(b, &c); err != nil {
			return invalidf("line %d (checksums): %v", v.n, err)
		}
		v.done = true
		return v.d.verify(c)
	}
	r := rank(kind)
	if r < 0 {
		return invalidf("line %d: unknown record kind %q; format version %d has %v, manifest and checksums", v.n, kind, Version, recordKinds)
	}
	if kind == KindHistory {
		r = rank(KindFile) // files and their history interleave
	}
	if r < v.last || kind == KindHistory && v.file == nil {
		return invalidf("line %d: a %s record out of order: records come as agent, file (each followed by its history), cron, message, run", v.n, kind)
	}
	if kind != KindAgent && v.d.counts.Agent == 0 {
		return invalidf("line %d: the agent record must come right after the manifest", v.n)
	}
	if kind != KindHistory && kind != KindFile {
		v.file = nil
	}
	if r > v.last {
		v.last = r
	}
	v.d.line(kind, append(b, '\n'))
	if err := v.record(kind, b); err != nil {
		return invalidf("line %d (%s record): %v", v.n, kind, err)
	}
	return nil
}

func (v *validator) header(kind string, b []byte) error {
	if kind != KindManifest {
		return invalidf("line 1 is a %q record; a bundle starts with its manifest ({\"kind\":\"manifest\",\"format\":%q,...})", kind, Format)
	}
	// The version first, leniently: a newer format may have fields this build does not know.
	var head struct {
		Format  string `json:"format"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return invalidf("line 1 (manifest): %v", err)
	}
	if head.Format != Format {
		return invalidf("line 1 (manifest): format %q is not a MateMemory agent bundle (%q)", head.Format, Format)
	}
	if head.Version > Version {
		// 400, as every validation error of the API is (it documents no 422).
		return &Error{Kind: fault.ErrInvalid, Msg: fmt.Sprintf("bundle format version %d is newer than this server reads: it supports version %d and older; upgrade MateMemory to import it", head.Version, Version)}
	}
	if head.Version < 1 {
		return invalidf("line 1 (manifest): version %d is not a bundle format version (1 to %d)", head.Version, Version)
	}
	if err := strict(b, &v.manifest); err != nil {
		return invalidf("line 1 (manifest): %v", err)
	}
	v.d.line(KindManifest, append(b, '\n'))
	return nil
}

func (v *validator) end() error {
	switch {
	case v.n == 0:
		return invalidf("the body is empty; expected a bundle (application/x-ndjson, as GET …/export writes it)")
	case !v.done:
		return invalidf("the bundle ends after line %d without its checksums line: it is truncated (an export that stopped midway, an upload cut short)", v.n)
	}
	if got, want := v.d.counts, v.manifest.Counts; got != want {
		return invalidf("the manifest counts %+v records, the bundle holds %+v", want, got)
	}
	inc := v.manifest.Includes
	for _, c := range []struct {
		on   bool
		n    int64
		kind string
	}{{inc.History, v.d.counts.History, KindHistory}, {inc.Messages, v.d.counts.Message, KindMessage}, {inc.Ledger, v.d.counts.Run, KindRun}} {
		if !c.on && c.n > 0 {
			return invalidf("the bundle holds %d %s records but its manifest says they are not included", c.n, c.kind)
		}
	}
	return nil
}

func (v *validator) record(kind string, b []byte) error {
	switch kind {
	case KindAgent:
		var a Agent
		if err := strict(b, &a); err != nil {
			return err
		}
		if v.d.counts.Agent > 1 {
			return fmt.Errorf("a second agent record; a bundle holds one agent")
		}
		return validAgent(a)
	case KindFile:
		var f File
		if err := strict(b, &f); err != nil {
			return err
		}
		if err := v.validFile(f); err != nil {
			return fmt.Errorf("%s: %w", f.Filename, err)
		}
		v.file, v.lastVer = &f, 0
		return nil
	case KindHistory:
		var h History
		if err := strict(b, &h); err != nil {
			return err
		}
		return v.validHistory(h)
	case KindCron:
		var c Cron
		if err := strict(b, &c); err != nil {
			return err
		}
		if len(v.crons) >= MaxCronJobs {
			return fmt.Errorf("more than %d cron jobs; no agent has that many", MaxCronJobs)
		}
		if v.crons[c.Name] {
			return fmt.Errorf("a second cron job named %q", c.Name)
		}
		v.crons[c.Name] = true
		return validCron(c)
	case KindMessage:
		var m Message
		if err := strict(b, &m); err != nil {
			return err
		}
		return validMessage(m)
	case KindRun:
		var r Run
		if err := strict(b, &r); err != nil {
			return err
		}
		return validRun(r)
	}
	return nil
}

func validAgent(a Agent) error {
	if a.Language != "zh" && a.Language != "en" {
		return fmt.Errorf("language %q is not supported; accepted: zh, en", a.Language)
	}
	if a.Timezone == "" || len(a.Timezone) > 64 {
		return fmt.Errorf("timezone %q is not an IANA time zone", a.Timezone)
	}
	if a.Timezone != "Local" {
		if _, err := time.LoadLocation(a.Timezone); err != nil {
			return fmt.Errorf("timezone %q is not an IANA time zone (e.g. Asia/Shanghai, UTC)", a.Timezone)
		}
	}
	return nil
}

func (v *validator) validFile(f File) error {
	if err := workspace.ValidateName(f.Filename); err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(f.Filename))
	key := [16]byte(sum[:16])
	if _, dup := v.names[key]; dup {
		return fmt.Errorf("a second file of that name")
	}
	if len(v.names) >= MaxFiles {
		return fmt.Errorf("more than %d files; this server imports at most that many per bundle", MaxFiles)
	}
	v.names[key] = struct{}{}
	if len(f.Content) > v.s.maxBytes {
		return fmt.Errorf("content is %d bytes; this server's file size limit (mate.memory.max-file-bytes) is %d", len(f.Content), v.s.maxBytes)
	}
	if f.FileSize != int64(len(f.Content)) {
		return fmt.Errorf("fileSize %d does not match the content's %d bytes", f.FileSize, len(f.Content))
	}
	if f.Version < 1 {
		return fmt.Errorf("version %d; versions start at 1", f.Version)
	}
	if f.CreateTime.IsZero() || f.UpdateTime.IsZero() {
		return fmt.Errorf("createTime and updateTime are required")
	}
	return nil
}

func (v *validator) validHistory(h History) error {
	f := v.file
	if h.Filename != f.Filename {
		return fmt.Errorf("history of %q follows the file %q; a file's history comes right after it", h.Filename, f.Filename)
	}
	if h.Version < 1 || h.Version >= f.Version {
		return fmt.Errorf("%s: history version %d; a previous version is 1 to %d", h.Filename, h.Version, f.Version-1)
	}
	if h.Version <= v.lastVer {
		return fmt.Errorf("%s: history version %d after version %d; a file's history comes oldest first, each version once", h.Filename, h.Version, v.lastVer)
	}
	v.lastVer = h.Version
	if len(h.Content) > v.s.maxBytes {
		return fmt.Errorf("%s version %d: content is %d bytes; the limit is %d", h.Filename, h.Version, len(h.Content), v.s.maxBytes)
	}
	if h.Action == "" || len(h.Action) > 32 || h.Actor == "" || len(h.Actor) > 32 || len(h.Ref) > 128 {
		return fmt.Errorf("%s version %d: action and actor are required (at most 32 bytes), ref at most 128 bytes", h.Filename, h.Version)
	}
	if h.CreateTime.IsZero() {
		return fmt.Errorf("%s version %d: createTime is required", h.Filename, h.Version)
	}
	return nil
}

func validCron(c Cron) error {
	if c.Name == "" || len(c.Name) > 128 {
		return fmt.Errorf("name %q: 1 to 128 bytes", c.Name)
	}
	if _, err := cronjob.Parse(c.CronExpression, c.Timezone); err != nil {
		return fmt.Errorf("%s: %w", c.Name, err)
	}
	switch c.TaskType {
	case cronjob.TaskText:
		if c.TriggerMessage == "" {
			return fmt.Errorf("%s: triggerMessage is required for task type %q", c.Name, c.TaskType)
		}
	case cronjob.TaskEmergence:
	default:
		return fmt.Errorf("%s: taskType %q; accepted: %s, %s", c.Name, c.TaskType, cronjob.TaskText, cronjob.TaskEmergence)
	}
	if c.CreateTime.IsZero() || c.UpdateTime.IsZero() {
		return fmt.Errorf("%s: createTime and updateTime are required", c.Name)
	}
	return nil
}

func validMessage(m Message) error {
	if m.ConversationID == "" || len(m.ConversationID) > conversation.MaxConversationIDBytes {
		return fmt.Errorf("conversationId %q: 1 to %d bytes", m.ConversationID, conversation.MaxConversationIDBytes)
	}
	if !slices.Contains(conversation.Roles, m.Role) {
		return fmt.Errorf("role %q; accepted: %v", m.Role, conversation.Roles)
	}
	if m.ToolCalls != "" && !json.Valid([]byte(m.ToolCalls)) {
		return fmt.Errorf("toolCalls is not JSON")
	}
	if len(m.ToolCallID) > 128 || len(m.Name) > 128 {
		return fmt.Errorf("toolCallId and name: at most 128 bytes")
	}
	if m.CreateTime.IsZero() {
		return fmt.Errorf("createTime is required")
	}
	return nil
}

var runStatuses = []string{store.RunCompleted, store.RunSkipped, store.RunFailed, store.RunRefused, store.RunDeferred}

func validRun(r Run) error {
	if r.RunID == "" || len(r.RunID) > 64 {
		return fmt.Errorf("runId %q: 1 to 64 bytes", r.RunID)
	}
	if r.RunKind == "" || len(r.RunKind) > 16 {
		return fmt.Errorf("run %s: runKind %q: 1 to 16 bytes", r.RunID, r.RunKind)
	}
	if !slices.Contains(runStatuses, r.Status) {
		return fmt.Errorf("run %s: status %q; accepted: %v", r.RunID, r.Status, runStatuses)
	}
	for name, js := range map[string]string{"conversations": r.Conversations, "filesChanged": r.FilesChanged} {
		var arr []string
		if js != "" && json.Unmarshal([]byte(js), &arr) != nil {
			return fmt.Errorf("run %s: %s is not a JSON array of strings", r.RunID, name)
		}
	}
	if len(r.EventID) > 128 || len(r.Model) > 128 || len(r.Provider) > 16 {
		return fmt.Errorf("run %s: eventId, model at most 128 bytes, provider at most 16", r.RunID)
	}
	if r.CreateTime.IsZero() {
		return fmt.Errorf("run %s: createTime is required", r.RunID)
	}
	return nil
}
