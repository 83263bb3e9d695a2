package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/matememory/matememory/pkg/internal/httpapi"
	"github.com/matememory/matememory/pkg/internal/store/storetest"
	"github.com/matememory/matememory/pkg/internal/tool"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// call runs a tool and returns its result as a JSON object, as a model would see it.
func call(t *testing.T, tools *tool.Tools, ctx context.Context, agent int64, name, args string) (map[string]any, error) {
	t.Helper()
	res, err := tools.Call(ctx, agent, name, json.RawMessage(args))
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m, nil
}

func keys(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

func TestRoundTrip(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ws := workspace.New(db.DB, workspace.WithDefaults("zh", "UTC"))
		tools := tool.New(ws)
		ctx := tool.WithRef(context.Background(), "call_abc")
		const a = 1

		w, err := call(t, tools, ctx, a, tool.WriteFile, `{"filename":"memory/2026-04-01.md","content":"# 2026-04-01\n\n- 喜欢 Go"}`)
		if err != nil {
			t.Fatal(err)
		}
		if got := keys(w); got != "agentId,bytesWritten,created,enabled,filename,message,overwritten,version" {
			t.Fatalf("write fields %s", got)
		}
		if w["agentId"] != 1.0 || w["created"] != true || w["overwritten"] != false || w["enabled"] != false ||
			w["bytesWritten"] != float64(len("# 2026-04-01\n\n- 喜欢 Go")) || w["message"] != "工作区记忆文件已创建" {
			t.Fatalf("write result %v", w)
		}
		w, err = call(t, tools, ctx, a, tool.WriteFile, `{"filename":"memory/2026-04-01.md","content":"# 2026-04-01\n\n- 喜欢 Go\n- 住在杭州"}`)
		if err != nil || w["created"] != false || w["overwritten"] != true || w["message"] != "工作区记忆文件已覆写" {
			t.Fatalf("overwrite: %v %v", w, err)
		}

		r, err := call(t, tools, ctx, a, tool.ReadFile, `{"filename":"memory/2026-04-01.md"}`)
		if err != nil {
			t.Fatal(err)
		}
		if got := keys(r); got != "agentId,content,enabled,fileSize,filename,updateTime,version" {
			t.Fatalf("read fields %s", got)
		}
		if r["content"] != "# 2026-04-01\n\n- 喜欢 Go\n- 住在杭州" || r["fileSize"] != float64(len("# 2026-04-01\n\n- 喜欢 Go\n- 住在杭州")) || r["enabled"] != false {
			t.Fatalf("read result %v", r)
		}

		e, err := call(t, tools, ctx, a, tool.EditFile, `{"filename":"memory/2026-04-01.md","oldText":"杭州","newText":"上海"}`)
		if err != nil {
			t.Fatal(err)
		}
		if got := keys(e); got != "agentId,fileSizeAfter,filename,message,replaceAll,replacements,version" {
			t.Fatalf("edit fields %s", got)
		}
		if e["replacements"] != 1.0 || e["replaceAll"] != false || e["message"] != "工作区记忆文件编辑成功" ||
			e["fileSizeAfter"] != float64(len("# 2026-04-01\n\n- 喜欢 Go\n- 住在上海")) {
			t.Fatalf("edit result %v", e)
		}
		e, err = call(t, tools, ctx, a, tool.EditFile, `{"filename":"memory/2026-04-01.md","oldText":"- ","newText":"* ","replaceAll":true}`)
		if err != nil || e["replacements"] != 2.0 || e["replaceAll"] != true {
			t.Fatalf("replaceAll edit: %v %v", e, err)
		}

		l, err := call(t, tools, ctx, a, tool.ListFiles, `{"filenamePrefix":"memory/"}`)
		if err != nil {
			t.Fatal(err)
		}
		if got := keys(l); got != "agentId,count,files" {
			t.Fatalf("list fields %s", got)
		}
		files := l["files"].([]any)
		if l["count"] != 1.0 || len(files) != 1 {
			t.Fatalf("list %v", l)
		}
		f0 := files[0].(map[string]any)
		if keys(f0) != "enabled,fileSize,filename,updateTime" || f0["filename"] != "memory/2026-04-01.md" {
			t.Fatalf("list entry %v", f0)
		}
		all, err := call(t, tools, ctx, a, tool.ListFiles, ``)
		if err != nil || all["count"] != 5.0 {
			t.Fatalf("list without arguments: %v %v", all, err)
		}
		var order []string
		for _, f := range all["files"].([]any) {
			order = append(order, f.(map[string]any)["filename"].(string))
		}
		if strings.Join(order, ",") != "AGENTS.md,SOUL.md,PROFILE.md,MEMORY.md,memory/2026-04-01.md" {
			t.Fatalf("list order %v", order)
		}

		h, err := ws.History(ctx, a, "memory/2026-04-01.md")
		if err != nil || len(h) != 3 || h[0].Actor != "tool" || h[0].Ref != "call_abc" || h[0].Action != "edit" {
			t.Fatalf("history %+v %v", h, err)
		}
	})
}

