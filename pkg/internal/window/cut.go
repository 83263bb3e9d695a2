package window

import (
	"fmt"
	"sort"
	"strings"

	"github.com/matememory/matememory/pkg/api"
	"github.com/matememory/matememory/pkg/internal/promptsafe"
	"github.com/matememory/matememory/pkg/internal/tokens"
)

// WorkspaceCut is one workspace file the system message could not hold whole: the model
// sees a marker where it was cut (issue 22: never a silent truncation).
type WorkspaceCut = api.WorkspaceCut

// injectedFile is one file block of the workspace injection ("--- NAME ---" and its lines).
type injectedFile struct {
	name  string
	lines []string // content lines, header excluded
}

// splitInjection parses the workspace injection (pkg/internal/workspace.Service.SystemPrompt) into
// its file blocks. A content line that looks like a header is escaped there, so every
// delimiter line starts a block.
func splitInjection(s string) []injectedFile {
	var out []injectedFile
	for _, line := range strings.Split(s, "\n") {
		if promptsafe.FileDelimiter(line) {
			name := strings.TrimSuffix(strings.TrimPrefix(line, "--- "), " ---")
			out = append(out, injectedFile{name: name})
			continue
		}
		if len(out) == 0 { // text before the first header: kept as a block of its own
			out = append(out, injectedFile{})
		}
		out[len(out)-1].lines = append(out[len(out)-1].lines, line)
	}
	// The blank line that separates two blocks belongs to neither.
	for i := range out {
		if i < len(out)-1 {
			if n := len(out[i].lines); n > 0 && out[i].lines[n-1] == "" {
				out[i].lines = out[i].lines[:n-1]
			}
		}
	}
	return out
}

func (f injectedFile) render(lines []string) string {
	body := strings.Join(lines, "\n")
	if f.name == "" {
		return body
	}
	if body == "" {
		return "--- " + f.name + " ---"
	}
	return "--- " + f.name + " ---\n" + body
}

// cutMarker is the line that stands for what a cut left out.
func cutMarker(lang string, c WorkspaceCut) string {
	left := c.Tokens - c.KeptTokens
	if lang == "en" {
		return fmt.Sprintf("[MateMemory: %s is cut here to fit this request: its last %d of %d lines (about %d tokens) are not shown. "+
			"They are kept in full: find them with search_workspace_memory, or read them with read_workspace_memory_lines from line %d.]",
			c.Filename, c.Lines-c.KeptLines, c.Lines, left, c.KeptLines+1)
	}
	return fmt.Sprintf("[MateMemory：为适应本次请求，%s 在此处截断：其后 %d 行（共 %d 行，约 %d 个 token）未显示。"+
		"它们完整保存着：用 search_workspace_memory 检索，或用 read_workspace_memory_lines 从第 %d 行起读取。]",
		c.Filename, c.Lines-c.KeptLines, c.Lines, left, c.KeptLines+1)
}

// omittedMarker stands for the files left out whole.
func omittedMarker(lang string, cuts []WorkspaceCut) string {
	names := make([]string, 0, len(cuts))
	total := 0
	for _, c := range cuts {
		names = append(names, c.Filename)
		total += c.Tokens
	}
	if lang == "en" {
		return fmt.Sprintf("[MateMemory: to fit this request, these workspace files are not shown (about %d tokens): %s. "+
			"They are kept in full: find what they say with search_workspace_memory, or read them with read_workspace_memory_file.]",
			total, strings.Join(names, ", "))
	}
	return fmt.Sprintf("[MateMemory：为适应本次请求，以下工作区文件未显示（约 %d 个 token）：%s。"+
		"它们完整保存着：用 search_workspace_memory 检索，或用 read_workspace_memory_file 读取。]",
		total, strings.Join(names, "、"))
}

