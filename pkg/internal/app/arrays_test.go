package app_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/apptest"
)

// The service answers [] for an empty list, never null: the document types no array field
// of an answer nullable (huma's default for a Go slice). Only request fields a client may
// send as null stay nullable.
func TestArraysAreNotNullable(t *testing.T) {
	a := apptest.Start(t, "")
	allowed := map[string]bool{
		"EventConversationCompletedEvent.messages": true, // the spec's record: every field but the ids may be null
		"MessagesBody.messages":                    true, // a single message's body may say "messages": null
		"WindowMessage.tool_calls":                 true, // OpenAI SDKs send "tool_calls": null
	}
	n := 0
	for name, s := range a.HTTP.API().OpenAPI().Components.Schemas.Map() {
		for k, p := range s.Properties {
			if p.Type != "array" {
				continue
			}
			n++
			if p.Nullable != allowed[name+"."+k] {
				t.Errorf("%s.%s: nullable %v, want %v", name, k, p.Nullable, allowed[name+"."+k])
			}
		}
	}
	if n < 25 {
		t.Fatalf("only %d array properties in the document: the walk is broken", n)
	}
}

// The document lists the answers the server gives: 415 for an import that is not a bundle
// (text/plain), 409 for an event dated before its agent's erasure, and an array for the
// answers to an MCP batch.
func TestDocumentListsTheAnswers(t *testing.T) {
	a := apptest.Start(t, "")
	paths := a.HTTP.API().OpenAPI().Paths
	if r := paths["/api/v1/agents/{agentId}/import"].Post.Responses["415"]; r == nil {
		t.Error("importAgent does not list 415")
	}
	if r := paths["/api/v1/events/conversation-completed"].Post.Responses["409"]; r == nil {
		t.Error("publishConversationCompleted does not list 409")
	}
	ok := paths["/api/v1/agents/{agentId}/mcp"].Post.Responses["200"]
	arrayAnswer := false
	if mt := ok.Content["application/json"]; mt != nil && mt.Schema != nil {
		for _, s := range mt.Schema.OneOf {
			arrayAnswer = arrayAnswer || s.Type == "array"
		}
	}
	if !arrayAnswer {
		t.Error("mcpMessage's 200 does not allow an array (a batch's answers)")
	}
	// And the server does answer them so.
	base := "http://" + a.Addr
	req, _ := http.NewRequest("POST", base+"/api/v1/agents/1/import", strings.NewReader("not a bundle"))
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("import with text/plain: %d, want 415", resp.StatusCode)
	}
}