func TestEnglishMessages(t *testing.T) {
	ws := workspace.New(storetest.SQLite(t).DB, workspace.WithDefaults("en", "UTC"))
	tools := tool.New(ws)
	ctx := context.Background()
	w, err := call(t, tools, ctx, 2, tool.WriteFile, `{"filename":"a.md","content":"x"}`)
	if err != nil || w["message"] != "Workspace memory file created" {
		t.Fatalf("%v %v", w, err)
	}
	e, err := call(t, tools, ctx, 2, tool.EditFile, `{"filename":"a.md","oldText":"x","newText":"y"}`)
	if err != nil || e["message"] != "Workspace memory file edited" {
		t.Fatalf("%v %v", e, err)
	}
	if tools.DefaultLanguage() != "en" {
		t.Fatalf("default language %q", tools.DefaultLanguage())
	}
}

func TestErrors(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		tools := tool.New(workspace.New(db.DB))
		ctx := context.Background()
		if _, err := call(t, tools, ctx, 3, tool.WriteFile, `{"filename":"MEMORY.md","content":"alpha beta beta"}`); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			tool, args string
			status     int
			msg        string
		}{
			{"delete_everything", `{}`, 404, "unknown tool"},
			{tool.ReadFile, `{"agentId":2,"filename":"MEMORY.md"}`, 400, "agentId is not an argument"},
			{tool.ListFiles, `{"agent_id":2}`, 400, "agentId is not an argument"},
			{tool.ReadFile, `{"filename":"MEMORY.md","mode":"raw"}`, 400, `unknown field "mode"`},
			{tool.ReadFile, `{}`, 400, "filename is required"},
			{tool.ReadFile, `{"filename":42}`, 400, "filename must be a string"},
			{tool.ReadFile, `[1,2]`, 400, "must be a JSON object"},
			{tool.ReadFile, `{"filename":"a.md"} {}`, 400, "must be a JSON object"},
			{tool.WriteFile, `{"filename":"a.md"}`, 400, "content is required"},
			{tool.EditFile, `{"filename":"MEMORY.md","oldText":"x"}`, 400, "newText is required"},
			{tool.EditFile, `{"filename":"MEMORY.md","oldText":"x","newText":"y","replaceAll":"yes"}`, 400, "replaceAll must be a boolean"},
			{tool.ReadFile, `{"filename":"missing.md"}`, 404, "not found"},
			{tool.EditFile, `{"filename":"missing.md","oldText":"a","newText":"b"}`, 404, "not found"},
			{tool.EditFile, `{"filename":"MEMORY.md","oldText":"gamma","newText":"b"}`, 400, "oldText not found"},
			{tool.EditFile, `{"filename":"MEMORY.md","oldText":"","newText":"b"}`, 400, "oldText is empty"},
			{tool.EditFile, `{"filename":"MEMORY.md","oldText":"beta","newText":"beta"}`, 400, "the same"},
			{tool.EditFile, `{"filename":"MEMORY.md","oldText":"beta","newText":"b"}`, 400, "occurs 2 times"},
			{tool.WriteFile, `{"filename":"../x.md","content":"x"}`, 400, "'..'"},
			{tool.WriteFile, `{"filename":"/etc/a.md","content":"x"}`, 400, "absolute path"},
			{tool.WriteFile, `{"filename":"a.txt","content":"x"}`, 400, "must end in .md"},
			{tool.WriteFile, `{"filename":"memory/../../x.md","content":"x"}`, 400, "'..'"},
			{tool.WriteFile, `{"filename":"a\\b.md","content":"x"}`, 400, "backslash"},
			{tool.WriteFile, `{"filename":"a\u0000.md","content":"x"}`, 400, "control"},
			{tool.WriteFile, `{"filename":"` + strings.Repeat("a", 260) + `.md","content":"x"}`, 400, "at most 256"},
		}
		for _, c := range cases {
			_, err := tools.Call(ctx, 3, c.tool, json.RawMessage(c.args))
			if err == nil {
				t.Errorf("%s %s: no error", c.tool, c.args)
				continue
			}
			status, msg := httpapi.Classify(err)
			if status != c.status || !strings.Contains(msg, c.msg) {
				t.Errorf("%s %s: %d %q, want %d containing %q", c.tool, c.args, status, msg, c.status, c.msg)
			}
		}
		if _, err := tools.Call(ctx, 3, "nope", nil); !errors.Is(err, tool.ErrUnknownTool) {
			t.Errorf("unknown tool: %v, want ErrUnknownTool", err)
		}
		// Nothing the refused calls did reached the store.
		l, err := call(t, tools, ctx, 3, tool.ListFiles, `{}`)
		if err != nil || l["count"] != 4.0 {
			t.Fatalf("after refusals: %v %v", l, err)
		}
		r, _ := call(t, tools, ctx, 3, tool.ReadFile, `{"filename":"MEMORY.md"}`)
		if r["content"] != "alpha beta beta" {
			t.Fatalf("MEMORY.md changed by a refused edit: %q", r["content"])
		}
	})
}

