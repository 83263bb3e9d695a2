package tool

import (
	"context"
	"encoding/json"
	"time"

	"github.com/matememory/matememory/pkg/internal/store"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// More tools, served over MCP next to the four: a file's history and its lines' provenance,
// rolling it back, appending to it and deleting it. CallFull runs them for the caller's agent exactly like the four;
// they are not among Definitions (what GET /api/v1/tools hands a chat model) nor run by Call
// (the REST execution endpoint), where the workspace routes do these things.
const (
	HistoryFile  = "read_workspace_memory_file_history"
	RollbackFile = "rollback_workspace_memory_file"
	AppendFile   = "append_workspace_memory_file"
	DeleteFile   = "delete_workspace_memory_file"
)

// MoreNames lists the more tools in the order MoreDefinitions returns them.
var MoreNames = []string{HistoryFile, BlameFile, RollbackFile, AppendFile, DeleteFile}

// maxHistoryEntries bounds one history answer.
const maxHistoryEntries = 100

// HistoryEntry is one previous version of a file.
type HistoryEntry struct {
	Version    int64     `json:"version"`
	Action     string    `json:"action"`
	Actor      string    `json:"actor"`
	FileSize   int64     `json:"fileSize"`
	ReplacedAt time.Time `json:"replacedAt"`
	Content    string    `json:"content,omitempty"`
}

// HistoryResult is the output of read_workspace_memory_file_history.
type HistoryResult struct {
	AgentID        int64          `json:"agentId"`
	Filename       string         `json:"filename"`
	CurrentVersion int64          `json:"currentVersion"`
	Count          int            `json:"count"`
	Entries        []HistoryEntry `json:"entries"`
}

// RollbackResult is the output of rollback_workspace_memory_file.
type RollbackResult struct {
	AgentID     int64  `json:"agentId"`
	Filename    string `json:"filename"`
	FromVersion int64  `json:"fromVersion"`
	Version     int64  `json:"version"`
	FileSize    int64  `json:"fileSize"`
	Message     string `json:"message"`
}

// AppendResult is the output of append_workspace_memory_file.
type AppendResult struct {
	AgentID       int64  `json:"agentId"`
	Filename      string `json:"filename"`
	Version       int64  `json:"version"`
	BytesAppended int    `json:"bytesAppended"`
	FileSizeAfter int64  `json:"fileSizeAfter"`
	Message       string `json:"message"`
}

// DeleteResult is the output of delete_workspace_memory_file.
type DeleteResult struct {
	AgentID  int64  `json:"agentId"`
	Filename string `json:"filename"`
	Deleted  bool   `json:"deleted"`
	Message  string `json:"message"`
}

type historyArgs struct {
	Filename       *string `json:"filename"`
	IncludeContent *bool   `json:"includeContent"`
}

type rollbackArgs struct {
	Filename *string `json:"filename"`
	Version  *int64  `json:"version"`
}

type appendArgs struct {
	Filename *string `json:"filename"`
	Text     *string `json:"text"`
}

type deleteArgs struct {
	Filename *string `json:"filename"`
}

// MoreDefinitions are the more tools' definitions, described in language ("zh" or "en").
func MoreDefinitions(language string) []Definition {
	pick := func(zh, e string) string {
		if language == "en" {
			return e
		}
		return zh
	}
	filename := prop("string", pick("相对路径，以 .md 结尾，例如 MEMORY.md 或 memory/2026-04-01.md。", "Relative path ending in .md, e.g. MEMORY.md or memory/2026-04-01.md."))
	return []Definition{
		def(HistoryFile, pick(
			"列出一个工作区记忆文件之前的版本（最新在前，最多 100 个）：版本号、动作（create/write/edit/append/rollback…）、由谁替换（summarizer、emergence、tool、api）、字节数和时间。includeContent=true 时附上每个版本的内容。回滚前先看历史。",
			"List the previous versions of a workspace memory file (newest first, at most 100): version, action (create/write/edit/append/rollback…), who replaced it (summarizer, emergence, tool, api), size and time. includeContent=true adds each version's content. Look at the history before a rollback."),
			schema(map[string]json.RawMessage{
				"filename":       filename,
				"includeContent": prop("boolean", pick("为 true 时返回每个版本的内容，默认 false。", "Return each version's content when true; default false.")),
			}, "filename")),
		blameDefinition(pick, filename),
		def(RollbackFile, pick(
			"把一个工作区记忆文件恢复为历史中的某个版本（version 取自 read_workspace_memory_file_history）。恢复本身是一个新版本，之后也可以再回滚。",
			"Restore a workspace memory file to a previous version (a version from read_workspace_memory_file_history). The rollback is itself a new version, so it can be rolled back too."),
			schema(map[string]json.RawMessage{
				"filename": filename,
				"version":  mustJSON(map[string]any{"type": "integer", "minimum": 1, "description": pick("要恢复的历史版本号（正整数）。", "The previous version to restore (a positive integer).")}),
			}, "filename", "version")),
		def(AppendFile, pick(
			"在工作区记忆文件末尾追加文本（与上文之间空一行），例如给今天的每日笔记 memory/YYYY-MM-DD.md 加一条。文件不存在时会创建（不注入系统提示词，sort_order 100）。追加是原子的，不会覆盖他人同时的修改。",
			"Append text at the end of a workspace memory file (after a blank line), e.g. a new entry in today's daily note memory/YYYY-MM-DD.md. A missing file is created (not injected into the system prompt, sort_order 100). Appending is atomic: it never overwrites someone else's concurrent change."),
			schema(map[string]json.RawMessage{
				"filename": filename,
				"text":     mustJSON(map[string]any{"type": "string", "minLength": 1, "description": pick("要追加的文本（Markdown），非空。", "The text to append (Markdown); not empty.")}),
			}, "filename", "text")),
		def(DeleteFile, pick(
			"删除一个工作区记忆文件。删除是逻辑删除：历史保留，但文件不再出现在列表和系统提示词中。只在用户明确要求时删除。",
			"Delete a workspace memory file. The deletion is logical: its history is kept, but the file leaves listings and the system prompt. Delete only when the user clearly asks for it."),
			schema(map[string]json.RawMessage{"filename": filename}, "filename")),
	}
}

func moreArgNames(tool string) []string {
	switch tool {
	case HistoryFile:
		return []string{"filename", "includeContent"}
	case BlameFile:
		return []string{"filename", "startLine", "endLine"}
	case RollbackFile:
		return []string{"filename", "version"}
	case AppendFile:
		return []string{"filename", "text"}
	case DeleteFile:
		return []string{"filename"}
	}
	return nil
}

// CallFull runs any tool of FullDefinitions: the more tools, and everything Call runs.
func (t *Tools) CallFull(ctx context.Context, agentID int64, name string, args json.RawMessage) (any, error) {
	if isMoreTool(name) {
		return t.callMore(ctx, agentID, name, args)
	}
	return t.Call(ctx, agentID, name, args)
}

func isMoreTool(name string) bool {
	switch name {
	case HistoryFile, BlameFile, RollbackFile, AppendFile, DeleteFile:
		return true
	}
	return false
}

// callMore runs one of the more tools for agentID.
func (t *Tools) callMore(ctx context.Context, agentID int64, name string, args json.RawMessage) (any, error) {
	agent, err := t.ws.EnsureAgent(ctx, agentID)
	if err != nil {
		return nil, err
	}
	ch := workspace.Change{Actor: store.ActorTool, Ref: refFrom(ctx)}
	lang := agent.Language
	switch name {
	case BlameFile:
		return t.callBlame(ctx, agentID, name, args)
	case HistoryFile:
		var a historyArgs
		if err := decodeArgs(name, args, &a); err != nil {
			return nil, err
		}
		if err := require(name, "filename", a.Filename); err != nil {
			return nil, err
		}
		f, err := t.ws.Get(ctx, agentID, *a.Filename)
		if err != nil {
			return nil, err
		}
		hist, err := t.ws.History(ctx, agentID, *a.Filename)
		if err != nil {
			return nil, err
		}
		if len(hist) > maxHistoryEntries {
			hist = hist[:maxHistoryEntries]
		}
		out := HistoryResult{AgentID: agentID, Filename: f.Filename, CurrentVersion: f.Version, Count: len(hist),
			Entries: make([]HistoryEntry, 0, len(hist))}
		for _, h := range hist {
			e := HistoryEntry{Version: h.Version, Action: h.Action, Actor: h.Actor, FileSize: h.FileSize, ReplacedAt: h.ReplacedAt}
			if deref(a.IncludeContent) {
				e.Content = h.Content
			}
			out.Entries = append(out.Entries, e)
		}
		return out, nil
	case RollbackFile:
		var a rollbackArgs
		if err := decodeArgs(name, args, &a); err != nil {
			return nil, err
		}
		if err := require(name, "filename", a.Filename); err != nil {
			return nil, err
		}
		if err := require(name, "version", a.Version); err != nil {
			return nil, err
		}
		f, err := t.ws.Rollback(ctx, agentID, *a.Filename, *a.Version, workspace.AnyVersion, ch)
		if err != nil {
			return nil, err
		}
		return RollbackResult{AgentID: agentID, Filename: f.Filename, FromVersion: *a.Version, Version: f.Version,
			FileSize: f.FileSize, Message: text(lang, "工作区记忆文件已回滚", "Workspace memory file rolled back")}, nil
	case AppendFile:
		var a appendArgs
		if err := decodeArgs(name, args, &a); err != nil {
			return nil, err
		}
		if err := require(name, "filename", a.Filename); err != nil {
			return nil, err
		}
		if err := require(name, "text", a.Text); err != nil {
			return nil, err
		}
		if *a.Text == "" {
			return nil, badArgs("%s: text is empty; give the text to append", name)
		}
		f, err := t.ws.Append(ctx, agentID, *a.Filename, *a.Text, "", ch)
		if err != nil {
			return nil, err
		}
		return AppendResult{AgentID: agentID, Filename: f.Filename, Version: f.Version, BytesAppended: len(*a.Text),
			FileSizeAfter: f.FileSize, Message: text(lang, "已追加到工作区记忆文件", "Appended to the workspace memory file")}, nil
	default: // DeleteFile
		var a deleteArgs
		if err := decodeArgs(name, args, &a); err != nil {
			return nil, err
		}
		if err := require(name, "filename", a.Filename); err != nil {
			return nil, err
		}
		if err := t.ws.Delete(ctx, agentID, *a.Filename, workspace.AnyVersion, ch); err != nil {
			return nil, err
		}
		return DeleteResult{AgentID: agentID, Filename: *a.Filename, Deleted: true,
			Message: text(lang, "工作区记忆文件已删除", "Workspace memory file deleted")}, nil
	}
}
