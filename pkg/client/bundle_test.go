package client_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matememory/matememory/pkg/client"
)

const (
	manifestLine  = `{"kind":"manifest","format":"matememory-agent-bundle","version":1}` + "\n"
	checksumsLine = `{"kind":"checksums","counts":{},"sha256":{},"all":"ab12"}` + "\n"
)

// An export streams what the server sends, in any chunking; one that ends without the
// checksums line (the server failed after the first byte) is ErrBundleCutShort.
func TestExportAgentChecksTheBundleEnds(t *testing.T) {
	big := `{"kind":"file","content":"` + strings.Repeat("x", 10000) + `"}` + "\n"
	for _, c := range []struct {
		name, body string
		chunk      int
		complete   bool
	}{
		{"whole", manifestLine + big + checksumsLine, 1 << 20, true},
		{"byte by byte", manifestLine + checksumsLine, 1, true},
		{"chunks across lines", manifestLine + big + checksumsLine, 7, true},
		{"cut short", manifestLine + big, 1 << 20, false},
		{"cut inside the checksums line", manifestLine + checksumsLine[:20], 1 << 20, false},
		{"checksums not last", manifestLine + checksumsLine + big, 1 << 20, false},
		{"no final newline", manifestLine + strings.TrimSuffix(checksumsLine, "\n"), 1 << 20, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/api/v1/agents/7/export" || r.URL.Query().Get("history") != "true" || r.URL.Query().Has("ledger") {
					http.Error(w, "unexpected "+r.URL.String(), 400)
					return
				}
				w.Header().Set("Content-Type", client.BundleContentType)
				w.Header().Set("Content-Disposition", `attachment; filename="agent-7-20261201T100000Z.ndjson"`)
				for b := []byte(c.body); len(b) > 0; {
					n := min(c.chunk, len(b))
					_, _ = w.Write(b[:n])
					w.(http.Flusher).Flush()
					b = b[n:]
				}
			}))
			defer srv.Close()
			cl, _ := client.New(srv.URL, "")
			var out bytes.Buffer
			ex, err := cl.ExportAgent(ctx(t), 7, &out, client.ExportOptions{History: true})
			if out.String() != c.body || ex == nil || ex.Bytes != int64(len(c.body)) {
				t.Fatalf("wrote %d bytes (%+v), want the %d the server sent", out.Len(), ex, len(c.body))
			}
			if c.complete != (err == nil) || !c.complete && !errors.Is(err, client.ErrBundleCutShort) {
				t.Fatalf("err = %v, want complete=%v", err, c.complete)
			}
			if ex.Filename != "agent-7-20261201T100000Z.ndjson" {
				t.Fatalf("filename %q", ex.Filename)
			}
		})
	}
}

// WithTimeout bounds how long a transfer may stall, not how long it takes: an export that
// keeps moving outlasts the timeout; one whose server stops sending fails after it.
func TestTransferTimeoutIsAStall(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", client.BundleContentType)
		_, _ = io.WriteString(w, manifestLine)
		w.(http.Flusher).Flush()
		for i := 0; i < 8; i++ {
			time.Sleep(40 * time.Millisecond) // the slow server under test, not a wait for a result
			_, _ = io.WriteString(w, `{"kind":"file"}`+"\n")
			w.(http.Flusher).Flush()
		}
		if r.URL.Query().Get("messages") == "true" { // the stalling variant
			<-stop
			return
		}
		_, _ = io.WriteString(w, checksumsLine)
	}))
	defer srv.Close()
	defer close(stop) // before Close, which waits for the stalled handler
	cl, _ := client.New(srv.URL, "", client.WithTimeout(150*time.Millisecond))
	start := time.Now()
	if _, err := cl.ExportAgent(ctx(t), 1, io.Discard, client.ExportOptions{}); err != nil {
		t.Fatalf("a transfer that keeps moving for %s, with a timeout of 150ms: %v", time.Since(start), err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("the export took %s: the test's server did not pace it", took)
	}
	_, err := cl.ExportAgent(ctx(t), 1, io.Discard, client.ExportOptions{Messages: true})
	if err == nil || !strings.Contains(err.Error(), "no byte moved") {
		t.Fatalf("a stalled export: %v", err)
	}
}

