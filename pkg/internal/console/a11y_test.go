package console_test

import (
	"context"
	"fmt"
	"github.com/matememory/matememory/pkg/api"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/matememory/matememory/pkg/internal/conversation"
	"github.com/matememory/matememory/pkg/internal/ledger"
	"github.com/matememory/matememory/pkg/internal/npmtest"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

// axeSource installs axe-core (pinned by testdata/axe/package-lock.json) with npm ci into a
// temporary directory and returns its script. Without npm it skips, except under CI=true.
func axeSource(t *testing.T) string {
	t.Helper()
	dir := npmtest.Install(t, filepath.Join("testdata", "axe"), "package.json", "package-lock.json")
	src, err := os.ReadFile(filepath.Join(dir, "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

type violation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// TestConsoleAccessibility runs axe-core's WCAG 2.1 A and AA rules (labels, names, contrast,
// landmarks, language) on the console's pages, in English and Chinese, at desktop and phone
// width, in headless Chromium against the real app.
func TestConsoleAccessibility(t *testing.T) {
	ctxB := browser(t, 1280, 900)
	axe := axeSource(t)
	a := startApp(t)
	base := "http://" + a.Addr
	ctx := context.Background()
	if _, _, err := a.Workspace.Write(ctx, 1, "MEMORY.md", "# Memory\n\n- prefers tea\n", workspace.AnyVersion, workspace.Change{Actor: "tool"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Workspace.Write(ctx, 1, "MEMORY.md", "# Memory\n\n- prefers green tea\n", workspace.AnyVersion, workspace.Change{Actor: "tool"}); err != nil {
		t.Fatal(err)
	}
	// A conversation waiting for extraction (registered, as a deferred event leaves it), so
	// that the agent page's pending section shows its table and its button.
	if _, err := a.Messages.Add(ctx, conversation.Message{AgentID: 1, ConversationID: "c-wait", Role: "user", Content: "hello"}); err != nil {
		t.Fatal(err)
	}
	if err := a.DB.Exec("INSERT INTO mate_extraction_watermark (agent_id, conversation_id, last_message_id, update_time) VALUES (1, 'c-wait', 0, ?)", time.Now().UTC()).Error; err != nil {
		t.Fatal(err)
	}
	runs := ledger.New(a.DB, nil)
	for i, st := range []string{"completed", "skipped", "deferred", "failed", "refused"} {
		if _, err := runs.Record(ctx, ledger.Run{Kind: ledger.KindSummarize, AgentID: 1, Status: api.RunStatus(st), Reason: "reason " + st,
			EventID: fmt.Sprint("evt-", i), FilesChanged: []string{"MEMORY.md"}, LatencyMs: int64(100 * (i + 1))}); err != nil {
			t.Fatal(err)
		}
	}
	pages := []string{"/console/agents/1", "/console/", "/console/agents/1/file?name=MEMORY.md",
		"/console/agents/1/file/history?name=MEMORY.md", "/console/agents/1/file/blame?name=MEMORY.md", "/console/agents/1/file/rollback?name=MEMORY.md&to=1",
		"/console/agents/1/runs", "/console/runs", "/console/agents/1/prompt", "/console/agents/1/search?q=tea",
		"/console/cron", "/console/ops"}
	check := func(ctxB context.Context, label, path string) {
		t.Helper()
		run(t, ctxB, "open "+path, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.ID("main")))
		if path == "/console/agents/1" {
			run(t, ctxB, "the pending section", chromedp.WaitVisible(chromedp.ID("pending-convs")))
		}
		run(t, ctxB, "inject axe", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[any](axe)(ctx, tg)
			return err
		}))
		vs, err := chromedp.Run(ctxB, chromedp.Evaluate[[]violation](`axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}})
			.then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(" "))})))`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("axe on %s: %v", path, err)
		}
		n, err := chromedp.Run(ctxB, chromedp.Evaluate[int](`axe.run(document, {runOnly: {type: "tag", values: ["wcag2a", "wcag2aa"]}}).then(r => r.passes.length)`, chromedp.EvalAwaitPromise))
		if err != nil || n < 5 {
			t.Fatalf("axe checked almost nothing on %s (%d rules passed): %v", path, n, err)
		}
		for _, v := range vs {
			t.Errorf("%s %s: %s (%s) %s: %s", label, path, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, " | "))
		}
	}
	signIn(t, ctxB, base, adminKey)
	for _, p := range pages {
		check(ctxB, "en", p)
	}
	run(t, ctxB, "switch to zh", chromedp.Navigate(base+"/console/"), chromedp.Click(chromedp.ID("lang-switch")),
		chromedp.WaitVisible(chromedp.Search(`//h1[contains(., "智能体")]`)))
	for _, p := range pages[:3] {
		check(ctxB, "zh", p)
	}
	phone := browser(t, 390, 844)
	run(t, phone, "phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(1)))
	signIn(t, phone, base, adminKey)
	for _, p := range pages[:3] {
		check(phone, "phone", p)
	}
	// The check finds what it should: an input without a label.
	run(t, ctxB, "a page with a defect", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.ID("main")),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[any](axe+`;document.getElementById("main").appendChild(document.createElement("input"))`)(ctx, tg)
			return err
		}))
	if vs, err := chromedp.Run(ctxB, chromedp.Evaluate[[]violation](`axe.run(document, {runOnly: {type: "tag", values: ["wcag2a"]}}).then(r => r.violations.map(v => ({id: v.id})))`, chromedp.EvalAwaitPromise)); err != nil || len(vs) == 0 {
		t.Fatalf("axe did not report an unlabelled input: %v %v", vs, err)
	}
	// The sign-in page, signed out.
	run(t, ctxB, "sign out", clearCookies)
	check(ctxB, "en", "/console/signin")
}