func TestContentLimit(t *testing.T) {
	tools := tool.New(workspace.New(storetest.SQLite(t).DB, workspace.WithMaxBytes(100)))
	_, err := tools.Call(context.Background(), 1, tool.WriteFile, json.RawMessage(`{"filename":"a.md","content":"`+strings.Repeat("x", 101)+`"}`))
	if st, msg := httpapi.Classify(err); st != http.StatusBadRequest || !strings.Contains(msg, "at most 100") {
		t.Fatalf("oversized content: %d %q", st, msg)
	}
}

func TestDefinitions(t *testing.T) {
	for _, lang := range []string{"zh", "en"} {
		defs := tool.Definitions(lang)
		raw, err := json.Marshal(defs)
		if err != nil {
			t.Fatal(err)
		}
		if s := strings.ToLower(string(raw)); strings.Contains(s, "agentid") || strings.Contains(s, "agent_id") {
			t.Fatalf("%s definitions mention an agent id: %s", lang, raw)
		}
		if len(defs) != 4 {
			t.Fatalf("%d definitions", len(defs))
		}
		wantRequired := map[string]string{
			tool.ListFiles: "", tool.ReadFile: "filename", tool.WriteFile: "filename,content",
			tool.EditFile: "filename,oldText,newText",
		}
		for i, d := range defs {
			if d.Type != "function" || d.Function.Name != tool.Names[i] || d.Function.Description == "" {
				t.Fatalf("definition %d: %+v", i, d)
			}
			var schema struct {
				Type                 string                    `json:"type"`
				Properties           map[string]map[string]any `json:"properties"`
				Required             []string                  `json:"required"`
				AdditionalProperties *bool                     `json:"additionalProperties"`
			}
			if err := json.Unmarshal(d.Function.Parameters, &schema); err != nil {
				t.Fatalf("%s parameters: %v", d.Function.Name, err)
			}
			if schema.Type != "object" || schema.AdditionalProperties == nil || *schema.AdditionalProperties {
				t.Fatalf("%s: parameters must be a closed object schema: %s", d.Function.Name, d.Function.Parameters)
			}
			if got := strings.Join(schema.Required, ","); got != wantRequired[d.Function.Name] {
				t.Errorf("%s required %q, want %q", d.Function.Name, got, wantRequired[d.Function.Name])
			}
			for _, r := range schema.Required {
				if schema.Properties[r] == nil {
					t.Errorf("%s requires undeclared %s", d.Function.Name, r)
				}
			}
			for p, ps := range schema.Properties {
				if ps["type"] == "" || ps["description"] == "" {
					t.Errorf("%s.%s lacks a type or description", d.Function.Name, p)
				}
			}
		}
	}
	if tool.Definitions("zh")[0].Function.Description == tool.Definitions("en")[0].Function.Description {
		t.Error("zh and en descriptions are the same")
	}
}

// TestDefinitionsStateTheRules: every rule the name check enforces, and the sort order of
// new files, is in what the model reads, in both languages.
func TestDefinitionsStateTheRules(t *testing.T) {
	rules := []struct{ bad, zh, en string }{
		{"/abs.md", "绝对路径", "absolute paths"},
		{"C:x.md", "盘符", "drive letters"},
		{"a/../b.md", "'..'", "'..'"},
		{`a\b.md`, "反斜杠", "backslashes"},
		{"./a.md", "'./'", "'./'"},
		{"a//b.md", "'//'", "'//'"},
		{" a.md", "首尾的空格", "leading or trailing spaces"},
		{"a\u200b.md", "不可见格式字符", "invisible formatting characters"},
		{"a.txt", ".md", ".md"},
	}
	for _, lang := range []string{"zh", "en"} {
		defs := tool.Definitions(lang)
		var params struct {
			Properties map[string]struct{ Description string } `json:"properties"`
		}
		if err := json.Unmarshal(defs[2].Function.Parameters, &params); err != nil {
			t.Fatal(err)
		}
		desc := params.Properties["filename"].Description
		for _, r := range rules {
			if workspace.ValidateName(r.bad) == nil {
				t.Fatalf("%q is accepted: the table is out of date", r.bad)
			}
			want := r.en
			if lang == "zh" {
				want = r.zh
			}
			if !strings.Contains(desc, want) {
				t.Errorf("%s filename description does not state the rule refusing %q (%q):\n%s", lang, r.bad, want, desc)
			}
		}
		if !strings.Contains(defs[2].Function.Description, "sort_order") || !strings.Contains(defs[2].Function.Description, "100") {
			t.Errorf("%s write description does not give new files' sort_order 100: %s", lang, defs[2].Function.Description)
		}
	}
}

