package goclient_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/client"
	"github.com/matememory/matememory/pkg/internal/apptest"
	"github.com/matememory/matememory/pkg/internal/bundle"
	"github.com/matememory/matememory/pkg/internal/erasure"
)

// ExportAgent, ImportAgent (dry run, empty, merge), EraseConversation and EraseAgent
// against the composed app, every answer held to the OpenAPI document: an agent's bundle
// moves into another agent field for field, a second import changes nothing, a merge
// reports the file the target changed, a JSON-encoded bundle is told what is wrong, and an
// agent replaced by erasing it and importing into it holds the bundle's memory.
func TestBundleAndErasure(t *testing.T) {
	a := apptest.Start(t, "")
	c := newClient(t, a, "")
	ctx := ctx(t)
	const name = "notes/tea.md"
	w, err := c.WriteFile(ctx, 1, name, "- green tea\n", client.CreateOnly)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteFile(ctx, 1, name, "- green tea\n- oolong\n", w.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StoreMessages(ctx, 1, "conv-b", client.Message{Role: "user", Content: "I like oolong."},
		client.Message{Role: "assistant", Content: "Noted."}); err != nil {
		t.Fatal(err)
	}

	var exported bytes.Buffer
	ex, err := c.ExportAgent(ctx, 1, &exported, client.ExportOptions{History: true, Messages: true})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Bytes != int64(exported.Len()) || !strings.HasPrefix(ex.Filename, "agent-1-") || !strings.HasSuffix(ex.Filename, ".ndjson") {
		t.Fatalf("export %+v of %d bytes", ex, exported.Len())
	}
	kinds := lineKinds(t, exported.Bytes())
	if kinds[0] != "manifest" || kinds[len(kinds)-1] != "checksums" || count(kinds, "history") != 1 || count(kinds, "message") != 2 {
		t.Fatalf("bundle kinds %v: want a manifest, one history record, two messages, the checksums", kinds)
	}
	if _, err := c.ExportAgent(ctx, 404, io.Discard, client.ExportOptions{}); !client.IsNotFound(err) {
		t.Fatalf("export of an agent never used: %v, want 404", err)
	}

	// A dry run reports and writes nothing.
	dry, err := c.ImportAgent(ctx, 2, bytes.NewReader(exported.Bytes()), client.ImportOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !dry.DryRun || dry.AgentID != 2 || dry.SourceAgentID != 1 || dry.Mode != client.ImportEmpty || dry.FormatVersion != 1 ||
		dry.Records.Message != 2 || dry.Created.Message != 2 || dry.Created.History != 1 || dry.Changes == 0 {
		t.Fatalf("dry run %+v", dry)
	}
	// (A read would seed the agent's default files: an export says whether it holds anything.)
	if _, err := c.ExportAgent(ctx, 2, io.Discard, client.ExportOptions{}); !client.IsNotFound(err) {
		t.Fatalf("after a dry run agent 2 exists: %v", err)
	}

	// The import, from a reader that cannot be read again (sent once), then again: 0 changes.
	rep, err := c.ImportAgent(ctx, 2, io.MultiReader(bytes.NewReader(exported.Bytes())), client.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.DryRun || rep.Created != dry.Created || rep.Changes != dry.Changes || rep.ConflictCount != 0 {
		t.Fatalf("import %+v, dry run said %+v", rep, dry)
	}
	if f, err := c.ReadFile(ctx, 2, name); err != nil || f.Content != "- green tea\n- oolong\n" {
		t.Fatalf("imported %s: %+v %v", name, f, err)
	}
	again, err := c.ImportAgent(ctx, 2, bytes.NewReader(exported.Bytes()), client.ImportOptions{Mode: client.ImportEmpty})
	if err != nil || again.Changes != 0 {
		t.Fatalf("the same bundle again: %+v %v, want 0 changes", again, err)
	}
	var copied bytes.Buffer
	if _, err := c.ExportAgent(ctx, 2, &copied, client.ExportOptions{History: true, Messages: true}); err != nil {
		t.Fatal(err)
	}
	if got, want := digests(t, copied.Bytes()), digests(t, exported.Bytes()); got != want {
		t.Fatalf("the copy's records differ from the original's:\n%s\n%s", got, want)
	}

	// A merge keeps the file the target changed since, and lists the conflict; empty refuses.
	if _, err := c.WriteFile(ctx, 2, name, "- black tea\n", client.AnyVersion); err != nil {
		t.Fatal(err)
	}
	merged, err := c.ImportAgent(ctx, 2, bytes.NewReader(exported.Bytes()), client.ImportOptions{Mode: client.ImportMerge})
	if err != nil || merged.ConflictCount != 1 || len(merged.Conflicts) != 1 || merged.Conflicts[0].Kind != "file" || merged.Conflicts[0].Name != name {
		t.Fatalf("merge over a changed file: %+v %v", merged, err)
	}
	if f, _ := c.ReadFile(ctx, 2, name); f == nil || f.Content != "- black tea\n" {
		t.Fatalf("the merge overwrote the target's file: %+v", f)
	}
	if _, err := c.ImportAgent(ctx, 2, bytes.NewReader(exported.Bytes()), client.ImportOptions{}); !client.IsConflict(err) {
		t.Fatalf("mode empty into an agent holding other memory: %v, want a conflict", err)
	}

	// What a JSON body serializer sends: a clear 400, nothing internal.
	quoted, _ := json.Marshal(exported.String())
	_, err = c.ImportAgent(ctx, 3, bytes.NewReader(quoted), client.ImportOptions{})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Msg, "the bundle was sent JSON-encoded; send the export's bytes unchanged") || strings.Contains(ae.Msg, "Go value") {
		t.Fatalf("a JSON-encoded bundle: %v", err)
	}

	// Erasure: a conversation, then the whole agent; then the agent replaced by an import.
	cr, err := c.EraseConversation(ctx, 2, "conv-b")
	if err != nil || cr.AgentID != 2 || cr.ConversationID != "conv-b" || cr.Rows["mate_message"] != 2 || cr.ErasedAt.IsZero() {
		t.Fatalf("conversation erasure: %+v %v", cr, err)
	}
	if _, err := c.EraseConversation(ctx, 2, ""); err == nil {
		t.Fatal("erasing a conversation without an id was not refused")
	}
	er, err := c.EraseAgent(ctx, 2)
	if err != nil || er.AgentID != 2 || er.Rows["mate_workspace_file"] == 0 || er.Rows["mate_workspace_file_history"] == 0 || er.Rows["mate_message"] != 0 {
		t.Fatalf("agent erasure: %+v %v", er, err)
	}
	if _, err := c.ExportAgent(ctx, 2, io.Discard, client.ExportOptions{}); !client.IsNotFound(err) {
		t.Fatalf("export after the erasure: %v", err)
	}
	if rep, err := c.ImportAgent(ctx, 2, bytes.NewReader(exported.Bytes()), client.ImportOptions{}); err != nil || rep.Changes != dry.Changes {
		t.Fatalf("import into the erased agent: %+v %v", rep, err)
	}
	if f, err := c.ReadFile(ctx, 2, name); err != nil || f.Content != "- green tea\n- oolong\n" {
		t.Fatalf("%s after erase and import: %+v %v", name, f, err)
	}
}

// The import report and the erasure receipts of pkg/client have the JSON fields, with the
// same types, as the server's own types (which are internal).
func TestWireTypesMatchTheServers(t *testing.T) {
	for _, c := range []struct{ client, server any }{
		{client.ImportReport{}, bundle.ImportReport{}},
		{client.ErasureReceipt{}, erasure.Receipt{}},
		{client.ConversationErasureReceipt{}, erasure.ConversationReceipt{}},
	} {
		got, want := jsonShape(reflect.TypeOf(c.client)), jsonShape(reflect.TypeOf(c.server))
		if got != want {
			t.Errorf("%T has the JSON shape\n  %s\nbut the server's %T has\n  %s", c.client, got, c.server, want)
		}
	}
}

// jsonShape describes what encoding/json makes of t: its fields' names, omitempty and types.
func jsonShape(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + jsonShape(t.Elem())
	case reflect.Slice:
		return "[]" + jsonShape(t.Elem())
	case reflect.Map:
		return "map[" + jsonShape(t.Key()) + "]" + jsonShape(t.Elem())
	case reflect.Struct:
		if t.PkgPath() == "time" {
			return t.String()
		}
		var fields []string
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if !f.IsExported() || tag == "-" {
				continue
			}
			fields = append(fields, tag+":"+jsonShape(f.Type))
		}
		sort.Strings(fields)
		return "{" + strings.Join(fields, " ") + "}"
	}
	return t.Kind().String()
}

func lineKinds(t *testing.T, b []byte) []string {
	t.Helper()
	var kinds []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var k struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(sc.Bytes(), &k); err != nil {
			t.Fatalf("bundle line %q: %v", sc.Text(), err)
		}
		kinds = append(kinds, k.Kind)
	}
	return kinds
}

// digests is a bundle's per-kind digests of its records (its checksums line but "all", which
// covers the manifest: the source agent and the time).
func digests(t *testing.T, b []byte) string {
	t.Helper()
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	var c struct {
		SHA256 map[string]string `json:"sha256"`
	}
	if err := json.Unmarshal(lines[len(lines)-1], &c); err != nil || len(c.SHA256) == 0 {
		t.Fatalf("checksums line %q: %v", lines[len(lines)-1], err)
	}
	out, _ := json.Marshal(c.SHA256)
	return string(out)
}

func count(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}
