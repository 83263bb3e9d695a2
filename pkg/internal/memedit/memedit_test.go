package memedit

import (
	"errors"
	"strings"
	"testing"
)

const file = "# MEMORY.md\n\n## Preferences\n- likes coffee\n\n## Projects\n- Apollo: migration in Q2\n### Apollo details\n- owner: Bob\n\n## Travel\n"

func TestApply(t *testing.T) {
	cases := []struct {
		name, content string
		edits         []Edit
		want          string
	}{
		{"add under a heading goes at the section's end", file,
			[]Edit{{Op: OpAdd, Under: "## Preferences", Text: "- likes tea"}},
			"# MEMORY.md\n\n## Preferences\n- likes coffee\n- likes tea\n\n## Projects\n- Apollo: migration in Q2\n### Apollo details\n- owner: Bob\n\n## Travel\n"},
		{"add under a heading by its title, past its subsections", file,
			[]Edit{{Op: OpAdd, Under: "Projects", Text: "- Hermes: started"}},
			"# MEMORY.md\n\n## Preferences\n- likes coffee\n\n## Projects\n- Apollo: migration in Q2\n### Apollo details\n- owner: Bob\n- Hermes: started\n\n## Travel\n"},
		{"add under the last, empty heading", file,
			[]Edit{{Op: OpAdd, Under: "## Travel", Text: "- moved to Berlin"}},
			strings.TrimSuffix(file, "\n") + "\n- moved to Berlin\n"},
		{"add without a heading appends a new section", file,
			[]Edit{{Op: OpAdd, Text: "## Health\n- allergic to nuts"}},
			file + "\n## Health\n- allergic to nuts\n"},
		{"a # line in a code block is no heading", "## Setup\n```sh\n# Setup\nmake run\n```\n## Later\n",
			[]Edit{{Op: OpAdd, Under: "Setup", Text: "- needs Go 1.25"}},
			"## Setup\n```sh\n# Setup\nmake run\n```\n- needs Go 1.25\n## Later\n"},
		{"add to an empty file", "",
			[]Edit{{Op: OpAdd, Text: "- first fact"}}, "- first fact\n"},
		{"replace exact text", file,
			[]Edit{{Op: OpReplace, Old: "migration in Q2", New: "migration in Q3"}},
			strings.Replace(file, "Q2", "Q3", 1)},
		{"delete a whole line takes its line break", file,
			[]Edit{{Op: OpDelete, Old: "- owner: Bob"}},
			strings.Replace(file, "- owner: Bob\n", "", 1)},
		{"delete part of a line", file,
			[]Edit{{Op: OpDelete, Old: ": migration in Q2"}},
			strings.Replace(file, ": migration in Q2", "", 1)},
		{"edits apply in order, each to the result of the ones before", file,
			[]Edit{{Op: OpAdd, Under: "## Preferences", Text: "- likes tea"}, {Op: OpReplace, Old: "- likes tea", New: "- likes green tea"}},
			strings.Replace(file, "- likes coffee\n", "- likes coffee\n- likes green tea\n", 1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Apply(c.content, c.edits)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got\n%q\nwant\n%q", got, c.want)
			}
		})
	}
}

func TestApplyRefusesMissingOrAmbiguousAnchors(t *testing.T) {
	dup := file + "## Preferences\n- likes coffee\n"
	cases := []struct {
		name, content string
		edits         []Edit
		count         int
		msg           string
	}{
		{"missing heading", file, []Edit{{Op: OpAdd, Under: "## Hobbies", Text: "- chess"}}, 0, `heading "## Hobbies" not found`},
		{"ambiguous heading", dup, []Edit{{Op: OpAdd, Under: "## Preferences", Text: "- tea"}}, 2, "occurs 2 times"},
		{"missing text", file, []Edit{{Op: OpReplace, Old: "likes juice", New: "likes tea"}}, 0, `text "likes juice" not found`},
		{"ambiguous text", dup, []Edit{{Op: OpDelete, Old: "- likes coffee"}}, 2, "ambiguous"},
		{"ambiguous replace", dup, []Edit{{Op: OpReplace, Old: "- likes coffee", New: "- likes tea"}}, 2, "ambiguous"},
		{"overlapping occurrences are ambiguous", "aaa\n", []Edit{{Op: OpDelete, Old: "aa"}}, 2, "ambiguous"},
		{"a later edit fails: none applies", file, []Edit{{Op: OpAdd, Under: "## Travel", Text: "- Berlin"}, {Op: OpDelete, Old: "nope"}}, 0, "edit 2 (delete)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Apply(c.content, c.edits)
			var ae *AnchorError
			if !errors.As(err, &ae) || !errors.Is(err, ErrAnchor) || got != "" {
				t.Fatalf("got %q, %v; want an anchor error and no content", got, err)
			}
			if ae.Count != c.count || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %q (count %d), want count %d and %q", err, ae.Count, c.count, c.msg)
			}
		})
	}
}

