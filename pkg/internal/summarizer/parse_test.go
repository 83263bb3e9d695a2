package summarizer

import (
	"reflect"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/memedit"
	"github.com/matememory/matememory/pkg/internal/store"
)

func TestParseExtraction(t *testing.T) {
	full := `{"should_update":true,"reason":"r","daily_entry":"- d","memory_update":"m","profile_update":"p"}`
	tests := []struct {
		name   string
		in     string
		want   Extraction
		errHas string
	}{
		{"plain", full, Extraction{ShouldUpdate: true, Reason: "r", DailyEntry: "- d", MemoryUpdate: "m", ProfileUpdate: "p"}, ""},
		{"fenced", "```json\n" + full + "\n```", Extraction{ShouldUpdate: true, Reason: "r", DailyEntry: "- d", MemoryUpdate: "m", ProfileUpdate: "p"}, ""},
		{"prose around", "Here is the result:\n" + full + "\nHope this helps {really}.", Extraction{ShouldUpdate: true, Reason: "r", DailyEntry: "- d", MemoryUpdate: "m", ProfileUpdate: "p"}, ""},
		{"braces in prose before", "Use {curly} braces. " + full, Extraction{ShouldUpdate: true, Reason: "r", DailyEntry: "- d", MemoryUpdate: "m", ProfileUpdate: "p"}, ""},
		{"nulls and missing", `{"should_update": false, "reason": null}`, Extraction{}, ""},
		{"string boolean", `{"should_update":"true","daily_entry":"x"}`, Extraction{ShouldUpdate: true, DailyEntry: "x"}, ""},
		{"braces inside strings", `{"should_update":true,"daily_entry":"- a {b} \"c\" }"}`, Extraction{ShouldUpdate: true, DailyEntry: `- a {b} "c" }`}, ""},
		{"wrong types", `{"should_update":1,"daily_entry":["x"]}`, Extraction{}, "should_update must be true or false, got 1; daily_entry must be a string"},
		{"no json", "I cannot help with that.", Extraction{}, "no JSON object"},
		{"cut off", `{"should_update":true,"daily_entry":"- a`, Extraction{}, "no JSON object"},
		{"other object", `{"answer": 42}`, Extraction{}, "no JSON object"},
		{"edits", `{"should_update":true,"daily_entry":"- d","memory_edits":[{"op":"add","under":"## Preferences","text":"- likes tea"}],"profile_edits":[{"op":"replace","old":"Paris","new":"Berlin"}],"memory_update":"","profile_update":null}`,
			Extraction{ShouldUpdate: true, DailyEntry: "- d", MemoryEdits: []memedit.Edit{{Op: "add", Under: "## Preferences", Text: "- likes tea"}},
				ProfileEdits: []memedit.Edit{{Op: "replace", Old: "Paris", New: "Berlin"}}}, ""},
		{"empty edits", `{"should_update":true,"memory_edits":[],"profile_edits":null}`, Extraction{ShouldUpdate: true, MemoryEdits: []memedit.Edit{}}, ""},
		{"bad edit", `{"should_update":true,"memory_edits":[{"op":"append","text":"x"}]}`, Extraction{}, `memory_edits[0]: op must be add, replace or delete, got "append"`},
		{"edits and whole file", `{"should_update":true,"memory_update":"# M","memory_edits":[{"op":"delete","old":"x"}]}`, Extraction{}, "memory_update and memory_edits are both given"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseExtraction(tc.in)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err %v, want %q", err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v want %+v", got, tc.want)
			}
		})
	}
}

func TestTranscript(t *testing.T) {
	msgs := []store.Message{
		{ConversationID: "a", Role: "user", Content: "  hello  "},
		{ConversationID: "a", Role: "assistant", Content: strings.Repeat("é", 2001)},
		{ConversationID: "b", Role: "user", Content: "second"},
	}
	zh := Transcript("zh", msgs)
	want := "### 对话 a\n用户: hello\n助手: " + strings.Repeat("é", 2000) + "... [截断]\n\n### 对话 b\n用户: second"
	if zh != want {
		t.Fatalf("zh transcript\n%q\nwant\n%q", zh, want)
	}
	en := Transcript("en", msgs[:1])
	if en != "User: hello" {
		t.Fatalf("en single conversation: %q", en)
	}
	// An assistant turn that only made tool calls (blank content), tool results and a
	// conversation of blank messages only leave no line and no header, as in MateClaw.
	withTools := []store.Message{
		{ConversationID: "a", Role: "user", Content: "weather?"},
		{ConversationID: "a", Role: "assistant", Content: "  \n", ToolCalls: `[{"id":"t1"}]`},
		{ConversationID: "a", Role: "tool", Content: "sunny", ToolCallID: "t1"},
		{ConversationID: "a", Role: "assistant", Content: "It is sunny."},
		{ConversationID: "b", Role: "assistant", Content: ""},
	}
	if got, want := Transcript("en", withTools), "User: weather?\nAssistant: It is sunny."; got != want {
		t.Fatalf("transcript with a tool-call-only turn:\n%q\nwant\n%q", got, want)
	}
	// Exactly 2000 characters is not cut.
	if got := truncateRunes(strings.Repeat("字", 2000), MaxMessageRunes, "X"); strings.HasSuffix(got, "X") {
		t.Fatal("2000 characters cut")
	}
}

func TestEffectKeyDependsOnlyOnRanges(t *testing.T) {
	a := effectKey(1, []span{{Conv: "c1", From: 0, To: 10}, {Conv: "c2", From: 4, To: 9}})
	b := effectKey(1, []span{{Conv: "c2", From: 4, To: 9}, {Conv: "c1", From: 0, To: 10}})
	c := effectKey(1, []span{{Conv: "c1", From: 0, To: 11}, {Conv: "c2", From: 4, To: 9}})
	d := effectKey(2, []span{{Conv: "c1", From: 0, To: 10}, {Conv: "c2", From: 4, To: 9}})
	if a != b || a == c || a == d || len(a) > 191 {
		t.Fatalf("keys %s %s %s %s", a, b, c, d)
	}
}
