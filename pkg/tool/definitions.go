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
			"读取一个工作区记忆文件的完整内容，以及 enabled、fileSize 和 updateTime。编辑或覆写之前先读取。",
			"Read the full content of one workspace memory file, with enabled, fileSize and updateTime. Read a file before you edit or overwrite it."),
			schema(map[string]json.RawMessage{"filename": filename}, "filename")),
		def(WriteFile, pick(
			"创建或完整覆写一个工作区记忆文件（.md）。已有内容会被整体替换，所以覆写前先读取，局部修改请用 edit_workspace_memory_file。新建的文件默认不注入系统提示词（enabled=false），排序值 sort_order 为 100（排在核心文件 0–3 之后）。返回 created/overwritten 和 bytesWritten。",
			"Create a workspace memory file (.md) or overwrite it completely. Existing content is replaced as a whole, so read first, and prefer edit_workspace_memory_file for partial changes. New files are not injected into the system prompt (enabled=false) and get sort_order 100 (after the core files, 0-3). Returns created/overwritten and bytesWritten."),
			schema(map[string]json.RawMessage{
				"filename": filename,
				"content":  prop("string", pick("文件的完整新内容（Markdown）。", "The complete new content of the file (Markdown).")),
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

// argNames lists the arguments a tool accepts (for error messages).
func argNames(tool string) []string {
	switch tool {
	case ListFiles:
		return []string{"filenamePrefix"}
	case ReadFile:
		return []string{"filename"}
	case WriteFile:
		return []string{"filename", "content"}
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
