package emergence

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/matememory/matememory/pkg/internal/memedit"
)

// Reply is the model's answer: the spec's contract (memory_content, the whole new
// MEMORY.md), or memory_edits instead (issue 22).
type Reply struct {
	ShouldUpdate  bool   `json:"should_update"`
	Reason        string `json:"reason"`
	MemoryContent string `json:"memory_content"`
	// MemoryEdits change MEMORY.md in place (pkg/internal/memedit); never given with MemoryContent.
	MemoryEdits []memedit.Edit `json:"memory_edits"`
}

// errNoJSON: the answer holds no JSON object with should_update.
var errNoJSON = errors.New("the model's answer holds no JSON object with should_update")

// ParseReply reads the model's answer tolerantly: a bare JSON object, one inside a markdown
// fence, or one with prose before and after it. should_update may also come as the string
// "true"/"false" (some models quote booleans).
func ParseReply(s string) (Reply, error) {
	s = strings.TrimSpace(strings.TrimPrefix(s, "\uFEFF"))
	for i := strings.IndexByte(s, '{'); i >= 0; {
		dec := json.NewDecoder(strings.NewReader(s[i:]))
		var raw map[string]json.RawMessage
		if err := dec.Decode(&raw); err == nil {
			if r, ok, err := fromRaw(raw); ok {
				return r, err
			}
		}
		next := strings.IndexByte(s[i+1:], '{')
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return Reply{}, fmt.Errorf("%w: %q", errNoJSON, clip(s, 200))
}

func fromRaw(raw map[string]json.RawMessage) (Reply, bool, error) {
	su, ok := raw["should_update"]
	if !ok {
		return Reply{}, false, nil
	}
	var r Reply
	var b bool
	if err := json.Unmarshal(su, &b); err != nil {
		var str string
		if json.Unmarshal(su, &str) != nil {
			return r, true, fmt.Errorf("should_update is %s; expected true or false", clip(string(su), 40))
		}
		switch strings.ToLower(strings.TrimSpace(str)) {
		case "true", "yes":
			b = true
		case "false", "no", "":
		default:
			return r, true, fmt.Errorf("should_update is %q; expected true or false", clip(str, 40))
		}
	}
	r.ShouldUpdate = b
	if v, ok := raw["reason"]; ok {
		if json.Unmarshal(v, &r.Reason) != nil {
			r.Reason = string(v)
		}
	}
	if v, ok := raw["memory_content"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &r.MemoryContent); err != nil {
			return r, true, fmt.Errorf("memory_content is not a string: %s", clip(string(v), 60))
		}
	}
	if v, ok := raw["memory_edits"]; ok {
		edits, err := memedit.Parse("memory_edits", v)
		if err != nil {
			return r, true, err
		}
		if len(edits) > 0 && strings.TrimSpace(r.MemoryContent) != "" {
			return r, true, errors.New("memory_content and memory_edits are both given: send the whole file or its edits, not both")
		}
		r.MemoryEdits = edits
	}
	return r, true, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
