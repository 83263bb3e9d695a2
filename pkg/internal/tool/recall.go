package tool

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/matememory/matememory/pkg/internal/recall"
)

// Recall tool names, present when recall is enabled (EnableRecall).
const (
	SearchMemory = "search_workspace_memory"
	ReadLines    = "read_workspace_memory_lines"
)

// Searcher is what the search tool needs; *recall.Searcher satisfies it.
type Searcher interface {
	Search(ctx context.Context, agentID int64, q recall.Query) (recall.Result, error)
}

// EnableRecall adds search_workspace_memory and read_workspace_memory_lines.
func (t *Tools) EnableRecall(s Searcher) { t.recall = s }

// RecallEnabled reports whether the recall tools are available.
func (t *Tools) RecallEnabled() bool { return t.recall != nil }

// Definitions returns the tools this instance executes: the four file tools, plus the
// recall tools when enabled.
func (t *Tools) Definitions(language string) []Definition {
	defs := Definitions(language)
	if t.recall != nil {
		defs = append(defs, RecallDefinitions(language)...)
	}
	return defs
}

// maxReadLines bounds one read_workspace_memory_lines call.
const maxReadLines = 400

// RecallDefinitions are the two recall tools' definitions.
func RecallDefinitions(language string) []Definition {
	pick := func(zh, e string) string {
		if language == "en" {
			return e
		}
		return zh
	}
	date := func(zh, en string) json.RawMessage { return prop("string", pick(zh, en)) }
	return []Definition{
		def(SearchMemory, pick(
			"在你的全部记忆（MEMORY.md、PROFILE.md、memory/ 下的每日笔记及其他 .md 文件）中做混合检索（关键词 BM25 + 语义向量，较新的笔记优先，去除重复）。当用户提到过去的事、约定、偏好、订单号、主机名等而系统提示词里没有时，先搜索再回答。每条结果给出文件名、行号范围、日期、片段和分数；需要上下文时用 read_workspace_memory_lines 读取那几行。",
			"Search all of your memory (MEMORY.md, PROFILE.md, daily notes under memory/ and any other .md file) with hybrid retrieval (BM25 keywords + semantic vectors, recent notes first, near-duplicates removed). Search before answering when the user refers to past events, agreements, preferences, order numbers, host names or anything not in your system prompt. Each hit gives the file, line range, date, snippet and scores; read the lines with read_workspace_memory_lines when you need more context."),
			schema(map[string]json.RawMessage{
				"query":          prop("string", pick("要找的内容：关键词、标识符或一句话。", "What to look for: key words, identifiers or a sentence.")),
				"maxResults":     prop("integer", pick("可选，返回条数，默认 6，最多 50。", "Optional: number of hits, default 6, at most 50.")),
				"filenamePrefix": prop("string", pick("可选，只搜索以此前缀开头的文件，例如 \"memory/\"。", "Optional: only files whose name starts with this prefix, e.g. \"memory/\".")),
				"since":          date("可选，只要此日期（YYYY-MM-DD，含）之后的内容。", "Optional: only content dated on or after this day (YYYY-MM-DD)."),
				"until":          date("可选，只要此日期（YYYY-MM-DD，含）之前的内容。", "Optional: only content dated on or before this day (YYYY-MM-DD)."),
				"minRelevance":   prop("number", pick("可选，只返回 relevance 不低于此值的结果（0–1；0.5 及以上为有把握）。默认返回所有匹配的结果，按相关度排序。", "Optional: only hits whose relevance is at least this (0–1; 0.5 and above is confident). By default every matching hit is returned, ranked.")),
			}, "query")),
		def(ReadLines, pick(
			"读取一个工作区记忆文件的指定行（从 1 开始，含两端），例如检索结果给出的行号范围。一次最多 400 行。",
			"Read a line range of a workspace memory file (1-based, inclusive), e.g. the range a search hit gives. At most 400 lines per call."),
			schema(map[string]json.RawMessage{
				"filename":  prop("string", pick("文件名，例如 memory/2026-04-01.md。", "File name, e.g. memory/2026-04-01.md.")),
				"startLine": prop("integer", pick("第一行（从 1 开始）。", "First line (1-based).")),
				"endLine":   prop("integer", pick("可选，最后一行（含），默认 startLine+49。", "Optional: last line (inclusive), default startLine+49.")),
			}, "filename", "startLine")),
	}
}