// cutInjection fits the injection into at most room tokens: the files are kept whole in
// their order while they fit, the first that does not is cut at a line boundary with a
// marker, and those after it are left out, named by one marker. It returns the injection
// unchanged and no cuts when it fits.
func cutInjection(tk tokens.Tokenizer, lang, injection string, room int) (string, []WorkspaceCut) {
	if tk.Count(injection) <= room {
		return injection, nil
	}
	files := splitInjection(injection)
	const sep = 2 // "\n\n" between blocks, counted generously
	var kept []string
	var cuts []WorkspaceCut
	used, i := 0, 0
	for ; i < len(files); i++ {
		f := files[i]
		whole := f.render(f.lines)
		n := tk.Count(whole)
		// Room for the marker of the files after this one, should there be any.
		reserve := 0
		if i < len(files)-1 {
			reserve = markerReserve(tk, lang)
		}
		if used+n+sep+reserve <= room {
			kept = append(kept, whole)
			used += n + sep
			continue
		}
		// Cut this file: the longest prefix of its lines that fits with its marker and the
		// marker of the files after it.
		c := WorkspaceCut{Filename: f.name, Tokens: n, Lines: len(f.lines)}
		if c.Filename == "" {
			c.Filename = "(system prompt)"
		}
		markTok := tk.Count(cutMarker(lang, WorkspaceCut{Filename: c.Filename, Tokens: n, Lines: c.Lines})) + 8
		avail := room - used - sep - reserve - markTok
		k := sort.Search(len(f.lines)+1, func(k int) bool {
			return tk.Count(f.render(f.lines[:k])) > avail
		}) - 1
		if k >= 0 { // else not even its header fits: it is left out whole, below
			part := f.render(f.lines[:k])
			c.KeptLines, c.KeptTokens = k, tk.Count(part)
			kept = append(kept, part+"\n"+cutMarker(lang, c))
			cuts = append(cuts, c)
			i++
		}
		break
	}
	var omitted []WorkspaceCut
	for ; i < len(files); i++ {
		f := files[i]
		c := WorkspaceCut{Filename: f.name, Tokens: tk.Count(f.render(f.lines)), Lines: len(f.lines)}
		if c.Filename == "" {
			c.Filename = "(system prompt)"
		}
		omitted = append(omitted, c)
	}
	if len(omitted) > 0 {
		kept = append(kept, omittedMarker(lang, omitted))
		cuts = append(cuts, omitted...)
	}
	return strings.Join(kept, "\n\n"), cuts
}

// markerReserve is the room kept for the marker of files left out (a few names).
func markerReserve(tk tokens.Tokenizer, lang string) int {
	return tk.Count(omittedMarker(lang, []WorkspaceCut{{Filename: "memory/2026-01-01.md", Tokens: 100000},
		{Filename: "memory/2026-01-02.md"}, {Filename: "memory/2026-01-03.md"}})) + 8
}

// cutWorkspace cuts the injection when the system message and the current message do not
// fit the budget: the workspace files then get half of what the budget leaves after the
// caller's system prompt, the current message and the reply priming (the other half stays
// for the summary, the history and recall), never silently. When even that is no room,
// the injection is kept and the request fails as too large, as before.
func (s *Service) cutWorkspace(a *assembly, injection string, budget int, system func(string) Message) (string, Message) {
	rest := s.counts.message(a.tk, system(""))
	room := (budget - rest - a.curTok - tokens.ReplyPriming) / 2
	whole := system(injection)
	if room <= 0 {
		return injection, whole
	}
	for attempt := 0; attempt < 4 && room > 0; attempt++ {
		cut, cuts := cutInjection(a.tk, a.lang, injection, room)
		sys := system(cut)
		n := s.counts.message(a.tk, sys)
		if n+a.curTok+tokens.ReplyPriming > budget && attempt < 3 {
			room = room * 3 / 4 // the parts cost a little more together than apart
			continue
		}
		a.sysTok = n
		a.res.WorkspaceCut = cuts
		for _, c := range cuts {
			if c.KeptTokens > 0 || c.KeptLines > 0 {
				a.warn("workspace file %s was cut to fit maxInputTokens %d: %d of its %d lines kept (%d of %d tokens); the system message marks the cut and points to search_workspace_memory",
					c.Filename, budget, c.KeptLines, c.Lines, c.KeptTokens, c.Tokens)
			} else {
				a.warn("workspace file %s (%d tokens) was left out to fit maxInputTokens %d; the system message names it and points to search_workspace_memory",
					c.Filename, c.Tokens, budget)
			}
			if !a.req.Preview {
				s.metrics.cuts.WithLabelValues(cutLabel(c.Filename)).Inc()
			}
		}
		return cut, sys
	}
	return injection, whole
}

// cutLabel keeps the metric's file label bounded: the core file names, else "other".
func cutLabel(name string) string {
	switch name {
	case "AGENTS.md", "SOUL.md", "PROFILE.md", "MEMORY.md":
		return name
	}
	return "other"
}