func TestParse(t *testing.T) {
	good := `[{"op":"add","under":"## Preferences","text":"- likes tea"},{"op":"replace","old":"a","new":"b"},{"op":"delete","old":"c"},{"op":"add","text":"- x","under":null}]`
	edits, err := Parse("memory_edits", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	want := []Edit{{Op: OpAdd, Under: "## Preferences", Text: "- likes tea"}, {Op: OpReplace, Old: "a", New: "b"}, {Op: OpDelete, Old: "c"}, {Op: OpAdd, Text: "- x"}}
	if len(edits) != len(want) {
		t.Fatalf("got %+v", edits)
	}
	for i := range want {
		if edits[i] != want[i] {
			t.Fatalf("edit %d: got %+v want %+v", i, edits[i], want[i])
		}
	}
	if e, err := Parse("memory_edits", []byte("null")); err != nil || e != nil {
		t.Fatalf("null: %v %v", e, err)
	}
	bad := []struct{ raw, msg string }{
		{`"- likes tea"`, "memory_edits must be a list of edit objects"},
		{`[1]`, "memory_edits[0]: must be an object"},
		{`[{"op":"insert","text":"x"}]`, `op must be add, replace or delete, got "insert"`},
		{`[{"text":"x"}]`, `op must be add, replace or delete, got ""`},
		{`[{"op":"add","text":""}]`, "add needs a non-empty text"},
		{`[{"op":"add","text":"x","old":"y"}]`, `add takes only under and text; unexpected field "old"`},
		{`[{"op":"replace","old":"x"}]`, "replace needs a non-empty old and a non-empty new"},
		{`[{"op":"replace","old":"x","new":"x"}]`, "the same text"},
		{`[{"op":"delete","old":" "}]`, "delete needs a non-empty old"},
		{`[{"op":"delete","old":"x","new":"y"}]`, `delete takes only old; unexpected field "new"`},
		{`[{"op":"add","text":5}]`, "text must be a string"},
		{"[" + strings.Repeat(`{"op":"delete","old":"x"},`, MaxEdits) + `{"op":"delete","old":"x"}]`, "at most 200"},
	}
	for _, b := range bad {
		if _, err := Parse("memory_edits", []byte(b.raw)); err == nil || !strings.Contains(err.Error(), b.msg) {
			t.Errorf("%s: error %v, want %q", b.raw, err, b.msg)
		}
	}
}

// The model's answer is outside input: no edits list and no file may make Parse or Apply
// panic, and an applied add or replace leaves its text in the file.
func FuzzParseApply(f *testing.F) {
	f.Add(file, `[{"op":"add","under":"## Preferences","text":"- likes tea"}]`)
	f.Add(file, `[{"op":"replace","old":"Q2","new":"Q3"},{"op":"delete","old":"- owner: Bob"}]`)
	f.Add("```\n# x\n", `[{"op":"add","under":"x","text":"# y"}]`)
	f.Fuzz(func(t *testing.T, content, raw string) {
		edits, err := Parse("memory_edits", []byte(raw))
		if err != nil {
			return
		}
		got, err := Apply(content, edits)
		if err != nil {
			return
		}
		if len(edits) == 1 {
			e := edits[0]
			want := e.New
			if e.Op == OpAdd {
				want = strings.Trim(e.Text, "\n")
			}
			if e.Op != OpDelete && !strings.Contains(got, want) {
				t.Fatalf("%+v applied to %q gave %q", e, content, got)
			}
		}
	})
}
