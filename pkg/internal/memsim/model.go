package memsim

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/tokens"
)

// Model is the scripted accreting model: it answers the extraction with every fact of the
// transcript added to MEMORY.md (a correction replaces the line of the fact it corrects, as
// a careful model would), never removing a line; it answers emergence with no change; and
// asked to consolidate, it keeps the heading and the newest entries that fit about the
// target it is given, dropping the rest. Whole answers the spec's way (the whole new
// MEMORY.md in memory_update) instead of with memory_edits.
type Model struct {
	Whole bool
	// Count counts tokens as the pipeline's tokenizer does, for the usage the answer reports.
	Count tokens.Tokenizer
}

// Section is the heading the model files facts under.
const Section = "## Facts"

var (
	factLine   = regexp.MustCompile(`(?m)^\s*((F-\d{6}): .+)$`)
	budgetLine = regexp.MustCompile(`\((\d+) tokens; budget (\d+)\)`)
	targetLine = regexp.MustCompile(`about (\d+) tokens`)
)

// Reply answers one request.
func (m Model) Reply(r llmtest.Received) llmtest.Reply {
	var system, user string
	for _, msg := range r.Messages {
		switch msg.Role {
		case "system":
			system += msg.Content
		case "user":
			user += msg.Content
		}
	}
	var out string
	switch {
	case strings.Contains(user, "<core_file>"):
		out = m.consolidate(system, user)
	case strings.Contains(user, "<transcript>"):
		out = m.extract(user)
	default: // emergence and anything else: nothing to change
		out = `{"should_update": false, "reason": "nothing new", "memory_edits": []}`
	}
	rep := llmtest.Reply{Content: out}
	if m.Count != nil {
		rep.TokensIn, rep.TokensOut = m.Count.Count(system)+m.Count.Count(user), m.Count.Count(out)
	}
	return rep
}

func between(s, open, close string) string {
	i := strings.Index(s, open)
	if i < 0 {
		return ""
	}
	s = s[i+len(open):]
	if j := strings.LastIndex(s, close); j >= 0 {
		s = s[:j]
	}
	return strings.Trim(s, "\n")
}

type edit struct {
	Op    string `json:"op"`
	Under string `json:"under,omitempty"`
	Text  string `json:"text,omitempty"`
	Old   string `json:"old,omitempty"`
	New   string `json:"new,omitempty"`
}

func (m Model) extract(user string) string {
	memory := between(user, "<memory>", "</memory>")
	transcript := between(user, "<transcript>", "</transcript>")
	lines := strings.Split(memory, "\n")
	var edits []edit
	section := strings.Contains(memory, Section)
	if !section {
		edits = append(edits, edit{Op: "add", Text: Section})
		lines = append(lines, "", Section)
	}
	n := 0
	for _, f := range factLine.FindAllStringSubmatch(transcript, -1) {
		id, text := f[2], "- "+f[1]
		n++
		old := ""
		for k, l := range lines {
			if strings.HasPrefix(l, "- "+id+": ") {
				old, lines[k] = l, text
				break
			}
		}
		if old != "" {
			if old != text {
				edits = append(edits, edit{Op: "replace", Old: old, New: text})
			}
			continue
		}
		edits = append(edits, edit{Op: "add", Under: Section, Text: text})
		lines = append(lines, text)
	}
	ans := map[string]any{"should_update": n > 0, "reason": "new facts", "daily_entry": "- noted " + strconv.Itoa(n) + " items from the user",
		"profile_edits": []edit{}}
	if n == 0 {
		ans["daily_entry"], ans["reason"] = "", "nothing new"
	}
	if m.Whole {
		ans["memory_update"] = strings.TrimLeft(strings.Join(lines, "\n"), "\n") + "\n"
	} else {
		ans["memory_edits"] = edits
	}
	b, _ := json.Marshal(ans)
	return string(b)
}

// consolidate keeps the file's non-entry lines and its newest fact lines, up to the target
// the prompt names (or three quarters of the budget); the model has no tokenizer: it guesses
// three characters a token.
func (m Model) consolidate(system, user string) string {
	content := between(user, "<core_file>", "</core_file>")
	target := 0
	if b := budgetLine.FindStringSubmatch(user); b != nil {
		budget, _ := strconv.Atoi(b[2])
		target = budget * 3 / 4
	}
	if t := targetLine.FindStringSubmatch(system); t != nil {
		target, _ = strconv.Atoi(t[1])
	}
	lines := strings.Split(content, "\n")
	limit := target * 3
	var keep []string
	size := 0
	for _, l := range lines {
		if !strings.HasPrefix(l, "- F-") {
			size += len(l) + 1
		}
	}
	kept := map[int]bool{}
	for k := len(lines) - 1; k >= 0; k-- {
		if strings.HasPrefix(lines[k], "- F-") && size+len(lines[k])+1 <= limit {
			kept[k] = true
			size += len(lines[k]) + 1
		}
	}
	for k, l := range lines {
		if !strings.HasPrefix(l, "- F-") || kept[k] {
			keep = append(keep, l)
		}
	}
	b, _ := json.Marshal(map[string]any{"reason": "kept the newest entries", "content": strings.Join(keep, "\n") + "\n"})
	return string(b)
}
