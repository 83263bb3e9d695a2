package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"time"
)

// BundleContentType is the media type of an agent bundle (JSON Lines, docs/bundle.md).
const BundleContentType = "application/x-ndjson"

// ErrBundleCutShort: an export ended without the bundle's checksums line (the server met an
// error after the first byte, or the connection ended), so what was written is incomplete
// and any import refuses it. Export again.
var ErrBundleCutShort = errors.New("matememory: the export ended without its checksums line: the bundle is incomplete, export again")

// ExportOptions says what an export holds besides the agent's settings, files and cron jobs.
type ExportOptions struct {
	// History: every file's previous versions.
	History bool
	// Messages: the stored conversation messages.
	Messages bool
	// Ledger: the run ledger.
	Ledger bool
}

// Export is what ExportAgent wrote.
type Export struct {
	// Bytes is the bundle's size.
	Bytes int64
	// Filename is the server's suggestion (agent-N-TIME.ndjson, from Content-Disposition).
	Filename string
}

// ExportAgent streams the agent's bundle (GET …/export) to w as it arrives, and returns once
// the whole bundle is written; memory stays bounded whatever the agent's size. A bundle
// that ends without its checksums line is ErrBundleCutShort: discard what w received. An
// agent never used is ErrNotFound. The request is retried (as a GET) only until the first
// byte is written to w.
//
//	f, _ := os.Create("agent-7.ndjson")
//	_, err := c.ExportAgent(ctx, 7, f, client.ExportOptions{History: true})
func (c *Client) ExportAgent(ctx context.Context, agentID int64, w io.Writer, o ExportOptions) (*Export, error) {
	q := url.Values{}
	for name, on := range map[string]bool{"history": o.History, "messages": o.Messages, "ledger": o.Ledger} {
		if on {
			q.Set(name, "true")
		}
	}
	r := request{method: http.MethodGet, path: agentPath(agentID) + "/export", query: q}
	resp, stall, err := c.transferOpen(ctx, r, nil)
	if err != nil {
		return nil, err
	}
	defer stall.stop()
	defer resp.Body.Close()
	ex := &Export{}
	if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
		ex.Filename = params["filename"]
	}
	tail := &lastLine{}
	ex.Bytes, err = io.Copy(io.MultiWriter(w, tail), stall.reader(resp.Body))
	if err != nil {
		return ex, fmt.Errorf("matememory: %s %s: after %d bytes: %w", r.method, r.path, ex.Bytes, stall.explain(err))
	}
	if !tail.isChecksums() {
		return ex, fmt.Errorf("%w (%d bytes received)", ErrBundleCutShort, ex.Bytes)
	}
	return ex, nil
}

// Import modes (ImportOptions.Mode).
const (
	// ImportEmpty needs an agent that holds nothing yet (an id never used, or one holding
	// exactly this bundle: 0 changes); anything else is ErrConflict.
	ImportEmpty = "empty"
	// ImportMerge keeps what the agent has and adds what it lacks; a file the agent changed
	// otherwise is a conflict, listed in the report and kept.
	ImportMerge = "merge"
)

// ImportOptions are an import's mode and whether it is a dry run.
type ImportOptions struct {
	// Mode is ImportEmpty (the default) or ImportMerge. There is no replace: to replace an
	// agent's memory, erase the agent (EraseAgent) and import with ImportEmpty.
	Mode string
	// DryRun validates the bundle and reports what would change; nothing is written.
	DryRun bool
}

// BundleCounts are the records of each kind in a bundle, or written by an import.
type BundleCounts struct {
	Agent   int64 `json:"agent"`
	File    int64 `json:"file"`
	History int64 `json:"history"`
	Cron    int64 `json:"cron"`
	Message int64 `json:"message"`
	Run     int64 `json:"run"`
}

// BundleConflict is a record of the bundle an import kept the agent's own for.
type BundleConflict struct {
	Kind string `json:"kind"`
	// Name is the filename, cron job name, run id, or "settings".
	Name          string `json:"name"`
	Reason        string `json:"reason"`
	TargetVersion int64  `json:"targetVersion,omitempty"`
	BundleVersion int64  `json:"bundleVersion,omitempty"`
}

// ImportReport says what an import did (or, on a dry run, would do).
type ImportReport struct {
	AgentID int64 `json:"agentId"`
	// SourceAgentID is the agent the bundle was exported from.
	SourceAgentID int64  `json:"sourceAgentId"`
	Mode          string `json:"mode"`
	DryRun        bool   `json:"dryRun"`
	FormatVersion int    `json:"formatVersion"`
	// Records are the bundle's; Created the records the agent did not have; Updated the files
	// fast-forwarded to the bundle's newer version; Unchanged those it held as they are.
	Records   BundleCounts `json:"records"`
	Created   BundleCounts `json:"created"`
	Updated   BundleCounts `json:"updated"`
	Unchanged BundleCounts `json:"unchanged"`
	// Changes is created plus updated: 0 when the same bundle is imported again.
	Changes       int64 `json:"changes"`
	ConflictCount int   `json:"conflictCount"`
	// Conflicts are the first 1000 conflicts.
	Conflicts []BundleConflict `json:"conflicts"`
}

