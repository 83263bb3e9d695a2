package summarizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/matememory/matememory/pkg/internal/memedit"
)

// Extraction is the model's answer: the spec's five fields, or, for either file, its edits
// instead of the whole new file (issue 22).
type Extraction struct {
	ShouldUpdate  bool
	Reason        string
	DailyEntry    string
	MemoryUpdate  string
	ProfileUpdate string
	// MemoryEdits and ProfileEdits change the file in place (pkg/internal/memedit); a file gets its
	// whole new content or its edits, never both.
	MemoryEdits  []memedit.Edit
	ProfileEdits []memedit.Edit
}

// errNoJSON: the answer holds no JSON object with the expected fields.
var errNoJSON = errors.New("no JSON object with should_update found in the model's answer")

// ParseExtraction reads the model's answer tolerantly: the JSON object may be wrapped in a
// markdown code fence or surrounded by prose; the first object that carries should_update
// is taken. should_update must be a boolean (or the string "true"/"false"); the other four
// fields must be strings when present (null or absent means empty). memory_edits and
// profile_edits, when present, must be lists of edits (memedit.Parse), and a file's edits
// exclude its whole-file field.
func ParseExtraction(answer string) (Extraction, error) {
	s := strings.TrimSpace(answer)
	var firstErr error
	for i := strings.IndexByte(s, '{'); i >= 0; {
		dec := json.NewDecoder(strings.NewReader(s[i:]))
		var raw map[string]json.RawMessage
		if err := dec.Decode(&raw); err == nil {
			if _, ok := raw["should_update"]; ok {
				return fromRaw(raw)
			}
		} else if firstErr == nil {
			firstErr = err
		}
		next := strings.IndexByte(s[i+1:], '{')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	if firstErr != nil {
		return Extraction{}, fmt.Errorf("%w (first parse error: %v); answer starts %q", errNoJSON, firstErr, preview(s, 120))
	}
	return Extraction{}, fmt.Errorf("%w; answer starts %q", errNoJSON, preview(s, 120))
}

func fromRaw(raw map[string]json.RawMessage) (Extraction, error) {
	var e Extraction
	var problems []string
	switch v := bytes.TrimSpace(raw["should_update"]); string(v) {
	case "true", `"true"`:
		e.ShouldUpdate = true
	case "false", `"false"`:
	default:
		problems = append(problems, fmt.Sprintf("should_update must be true or false, got %s", preview(string(v), 40)))
	}
	str := func(name string, dst *string) {
		v, ok := raw[name]
		if !ok || string(bytes.TrimSpace(v)) == "null" {
			return
		}
		if err := json.Unmarshal(v, dst); err != nil {
			problems = append(problems, fmt.Sprintf("%s must be a string, got %s", name, preview(string(v), 40)))
		}
	}
	str("reason", &e.Reason)
	str("daily_entry", &e.DailyEntry)
	str("memory_update", &e.MemoryUpdate)
	str("profile_update", &e.ProfileUpdate)
	edits := func(name, whole string, text string, dst *[]memedit.Edit) {
		v, ok := raw[name]
		if !ok {
			return
		}
		list, err := memedit.Parse(name, v)
		if err != nil {
			problems = append(problems, err.Error())
			return
		}
		if len(list) > 0 && strings.TrimSpace(text) != "" {
			problems = append(problems, fmt.Sprintf("%s and %s are both given: send the whole file or its edits, not both", whole, name))
			return
		}
		*dst = list
	}
	edits("memory_edits", "memory_update", e.MemoryUpdate, &e.MemoryEdits)
	edits("profile_edits", "profile_update", e.ProfileUpdate, &e.ProfileEdits)
	if len(problems) > 0 {
		return Extraction{}, fmt.Errorf("the model's JSON is not the expected shape: %s", strings.Join(problems, "; "))
	}
	return e, nil
}

func preview(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
