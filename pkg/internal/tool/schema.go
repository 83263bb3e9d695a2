package tool

import (
	"encoding/json"
	"fmt"

	"github.com/matememory/matememory/pkg/internal/workspace"
)

// The filename rules of workspace.ValidateName as a JSON Schema pattern (RE2 and ECMA-262
// with the u flag read it alike), so that a client or a schema validator refuses a bad name
// before it is sent. A path segment is one or more words separated by spaces; a word is
// made of characters that are not '/', '\', control, invisible formatting or space
// characters, and dots that are never two in a row; a lone "." is no segment. The last
// segment ends in ".md" after at least one other character. A Windows drive prefix is
// refused by FilenameNotPattern, the byte limit by maxLength (which counts characters,
// so the service's 256-byte check stays the exact one).
var (
	FilenamePattern    = filenamePattern()
	FilenameNotPattern = `^[A-Za-z]:`
)

func filenamePattern() string {
	const (
		e = `[^/\\.\p{Cc}\p{Cf}\p{Z}]` // a visible character other than '/', '\' and '.'
		z = `\p{Z}`                    // a space
	)
	wordE := `\.?(?:` + e + `+\.)*` + e + `+\.?` // a word with at least one visible character
	word := `(?:\.|` + wordE + `)`
	seg := `(?:` + wordE + `|` + word + `(?:` + z + `+` + word + `)+)`
	lastWord := `\.?(?:` + e + `+\.)+md`
	last := `(?:` + lastWord + `|` + word + `(?:` + z + `+` + word + `)*` + z + `+(?:\.md|` + lastWord + `))`
	return `^(?:` + seg + `/)*` + last + `$`
}

// FullDefinitions returns every tool this instance executes (the four, the recall tools when
// enabled, and the more tools) with the rules of their arguments in their JSON Schemas: a
// filename's pattern and length, the content size limit, non-empty texts, number ranges.
// These are the definitions MCP serves, and its arguments are validated against them.
func (t *Tools) FullDefinitions(language string) []Definition {
	defs := append(t.Definitions(language), MoreDefinitions(language)...)
	out := make([]Definition, 0, len(defs))
	for _, d := range defs {
		d.Function.Parameters = constrain(d.Function.Parameters, t.ws.MaxBytes())
		out = append(out, d)
	}
	return out
}

// constrain adds the argument rules, by argument name, to a tool's parameter schema.
func constrain(params json.RawMessage, maxBytes int) json.RawMessage {
	var s struct {
		Type                 string                    `json:"type"`
		Properties           map[string]map[string]any `json:"properties"`
		Required             []string                  `json:"required,omitempty"`
		AdditionalProperties bool                      `json:"additionalProperties"`
	}
	if err := json.Unmarshal(params, &s); err != nil {
		panic(fmt.Sprintf("tool parameters: %v", err)) // static definitions: cannot fail
	}
	for name, p := range s.Properties {
		switch name {
		case "filename":
			p["minLength"] = len("a.md")
			p["maxLength"] = workspace.MaxNameBytes
			p["pattern"] = FilenamePattern
			p["not"] = map[string]any{"pattern": FilenameNotPattern}
		case "filenamePrefix":
			p["maxLength"] = workspace.MaxNameBytes
		case "content", "newText":
			p["maxLength"] = maxBytes
		case "text", "oldText":
			p["minLength"] = 1
			p["maxLength"] = maxBytes
		case "query":
			p["minLength"] = 1
		case "since", "until":
			p["pattern"] = `^[0-9]{4}-[0-9]{2}-[0-9]{2}$`
		case "maxResults":
			p["minimum"], p["maximum"] = 1, 50
		case "minRelevance":
			p["minimum"], p["maximum"] = 0, 1
		case "startLine", "endLine", "version":
			p["minimum"] = 1
		}
	}
	return mustJSON(s)
}
