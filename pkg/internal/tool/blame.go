package tool

import (
	"context"
	"encoding/json"
	"time"

	"github.com/matememory/matememory/pkg/internal/blame"
)

// BlameFile is the more tool that says where each line of a file came from.
const BlameFile = "blame_workspace_memory_file"

// Blamer annotates a file's lines with their provenance; *blame.Service satisfies it.
type Blamer interface {
	Blame(ctx context.Context, agentID int64, name string) (blame.File, error)
}

// EnableBlame makes blame_workspace_memory_file name the pipeline runs behind the lines
// (event and conversations, from the ledger); without it the tool blames from the history
// alone.
func (t *Tools) EnableBlame(b Blamer) { t.blame = b }

// BlameOrigin is a change behind a line, compact: what a model needs to say where a fact
// came from.
type BlameOrigin struct {
	Version int64     `json:"version"`
	Actor   string    `json:"actor,omitempty"`
	Action  string    `json:"action,omitempty"`
	Time    time.Time `json:"time"`
	// Run is the pipeline run's id (the change's ref) and RunKind, EventID and Conversations
	// what the ledger holds of it.
	Run           string   `json:"run,omitempty"`
	RunKind       string   `json:"runKind,omitempty"`
	EventID       string   `json:"eventId,omitempty"`
	Conversations []string `json:"conversations,omitempty"`
}

// BlameLine is one line with its origins; Confirmed is left out when no later change kept
// the line (it would repeat Introduced).
type BlameLine struct {
	Line       int          `json:"line"`
	Text       string       `json:"text"`
	Introduced BlameOrigin  `json:"introduced"`
	Confirmed  *BlameOrigin `json:"confirmed,omitempty"`
}

// BlameResult is the output of blame_workspace_memory_file.
type BlameResult struct {
	AgentID    int64       `json:"agentId"`
	Filename   string      `json:"filename"`
	Version    int64       `json:"version"`
	StartLine  int         `json:"startLine"`
	EndLine    int         `json:"endLine"`
	TotalLines int         `json:"totalLines"`
	Lines      []BlameLine `json:"lines"`
}

type blameArgs struct {
	Filename  *string `json:"filename"`
	StartLine *int    `json:"startLine"`
	EndLine   *int    `json:"endLine"`
}

func blameDefinition(pick func(zh, en string) string, filename json.RawMessage) Definition {
	return def(BlameFile, pick(
		"说明一个工作区记忆文件每一行的来源（类似 git blame）：引入该行的版本、时间、谁写的（summarizer、emergence、tool、api）、动作，以及流水线运行的 run id、事件 id 和会话 id；confirmed 是之后仍保留该行的最新一次修改（与 introduced 相同时省略）。一次最多 400 行，可用 startLine/endLine 选范围。用户问某条记忆从哪来、何时记下时使用。",
		"Say where each line of a workspace memory file came from (like git blame): the version that introduced it, when, who wrote it (summarizer, emergence, tool, api), the action, and for a pipeline run its run id, event id and conversation ids; confirmed is the newest later change that kept the line (left out when it is the introduction). At most 400 lines per call; choose a range with startLine/endLine. Use it when the user asks where a memory came from or when it was noted."),
		schema(map[string]json.RawMessage{
			"filename":  filename,
			"startLine": prop("integer", pick("可选，第一行（从 1 开始），默认 1。", "Optional: first line (1-based), default 1.")),
			"endLine":   prop("integer", pick("可选，最后一行（含），默认 startLine+399。", "Optional: last line (inclusive), default startLine+399.")),
		}, "filename"))
}

func (t *Tools) callBlame(ctx context.Context, agentID int64, name string, args json.RawMessage) (any, error) {
	var a blameArgs
	if err := decodeArgs(name, args, &a); err != nil {
		return nil, err
	}
	if err := require(name, "filename", a.Filename); err != nil {
		return nil, err
	}
	start := 1
	if a.StartLine != nil {
		start = *a.StartLine
	}
	end, err := lineRange(name, start, a.EndLine, maxReadLines)
	if err != nil {
		return nil, err
	}
	f, err := t.blame.Blame(ctx, agentID, *a.Filename)
	if err != nil {
		return nil, err
	}
	out := BlameResult{AgentID: agentID, Filename: f.Filename, Version: f.Version, TotalLines: len(f.Lines), StartLine: start, Lines: []BlameLine{}}
	if len(f.Lines) > 0 && start > len(f.Lines) {
		return nil, badArgs("%s: %s has %d lines; startLine %d is past the end", name, f.Filename, len(f.Lines), start)
	}
	end = min(end, len(f.Lines))
	out.EndLine = end
	if start <= end {
		for _, l := range f.Lines[start-1 : end] {
			bl := BlameLine{Line: l.Number, Text: l.Text, Introduced: compactOrigin(l.Introduced)}
			if l.Confirmed.Version != l.Introduced.Version {
				c := compactOrigin(l.Confirmed)
				bl.Confirmed = &c
			}
			out.Lines = append(out.Lines, bl)
		}
	}
	return out, nil
}

func compactOrigin(o blame.Origin) BlameOrigin {
	return BlameOrigin{Version: o.Version, Actor: o.Actor, Action: o.Action, Time: o.Time, Run: o.Ref,
		RunKind: o.RunKind, EventID: o.EventID, Conversations: o.Conversations}
}