// ImportAgent sends a bundle (as ExportAgent wrote it, byte for byte) to the agent (POST
// …/import) and returns the report. The whole bundle is validated before anything is
// written, then applied in one transaction: a bundle that is not valid is ErrBadRequest
// (the message names the line), ImportEmpty meeting an agent that holds something is
// ErrConflict, a bundle past 4 GiB ErrTooLarge. Importing the same bundle again changes
// nothing, so a bundle that can be read again (an io.Seeker: *os.File, *bytes.Reader) is
// retried as a GET is, from its position at the call; any other reader is sent once.
func (c *Client) ImportAgent(ctx context.Context, agentID int64, bundle io.Reader, o ImportOptions) (*ImportReport, error) {
	q := url.Values{}
	if o.Mode != "" {
		q.Set("mode", o.Mode)
	}
	if o.DryRun {
		q.Set("dryRun", "true")
	}
	r := request{method: http.MethodPost, path: agentPath(agentID) + "/import", query: q}
	seeker, replayable := bundle.(io.Seeker)
	var start int64
	if replayable {
		var err error
		if start, err = seeker.Seek(0, io.SeekCurrent); err != nil {
			replayable = false
		}
	}
	r.retrySafe = replayable
	sent := false
	resp, stall, err := c.transferOpen(ctx, r, func() (io.Reader, error) {
		if sent {
			if _, err := seeker.Seek(start, io.SeekStart); err != nil {
				return nil, err
			}
		}
		sent = true
		return bundle, nil
	})
	if err != nil {
		return nil, err
	}
	defer stall.stop()
	defer resp.Body.Close()
	var rep ImportReport
	if err := decode(r, resp, &rep); err != nil {
		return nil, stall.explain(err)
	}
	return &rep, nil
}

// transferOpen sends r (with the body body returns, anew for each attempt, when body is not
// nil; only once unless r.retrySafe) through the transfer client, retrying as the policy
// allows until a 2xx response arrives, whose body is then the caller's to read and close,
// and stall's to stop.
func (c *Client) transferOpen(ctx context.Context, r request, body func() (io.Reader, error)) (*http.Response, *stall, error) {
	for attempt := 1; ; attempt++ {
		s := newStall(ctx, c.timeout)
		var in io.Reader
		if body != nil {
			b, err := body()
			if err != nil {
				s.stop()
				return nil, nil, fmt.Errorf("matememory: %s %s: rewind the bundle for a retry: %w", r.method, r.path, err)
			}
			in = s.reader(b)
		}
		resp, err := c.open(s.ctx, c.transfer, r, in, BundleContentType)
		var h http.Header
		if err == nil {
			if resp.StatusCode < 300 {
				return resp, s, nil
			}
			h = resp.Header
			err = decode(r, resp, nil)
			resp.Body.Close()
		}
		err = s.explain(err)
		s.stop()
		// A body that cannot be read again is sent once, even after a 429.
		if body != nil && !r.retrySafe || !c.shouldRetry(r, attempt, err) {
			return nil, nil, err
		}
		if serr := sleep(ctx, c.backoff(attempt, h)); serr != nil {
			return nil, nil, err
		}
	}
}

// errStalled is the cause of a transfer cut because no byte moved for the client's timeout.
var errStalled = errors.New("no byte moved for the client's timeout (WithTimeout)")

// stall cancels a transfer's context when no byte moved, either way, for the timeout (none:
// only ctx bounds it).
type stall struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	t      *time.Timer
	d      time.Duration
}

func newStall(ctx context.Context, d time.Duration) *stall {
	s := &stall{d: d}
	s.ctx, s.cancel = context.WithCancelCause(ctx)
	if d > 0 {
		s.t = time.AfterFunc(d, func() { s.cancel(fmt.Errorf("%w: %w", errStalled, context.DeadlineExceeded)) })
	}
	return s
}

func (s *stall) touch() {
	if s.t != nil {
		s.t.Reset(s.d)
	}
}

func (s *stall) stop() {
	if s.t != nil {
		s.t.Stop()
	}
	s.cancel(nil)
}

// explain names the stall when it was the transfer's end.
func (s *stall) explain(err error) error {
	if err != nil && errors.Is(context.Cause(s.ctx), errStalled) {
		return fmt.Errorf("%w (%s): %w", context.Cause(s.ctx), s.d, err)
	}
	return err
}

func (s *stall) reader(r io.Reader) io.Reader { return stallReader{r: r, s: s} }

type stallReader struct {
	r io.Reader
	s *stall
}

func (sr stallReader) Read(p []byte) (int, error) {
	n, err := sr.r.Read(p)
	if n > 0 {
		sr.s.touch()
	}
	return n, err
}

// lastLine keeps the last complete line written to it, up to a checksums line's size (a
// longer line is not one), and whether anything followed it.
type lastLine struct {
	line, rest []byte
	long       bool // rest is over the size
}

const maxChecksumsLine = 4 << 10

func (l *lastLine) Write(p []byte) (int, error) {
	n := len(p)
	for {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			break
		}
		if l.long || len(l.rest)+i > maxChecksumsLine {
			l.line = l.line[:0]
		} else {
			l.line = append(append(l.line[:0], l.rest...), p[:i]...)
		}
		l.rest, l.long, p = l.rest[:0], false, p[i+1:]
	}
	if !l.long {
		l.rest = append(l.rest, p...)
		if len(l.rest) > maxChecksumsLine {
			l.rest, l.long = l.rest[:0], true
		}
	}
	return n, nil
}

// isChecksums reports whether the last line, ended by a newline, is a checksums line.
func (l *lastLine) isChecksums() bool {
	if l.long || len(l.rest) > 0 || len(l.line) == 0 {
		return false
	}
	var k struct {
		Kind string `json:"kind"`
		All  string `json:"all"`
	}
	return json.Unmarshal(l.line, &k) == nil && k.Kind == "checksums" && k.All != ""
}