func recallArgNames(tool string) []string {
	switch tool {
	case SearchMemory:
		return []string{"query", "maxResults", "filenamePrefix", "since", "until", "minRelevance"}
	case ReadLines:
		return []string{"filename", "startLine", "endLine"}
	}
	return nil
}

type searchArgs struct {
	Query          *string  `json:"query"`
	MaxResults     *int     `json:"maxResults"`
	FilenamePrefix *string  `json:"filenamePrefix"`
	Since          *string  `json:"since"`
	Until          *string  `json:"until"`
	MinRelevance   *float64 `json:"minRelevance"`
}

type linesArgs struct {
	Filename  *string `json:"filename"`
	StartLine *int    `json:"startLine"`
	EndLine   *int    `json:"endLine"`
}

// LinesResult is the output of read_workspace_memory_lines.
type LinesResult struct {
	AgentID    int64  `json:"agentId"`
	Filename   string `json:"filename"`
	StartLine  int    `json:"startLine"`
	EndLine    int    `json:"endLine"`
	TotalLines int    `json:"totalLines"`
	Version    int64  `json:"version"`
	Content    string `json:"content"`
}

func (t *Tools) isRecallTool(name string) bool {
	return t.recall != nil && (name == SearchMemory || name == ReadLines)
}

func (t *Tools) callRecall(ctx context.Context, agentID int64, name string, args json.RawMessage) (any, error) {
	if name == SearchMemory {
		var a searchArgs
		if err := decodeArgs(name, args, &a); err != nil {
			return nil, err
		}
		if err := require(name, "query", a.Query); err != nil {
			return nil, err
		}
		q := recall.Query{Text: *a.Query, MaxResults: deref(a.MaxResults), MaxResultsGiven: a.MaxResults != nil, FilenamePrefix: deref(a.FilenamePrefix),
			MinRelevance: deref(a.MinRelevance)}
		var err error
		if q.Since, err = parseDay(name, "since", a.Since); err != nil {
			return nil, err
		}
		if q.Until, err = parseDay(name, "until", a.Until); err != nil {
			return nil, err
		}
		if _, err := t.ws.EnsureAgent(ctx, agentID); err != nil {
			return nil, err
		}
		return t.recall.Search(ctx, agentID, q)
	}
	var a linesArgs
	if err := decodeArgs(name, args, &a); err != nil {
		return nil, err
	}
	if err := require(name, "filename", a.Filename); err != nil {
		return nil, err
	}
	if err := require(name, "startLine", a.StartLine); err != nil {
		return nil, err
	}
	start := *a.StartLine
	end, err := lineRange(name, start, a.EndLine, 50)
	if err != nil {
		return nil, err
	}
	f, err := t.ws.Get(ctx, agentID, *a.Filename)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.ReplaceAll(f.Content, "\r\n", "\n"), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	out := LinesResult{AgentID: agentID, Filename: f.Filename, TotalLines: len(lines), Version: f.Version, StartLine: start}
	if start > len(lines) {
		return nil, badArgs("%s: %s has %d lines; startLine %d is past the end", name, f.Filename, len(lines), start)
	}
	end = min(end, len(lines))
	out.EndLine = end
	out.Content = strings.Join(lines[start-1:end], "\n")
	return out, nil
}

func parseDay(tool, field string, s *string) (time.Time, error) {
	if s == nil || strings.TrimSpace(*s) == "" {
		return time.Time{}, nil
	}
	d, err := time.Parse(time.DateOnly, strings.TrimSpace(*s))
	if err != nil {
		return time.Time{}, badArgs("%s: %s must be a day as YYYY-MM-DD, got %q", tool, field, *s)
	}
	return d, nil
}

// lineRange checks a tool's startLine and endLine (span lines from start when endLine is
// absent) and returns the last line.
func lineRange(name string, start int, endLine *int, span int) (int, error) {
	end := start + span - 1
	if endLine != nil {
		end = *endLine
	}
	switch {
	case start < 1:
		return 0, badArgs("%s: startLine must be 1 or more, got %d", name, start)
	case end < start:
		return 0, badArgs("%s: endLine %d is before startLine %d", name, end, start)
	case end-start+1 > maxReadLines:
		return 0, badArgs("%s: at most %d lines per call; asked for %d", name, maxReadLines, end-start+1)
	}
	return end, nil
}