// Issue 9 point 20: a model that reads then writes with expectedVersion cannot overwrite a
// change made in between (the summarizer's append, say); the definitions tell it so.
func TestWriteWithExpectedVersion(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db storetest.DB) {
		ws := workspace.New(db.DB, workspace.WithDefaults("en", "UTC"))
		tools := tool.New(ws)
		ctx := context.Background()
		if _, err := call(t, tools, ctx, 4, tool.WriteFile, `{"filename":"notes.md","content":"- a\n","expectedVersion":0}`); err != nil {
			t.Fatalf("create with expectedVersion 0: %v", err)
		}
		r, err := call(t, tools, ctx, 4, tool.ReadFile, `{"filename":"notes.md"}`)
		if err != nil {
			t.Fatal(err)
		}
		read := int64(r["version"].(float64))
		// Someone else appends meanwhile.
		if _, err := ws.Append(ctx, 4, "notes.md", "- from the summarizer\n", "", workspace.Change{Actor: "summarizer"}); err != nil {
			t.Fatal(err)
		}
		_, err = call(t, tools, ctx, 4, tool.WriteFile, fmt.Sprintf(`{"filename":"notes.md","content":"- a\n- b\n","expectedVersion":%d}`, read))
		if !errors.Is(err, workspace.ErrConflict) || !strings.Contains(err.Error(), "re-read") {
			t.Fatalf("stale expectedVersion: %v, want a conflict", err)
		}
		f, _ := ws.Get(ctx, 4, "notes.md")
		if !strings.Contains(f.Content, "from the summarizer") {
			t.Fatalf("the concurrent append was lost:\n%s", f.Content)
		}
		w, err := call(t, tools, ctx, 4, tool.WriteFile, fmt.Sprintf(`{"filename":"notes.md","content":"%s- b\\n","expectedVersion":%d}`,
			strings.ReplaceAll(f.Content, "\n", `\n`), f.Version))
		if err != nil || int64(w["version"].(float64)) != f.Version+1 {
			t.Fatalf("current expectedVersion: %v %v", w, err)
		}
		if _, err := call(t, tools, ctx, 4, tool.WriteFile, `{"filename":"notes.md","content":"x","expectedVersion":0}`); !errors.Is(err, workspace.ErrConflict) {
			t.Fatalf("create-only on an existing file: %v", err)
		}
		if _, err := call(t, tools, ctx, 4, tool.WriteFile, `{"filename":"notes.md","content":"x","expectedVersion":-1}`); err == nil ||
			!strings.Contains(err.Error(), "expectedVersion") {
			t.Fatalf("negative expectedVersion: %v", err)
		}
	})
	for _, lang := range []string{"en", "zh"} {
		for _, d := range tool.Definitions(lang) {
			if d.Function.Name != tool.WriteFile {
				continue
			}
			if !strings.Contains(string(d.Function.Parameters), `"expectedVersion"`) || !strings.Contains(d.Function.Description, tool.EditFile) {
				t.Fatalf("%s definition of %s: %s / %s", lang, d.Function.Name, d.Function.Description, d.Function.Parameters)
			}
		}
	}
}

// TestArgNamesMatchTheSchemas: the names an unknown argument's error lists are exactly the
// properties of the tool's input schema, for every tool in both languages.
func TestArgNamesMatchTheSchemas(t *testing.T) {
	for _, lang := range []string{"zh", "en"} {
		defs := append(append(tool.Definitions(lang), tool.RecallDefinitions(lang)...), tool.MoreDefinitions(lang)...)
		for _, d := range defs {
			var schema struct {
				Properties map[string]json.RawMessage `json:"properties"`
			}
			if err := json.Unmarshal(d.Function.Parameters, &schema); err != nil {
				t.Fatal(err)
			}
			got := tool.ArgNames(d.Function.Name)
			want := slices.Sorted(maps.Keys(schema.Properties))
			if !slices.Equal(slices.Sorted(slices.Values(got)), want) {
				t.Errorf("%s (%s): ArgNames %v, schema properties %v", d.Function.Name, lang, got, want)
			}
		}
	}
}
