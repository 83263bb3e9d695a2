package tool

import "encoding/json"

// Definitions returns the four tools as OpenAI function-calling definitions, described in
// language ("zh" or "en"; anything else means "zh"). None has an agent id parameter: the
// agent is bound by whoever executes the call.
func Definitions(language string) []Definition {
	en := language == "en"
	pick := func(zh, e string) string {
		if en {
			return e
		}
		return zh
	}
	filename := prop("string", pick(
		"相对路径，必须以 .md 结尾，例如 MEMORY.md、PROFILE.md 或 memory/2026-04-01.md。不允许：绝对路径或盘符、'..'、反斜杠、空的或 '.' 路径段（如 './' 或 '//'）、路径段首尾的空格、控制字符和不可见格式字符；最长 256 字节。",
		"Relative path ending in .md, e.g. MEMORY.md, PROFILE.md or memory/2026-04-01.md. Not allowed: absolute paths or drive letters, '..', backslashes, empty or '.' path segments (such as './' or '//'), leading or trailing spaces in a path segment, control or invisible formatting characters; at most 256 bytes."))
	return []Definition{
		def(ListFiles, pick(
			"列出你的工作区记忆文件（按注入顺序 sort_order、再按文件名排序），返回文件名、是否注入系统提示词（enabled）、字节数和更新时间。可按文件名前缀过滤，例如 \"memory/\" 只列出每日记忆。",
			"List your workspace memory files (ordered by injection order sort_order, then name) with whether each is injected into the system prompt (enabled), its size in bytes and update time. Filter by a filename prefix, e.g. \"memory/\" for daily notes only."),
			schema(map[string]json.RawMessage{
				"filenamePrefix": prop("string", pick("可选，只列出以此前缀开头的文件，例如 \"memory/\"。", "Optional: only list files whose name starts with this prefix, e.g. \"memory/\".")),
			})),
		def(ReadFile, pick(
			"读取一个工作区记忆文件的完整内容，以及 enabled、fileSize、updateTime 和 version。编辑或覆写之前先读取；覆写时把 version 作为 expectedVersion 传给 write_workspace_memory_file。",
			"Read the full content of one workspace memory file, with enabled, fileSize, updateTime and version. Read a file before you edit or overwrite it; when you overwrite it, pass version as write_workspace_memory_file's expectedVersion."),
			schema(map[string]json.RawMessage{"filename": filename}, "filename")),
		def(WriteFile, pick(
			"创建或完整覆写一个工作区记忆文件（.md）。已有内容会被整体替换：只想修改文件的一部分时，请用 edit_workspace_memory_file，这是安全的方式（在文件当前内容上原子地修改，不会丢失别人同时写入的内容，包括后台记忆整理追加的内容）。覆写已有文件时，先读取，并把读到的 version 作为 expectedVersion 传入：如果文件在此期间被修改，写入会被拒绝（冲突），请重新读取后再改。新建的文件默认不注入系统提示词（enabled=false），排序值 sort_order 为 100（排在核心文件 0–3 之后）。返回 created/overwritten、bytesWritten 和新的 version。",
			"Create a workspace memory file (.md) or overwrite it completely. Existing content is replaced as a whole: to change part of a file, use edit_workspace_memory_file, which is the safe way (it applies your change to the file's current content atomically and loses nothing written meanwhile, the background memory summarizer's appends included). When you overwrite an existing file, read it first and pass the version you read as expectedVersion: if the file changed since, the write is refused with a conflict; read it again and redo your change. New files are not injected into the system prompt (enabled=false) and get sort_order 100 (after the core files, 0-3). Returns created/overwritten, bytesWritten and the new version."),
			schema(map[string]json.RawMessage{
				"filename": filename,
				"content":  prop("string", pick("文件的完整新内容（Markdown）。", "The complete new content of the file (Markdown).")),
				"expectedVersion": prop("integer", pick(
					"强烈建议传入：read_workspace_memory_file 返回的 version。文件在读取之后被修改过时拒绝写入（冲突），避免覆盖别人的修改。0 表示只在文件不存在时创建。省略则无条件覆写。",
					"Strongly recommended: the version read_workspace_memory_file returned. The write is refused (conflict) if the file changed since you read it, so nobody's changes are overwritten. 0 means create only if the file does not exist. Omitted: overwrite unconditionally.")),
			}, "filename", "content")),
		def(EditFile, pick(
			"以精确查找替换的方式编辑工作区记忆文件（增量更新）。oldText 必须与文件中的文本逐字一致（包括空格和换行）；默认只替换唯一的一处，出现多次时请附带上下文使其唯一，或设置 replaceAll=true 替换全部。返回替换次数 replacements 和编辑后的字节数 fileSizeAfter。",
			"Edit a workspace memory file by exact find-and-replace (an incremental update). oldText must match the file's text exactly, whitespace and line breaks included; by default its single occurrence is replaced: if it occurs more than once, include surrounding text to make it unique or set replaceAll=true. Returns the number of replacements and the size after the edit (fileSizeAfter)."),
			schema(map[string]json.RawMessage{
				"filename":   filename,
				"oldText":    prop("string", pick("要替换的原文，非空，须与文件内容完全一致。", "The exact text to replace; not empty.")),
				"newText":    prop("string", pick("替换后的新文本；为空字符串表示删除 oldText。", "The replacement text; an empty string deletes oldText.")),
				"replaceAll": prop("boolean", pick("为 true 时替换所有出现之处，默认 false。", "Replace every occurrence when true; default false.")),
			}, "filename", "oldText", "newText")),
	}
}

// ArgNames lists the arguments a tool accepts (for error messages; nil for an unknown tool).
func ArgNames(tool string) []string {
	switch tool {
	case ListFiles:
		return []string{"filenamePrefix"}
	case ReadFile:
		return []string{"filename"}
	case WriteFile:
		return []string{"filename", "content", "expectedVersion"}
	case EditFile:
		return []string{"filename", "oldText", "newText", "replaceAll"}
	}
	if n := recallArgNames(tool); n != nil {
		return n
	}
	return moreArgNames(tool)
}

func def(name, description string, params json.RawMessage) Definition {
	return Definition{Type: "function", Function: Function{Name: name, Description: description, Parameters: params}}
}

func prop(typ, description string) json.RawMessage {
	return mustJSON(map[string]string{"type": typ, "description": description})
}

func schema(props map[string]json.RawMessage, required ...string) json.RawMessage {
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return mustJSON(s)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // static definitions: cannot fail
	}
	return b
}