// An import sends the bundle as it is (never JSON-encoded), as application/x-ndjson; a
// bundle that can be read again is retried after a 503, from where it stood; any other
// reader is sent once.
func TestImportAgentSendsTheBundleAndRetriesOnlyWhatItCanResend(t *testing.T) {
	bundle := manifestLine + `{"kind":"agent"}` + "\n" + checksumsLine
	var tries, first atomic.Int32
	first.Store(503)
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(fmt.Sprintf("%s %s %s %s", r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), b))
		w.Header().Set("Content-Type", "application/json")
		if tries.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(int(first.Load()))
			fmt.Fprintf(w, `{"code":%d,"msg":"not now"}`, first.Load())
			return
		}
		fmt.Fprint(w, `{"code":200,"data":{"agentId":3,"sourceAgentId":7,"mode":"merge","dryRun":true,"formatVersion":1,"records":{"agent":1},"created":{"file":2},"changes":2,"conflictCount":1,"conflicts":[{"kind":"file","name":"MEMORY.md","reason":"newer","targetVersion":4,"bundleVersion":3}]}}`)
	}))
	defer srv.Close()
	cl, _ := client.New(srv.URL, "", client.WithRetry(client.Retry{Attempts: 3, Base: time.Millisecond, Max: 5 * time.Millisecond}))
	r := strings.NewReader("skipped" + bundle)
	_, _ = r.Seek(int64(len("skipped")), io.SeekStart)
	rep, err := cl.ImportAgent(ctx(t), 3, r, client.ImportOptions{Mode: client.ImportMerge, DryRun: true})
	if err != nil || tries.Load() != 2 {
		t.Fatalf("import after a 503: %v (%d tries)", err, tries.Load())
	}
	if want := "/api/v1/agents/3/import dryRun=true&mode=merge " + client.BundleContentType + " " + bundle; got.Load() != want {
		t.Fatalf("the retry sent %q, want %q", got.Load(), want)
	}
	if rep.SourceAgentID != 7 || !rep.DryRun || rep.Records.Agent != 1 || rep.Created.File != 2 || rep.Changes != 2 ||
		rep.ConflictCount != 1 || rep.Conflicts[0].Name != "MEMORY.md" || rep.Conflicts[0].TargetVersion != 4 {
		t.Fatalf("report %+v", rep)
	}
	tries.Store(0)
	_, err = cl.ImportAgent(ctx(t), 3, io.MultiReader(strings.NewReader(bundle)), client.ImportOptions{})
	if !errors.Is(err, client.ErrUnavailable) || tries.Load() != 1 {
		t.Fatalf("a reader that cannot be read again must be sent once: %v (%d tries)", err, tries.Load())
	}
	// Not even after a 429, which other requests retry whatever they are.
	tries.Store(0)
	first.Store(429)
	_, err = cl.ImportAgent(ctx(t), 3, io.MultiReader(strings.NewReader(bundle)), client.ImportOptions{})
	if !errors.Is(err, client.ErrRateLimited) || tries.Load() != 1 {
		t.Fatalf("a reader that cannot be read again, after a 429: %v (%d tries)", err, tries.Load())
	}
}

// The erasures send the confirmation the API asks for and decode the receipts.
func TestEraseSendsTheConfirmation(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Method + " " + r.URL.EscapedPath() + "?" + r.URL.RawQuery)
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.URL.Path, "/conversations/") {
			fmt.Fprint(w, `{"code":200,"data":{"agentId":5,"conversationId":"c 1/x","rows":{"mate_message":3},"messages":{},"derived":[{"filename":"MEMORY.md","version":2,"runId":"r","action":"write"}]}}`)
			return
		}
		fmt.Fprint(w, `{"code":200,"data":{"agentId":5,"actor":"key:k","rows":{"mate_agent":1},"messages":{"MATE_EVENTS":2},"vacuumed":true,"mcpSessions":1,"kept":["logs"]}}`)
	}))
	defer srv.Close()
	cl, _ := client.New(srv.URL, "")
	rec, err := cl.EraseAgent(ctx(t), 5)
	if err != nil || got.Load() != "DELETE /api/v1/agents/5?confirm=5&erase=true" || rec.Rows["mate_agent"] != 1 || rec.Messages["MATE_EVENTS"] != 2 ||
		!rec.Vacuumed || rec.MCPSessions != 1 || rec.Kept[0] != "logs" {
		t.Fatalf("EraseAgent: %+v %v (sent %v)", rec, err, got.Load())
	}
	cr, err := cl.EraseConversation(ctx(t), 5, "c 1/x")
	if err != nil || got.Load() != "DELETE /api/v1/agents/5/conversations/c%201%2Fx?confirm=c+1%2Fx&erase=true" ||
		cr.Rows["mate_message"] != 3 || cr.Derived[0].Version != 2 {
		t.Fatalf("EraseConversation: %+v %v (sent %v)", cr, err, got.Load())
	}
}
