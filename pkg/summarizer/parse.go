package summarizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Extraction is the model's answer: the spec's five fields.
type Extraction struct {
	ShouldUpdate  bool
	Reason        string
	DailyEntry    string
	MemoryUpdate  string
	ProfileUpdate string
}

// errNoJSON: the answer holds no JSON object with the expected fields.
var errNoJSON = errors.New("no JSON object with should_update found in the model's answer")

// ParseExtraction reads the model's answer tolerantly: the JSON object may be wrapped in a
// markdown code fence or surrounded by prose; the first object that carries should_update
// is taken. should_update must be a boolean (or the string "true"/"false"); the other four
// fields must be strings when present (null or absent means empty).
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
