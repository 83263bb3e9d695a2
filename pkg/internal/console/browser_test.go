package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/matememory/matememory/pkg/internal/app"
	"github.com/matememory/matememory/pkg/internal/apptest"
	"github.com/matememory/matememory/pkg/internal/bus"
	"github.com/matememory/matememory/pkg/internal/config"
	"github.com/matememory/matememory/pkg/internal/cronjob"
	"github.com/matememory/matememory/pkg/internal/llm/llmtest"
	"github.com/matememory/matememory/pkg/internal/poll"
	"github.com/matememory/matememory/pkg/internal/workspace"
)

const (
	adminKey  = "console-admin-key-0123456789"
	agent1Key = "console-agent1-key-0123456789"
	agent2Key = "console-agent2-key-0123456789"
)

// chromium finds Debian's Chromium: skipped without it, except under CI=true.
func chromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("drives a browser")
	}
	for _, p := range []string{os.Getenv("MATE_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is required under CI (apt-get install -y chromium)")
	}
	t.Skip("chromium not installed")
	return ""
}

func startApp(t *testing.T) *app.App {
	t.Helper()
	fake := llmtest.New(t, func(r llmtest.Received) llmtest.Reply {
		b, _ := json.Marshal(map[string]any{"should_update": true, "reason": "the user likes noodles",
			"daily_entry": "- likes noodles with vegetables", "memory_update": "", "profile_update": ""})
		return llmtest.Reply{Content: string(b), TokensIn: 120, TokensOut: 30}
	})
	return apptest.Start(t, adminKey+"=admin,*;"+agent1Key+"=1;"+agent2Key+"=2", func(cfg *config.Config) {
		cfg.Mate.Language = "en"
		cfg.Mate.LLM.BaseURL, cfg.Mate.LLM.APIKey, cfg.Mate.LLM.Model = fake.URL+"/v1/", "test-key", "fake-model"
	})
}

func browser(t *testing.T, width, height int) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(width, height))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// run runs actions with a deadline, failing the test with what it was doing.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, steps...); err != nil {
		// The page may have no <main> (a plain error answer): the diagnostics get their own
		// deadline rather than waiting for one forever.
		dctx, dcancel := context.WithTimeout(ctx, 5*time.Second)
		defer dcancel()
		loc, _ := chromedp.Run(dctx, chromedp.Location())
		body, _ := chromedp.Run(dctx, chromedp.Text(chromedp.CSS("body")))
		t.Fatalf("%s: %v (at %s: %.600s)", what, err, loc, body)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

var clearCookies = chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
	_, err := cdp.Call(ctx, t, network.ClearBrowserCookies, cdp.Empty{})
	return err
})

// shot saves a screenshot of the page when MATE_CONSOLE_SCREENSHOTS names a directory
// (make screenshots).
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("MATE_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	capture := chromedp.FullScreenshot(100)
	if strings.HasPrefix(name, "prompt") {
		capture = chromedp.CaptureScreenshot() // the page goes on with the whole system prompt
	}
	png, err := chromedp.Run(ctx, capture)
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func signIn(t *testing.T, ctx context.Context, base, key string) {
	run(t, ctx, "sign in",
		clearCookies,
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(chromedp.ID("key")),
		chromedp.SendKeys(chromedp.ID("key"), key),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.CSS("nav")))
}

// TestConsoleInBrowser drives the console in headless Chromium against the real app
// (embedded NATS, SQLite, a fake OpenAI-compatible model): sign in, edit a file, meet a
// conflict, roll back, see a run appear after an event, retry a dead letter, create a cron
// job, and another agent's key kept out of the first agent's pages.
func TestConsoleInBrowser(t *testing.T) {
	ctxB := browser(t, 1280, 900)
	a := startApp(t)
	base := "http://" + a.Addr
	ctx := context.Background()
	ws := a.Workspace
	for _, id := range []int64{1, 2} {
		if _, err := ws.EnsureAgent(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := ws.Write(ctx, 1, "MEMORY.md", "# Memory\n\n- prefers tea\n- lives in Hangzhou\n", workspace.AnyVersion, workspace.Change{Actor: "tool", Ref: "seed-test"}); err != nil {
		t.Fatal(err)
	}

	// Signing in with a wrong key fails and says so.
	run(t, ctxB, "wrong key", chromedp.Navigate(base+"/console/signin"), chromedp.SendKeys(chromedp.ID("key"), "not-a-key-at-all-000"),
		chromedp.Click(chromedp.ID("signin")), chromedp.WaitVisible(chromedp.ID("signin-error")))
	shot(t, ctxB, "signin")

	signIn(t, ctxB, base, adminKey)
	run(t, ctxB, "agents list", chromedp.WaitVisible(chromedp.CSS(`#agents a[href="/console/agents/1"]`)))

	// Edit MEMORY.md with compare-and-swap.
	cur, _ := ws.Get(ctx, 1, "MEMORY.md")
	fileURL := base + "/console/agents/1/file?name=MEMORY.md"
	run(t, ctxB, "edit", chromedp.Navigate(fileURL), chromedp.WaitVisible(chromedp.ID("content")),
		chromedp.SetValue(chromedp.ID("content"), "# Memory\n\n- prefers green tea\n- lives in Hangzhou\n"),
		chromedp.Click(chromedp.ID("save")), chromedp.WaitVisible(chromedp.CSS(".flash")))
	if f, _ := ws.Get(ctx, 1, "MEMORY.md"); f.Version != cur.Version+1 || !strings.Contains(f.Content, "green tea") {
		t.Fatalf("after the edit: version %d (want %d), content %q", f.Version, cur.Version+1, f.Content)
	}
	if s := text(t, ctxB, "#rendered"); !strings.Contains(s, "prefers green tea") {
		t.Fatalf("rendered Markdown: %q", s)
	}
	shot(t, ctxB, "file")

	// A conflict: the agent's tool writes while the page is open.
	run(t, ctxB, "open for conflict", chromedp.Navigate(fileURL), chromedp.WaitVisible(chromedp.ID("content")))
	if _, _, err := ws.Write(ctx, 1, "MEMORY.md", "# Memory\n\n- prefers green tea\n- lives in Hangzhou\n- has a cat named Mochi\n", workspace.AnyVersion, workspace.Change{Actor: "tool", Ref: "conv-9"}); err != nil {
		t.Fatal(err)
	}
	run(t, ctxB, "conflict", chromedp.SetValue(chromedp.ID("content"), "# Memory\n\n- prefers oolong\n- lives in Hangzhou\n"),
		chromedp.Click(chromedp.ID("save")), chromedp.WaitVisible(chromedp.ID("conflict")))
	if s := text(t, ctxB, "main"); !strings.Contains(s, "Mochi") || !strings.Contains(s, "oolong") {
		t.Fatalf("the conflict page does not show both versions: %.800s", s)
	}
	if f, _ := ws.Get(ctx, 1, "MEMORY.md"); strings.Contains(f.Content, "oolong") {
		t.Fatal("a stale edit was written over the newer version")
	}
	shot(t, ctxB, "conflict")
	run(t, ctxB, "save over", chromedp.Click(chromedp.ID("save-over")), chromedp.WaitVisible(chromedp.CSS(".flash")))
	f, _ := ws.Get(ctx, 1, "MEMORY.md")
	if !strings.Contains(f.Content, "oolong") {
		t.Fatalf("saving over the new version: %q", f.Content)
	}

	// History with a diff, then a rollback to the tool's version, confirmed.
	toolVersion := f.Version - 1
	run(t, ctxB, "history", chromedp.Navigate(base+"/console/agents/1/file/history?name=MEMORY.md"),
		chromedp.WaitVisible(chromedp.CSS("table.diff")))
	if s := text(t, ctxB, "#versions"); !strings.Contains(s, "tool") || !strings.Contains(s, "conv-9") {
		t.Fatalf("history does not say who changed it: %q", s)
	}
	shot(t, ctxB, "history")

	// Blame from the file page: the line the tool's first write added says so, with its
	// version, the tool and the write's ref.
	run(t, ctxB, "blame", chromedp.Navigate(fileURL), chromedp.WaitVisible(chromedp.ID("blame-link")),
		chromedp.Click(chromedp.ID("blame-link")), chromedp.WaitVisible(chromedp.ID("blame")))
	if s := text(t, ctxB, "#line-4"); !strings.Contains(s, "lives in Hangzhou") || !strings.Contains(s, "v2") ||
		!strings.Contains(s, "tool") || !strings.Contains(s, "seed-test") {
		t.Fatalf("blame of line 4 does not say where it came from: %q", s)
	}
	if s := text(t, ctxB, "#line-3"); !strings.Contains(s, "prefers oolong") || !strings.Contains(s, fmt.Sprintf("v%d", f.Version)) {
		t.Fatalf("blame of the line saved over the conflict: %q", s)
	}
	shot(t, ctxB, "blame")
	run(t, ctxB, "back to history", chromedp.Navigate(base+"/console/agents/1/file/history?name=MEMORY.md"),
		chromedp.WaitVisible(chromedp.CSS("table.diff")))
	run(t, ctxB, "rollback", chromedp.Click(chromedp.ID(fmt.Sprintf("rollback-%d", toolVersion))),
		chromedp.WaitVisible(chromedp.ID("confirm-rollback")))
	if f2, _ := ws.Get(ctx, 1, "MEMORY.md"); f2.Version != f.Version {
		t.Fatal("the rollback happened before it was confirmed")
	}
	run(t, ctxB, "confirm rollback", chromedp.Click(chromedp.ID("confirm-rollback")), chromedp.WaitVisible(chromedp.CSS(".flash")))
	if f2, _ := ws.Get(ctx, 1, "MEMORY.md"); !strings.Contains(f2.Content, "Mochi") || f2.Version != f.Version+1 {
		t.Fatalf("after the rollback: v%d %q", f2.Version, f2.Content)
	}

	// A run appears after an event is published (through the REST API, with agent 1's key).
	post := func(key, path, body string) int {
		req, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// leaseReleased waits until no worker holds agent 1's lease (its pending view, through
	// the REST API).
	leaseReleased := func(t *testing.T, when string) {
		t.Helper()
		poll.UntilReason(t, 30*time.Second, "agent 1's lease released "+when, func() (bool, string) {
			req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/agents/1/pending", nil)
			req.Header.Set("Authorization", "Bearer "+agent1Key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var p struct {
				Data struct {
					State string `json:"state"`
				} `json:"data"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("agent 1's pending view: %d %v", resp.StatusCode, err)
			}
			return p.Data.State != "leased", p.Data.State
		})
	}
	run(t, ctxB, "runs page", chromedp.Navigate(base+"/console/agents/1/runs"), chromedp.WaitVisible(chromedp.ID("runs-table")))
	if st := post(agent1Key, "/api/v1/conversations/c1/messages", `{"agentId":1,"messages":[
		{"role":"user","content":"I love noodles, with vegetables please."},{"role":"assistant","content":"Noted: noodles with vegetables."},
		{"role":"user","content":"and remember that for next week."},{"role":"assistant","content":"I will remember."}]}`); st/100 != 2 {
		t.Fatalf("store messages: %d", st)
	}
	if st := post(agent1Key, "/api/v1/events/conversation-completed", `{"eventId":"evt-console-1","agentId":1,"conversationId":"c1","userMessage":"and remember that for next week.","assistantReply":"I will remember.","messageCount":4,"triggerSource":"web"}`); st != 202 {
		t.Fatalf("publish event: %d", st)
	}
	run(t, ctxB, "run appears", chromedp.WaitVisible(chromedp.Search(`//tr[contains(@class,"run")]//span[contains(@class,"s-completed")]`)))
	// The manual buttons show the outcome when it arrives: c1 was extracted already.
	run(t, ctxB, "manual summarize", chromedp.SetValue(chromedp.ID("conv"), "c1"), chromedp.Click(chromedp.ID("summarize")),
		chromedp.WaitVisible(chromedp.ID("outcome-text")))
	if s := text(t, ctxB, "#outcome-text"); !strings.Contains(s, "skipped") || !strings.Contains(s, "already extracted") {
		t.Fatalf("manual summarize outcome: %q", s)
	}
	run(t, ctxB, "manual emergence", chromedp.Click(chromedp.ID("emergence")), chromedp.WaitVisible(chromedp.CSS("#outcome-text .badge")))
	shot(t, ctxB, "runs")
	run(t, ctxB, "all runs, filtered", chromedp.Navigate(base+"/console/runs?agent=1&status=completed"),
		chromedp.WaitVisible(chromedp.Search(`//tr[contains(@class,"run")]//a[@href="/console/agents/1"]`)))
	run(t, ctxB, "agents with a run", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.CSS("#agents .badge")))
	shot(t, ctxB, "agents")

	// Why a conversation is not extracted yet: the first run started agent 1's cooldown
	// (5 minutes), so an event for c2 waits for its end, with no run in the ledger. The agent
	// page shows it waiting (the section refreshes itself), and nothing once c2 is extracted.
	if st := post(agent1Key, "/api/v1/conversations/c2/messages", `{"agentId":1,"messages":[
		{"role":"user","content":"My sister is visiting in May."},{"role":"assistant","content":"Noted: your sister visits in May."},
		{"role":"user","content":"Remind me to book a table."},{"role":"assistant","content":"I will remind you."}]}`); st/100 != 2 {
		t.Fatalf("store messages: %d", st)
	}
	run(t, ctxB, "agent page, nothing waits", chromedp.Navigate(base+"/console/agents/1"), chromedp.WaitVisible(chromedp.ID("pending-noconvs")))
	// The manual runs above answered when their runs ended; each worker releases the agent's
	// lease just after. c2's event is to meet the cooldown, not a held lease (which defers it
	// instead of making it the cooldown's waiter): wait for the release.
	leaseReleased(t, "before c2's event")
	if st := post(agent1Key, "/api/v1/events/conversation-completed", `{"eventId":"evt-console-2","agentId":1,"conversationId":"c2","userMessage":"Remind me to book a table.","assistantReply":"I will remind you.","messageCount":4,"triggerSource":"web"}`); st != 202 {
		t.Fatalf("publish event: %d", st)
	}
	run(t, ctxB, "the event waits", chromedp.WaitVisible(chromedp.Search(`//dd[@id="pending-waiter"][contains(., "evt-console-2")]`)))
	if s := text(t, ctxB, "#pending-state"); s != "cooldown" {
		t.Fatalf("pending state %q, want cooldown", s)
	}
	if s := text(t, ctxB, "#pending-cooldown"); !strings.Contains(s, "until") || !strings.Contains(s, "UTC") {
		t.Fatalf("the cooldown's end: %q", s)
	}
	if s := text(t, ctxB, "#pending-convs tbody"); !strings.Contains(s, "c2") || strings.Contains(s, "c1") {
		t.Fatalf("waiting conversations: %q, want c2 only", s)
	}
	shot(t, ctxB, "agent-pending")
	run(t, ctxB, "extract c2 now", chromedp.Click(chromedp.Search(`//tr[contains(@class,"pending-conv")][th[.="c2"]]//button`)),
		chromedp.WaitVisible(chromedp.CSS(".flash")))
	if s := text(t, ctxB, ".flash"); !strings.Contains(s, "completed") {
		t.Fatalf("extract now: %q", s)
	}
	// "completed" arrives before the worker releases the lease: wait for the release, the
	// state the page is to show.
	leaseReleased(t, "after c2's extraction")
	run(t, ctxB, "agent page, c2 extracted", chromedp.Navigate(base+"/console/agents/1"), chromedp.WaitVisible(chromedp.ID("pending-noconvs")))
	if s := text(t, ctxB, "#pending-state"); s != "idle" {
		t.Fatalf("pending state after the extraction %q, want idle", s)
	}

	// What the model sees: the context window of conversation c1, with its token budget.
	run(t, ctxB, "context preview", chromedp.Navigate(base+"/console/agents/1/prompt"), chromedp.WaitVisible(chromedp.ID("ctx-form")),
		chromedp.SetValue(chromedp.ID("x-conv"), "c1"), chromedp.SetValue(chromedp.ID("x-msg"), "What do I like to eat?"), chromedp.SetValue(chromedp.ID("x-max"), "2000"),
		chromedp.Click(chromedp.ID("ctx-submit")), chromedp.WaitVisible(chromedp.ID("ctx-bar")))
	if s := text(t, ctxB, "#ctx-messages"); !strings.Contains(s, "I love noodles") || !strings.Contains(s, "Mochi") || !strings.Contains(s, "What do I like to eat?") {
		t.Fatalf("context messages lack the history, the workspace or the current message: %.1000s", s)
	}
	shot(t, ctxB, "prompt")

	// Search playground: the daily note written by the run is found, with its score parts.
	deadline := time.Now().Add(20 * time.Second)
	for {
		run(t, ctxB, "search", chromedp.Navigate(base+"/console/agents/1/search?q=noodles"), chromedp.WaitVisible(chromedp.ID("search-summary")))
		if html, _ := chromedp.Run(ctxB, chromedp.OuterHTML(chromedp.CSS("main"))); strings.Contains(html, `id="hits"`) && strings.Contains(html, "memory/") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the search playground never found the daily note: %s", text(t, ctxB, "main"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	shot(t, ctxB, "search")

	// A dead letter: a poison message is dead-lettered at first sight; retry it.
	if _, err := a.JS.Publish(ctx, "mate.conversation.completed.1", []byte("this is not an event")); err != nil {
		t.Fatal(err)
	}
	var seq uint64
	deadline = time.Now().Add(20 * time.Second)
	for seq == 0 {
		if l, err := bus.ListDeadLetters(ctx, a.JS, 0, "", 10); err == nil && len(l) > 0 {
			seq = l[0].Seq
		} else if time.Now().After(deadline) {
			t.Fatalf("no dead letter: %v", err)
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	run(t, ctxB, "ops", chromedp.Navigate(base+"/console/ops"), chromedp.WaitVisible(chromedp.ID(fmt.Sprintf("retry-%d", seq))))
	if s := text(t, ctxB, "#streams"); !strings.Contains(s, "MATE_EVENTS") || !strings.Contains(s, "summarizer") {
		t.Fatalf("streams table: %q", s)
	}
	shot(t, ctxB, "ops")
	run(t, ctxB, "retry", chromedp.Click(chromedp.ID(fmt.Sprintf("retry-%d", seq))), chromedp.WaitVisible(chromedp.CSS(".flash")))
	if s := text(t, ctxB, ".flash"); !strings.Contains(s, "mate.conversation.completed.1") {
		t.Fatalf("retry flash: %q", s)
	}
	if _, err := bus.GetDeadLetter(ctx, a.JS, seq); err == nil {
		t.Fatal("the retried dead letter is still in MATE_DLQ")
	}
	// The retried poison message is dead-lettered again: discard it for good.
	var seq2 uint64
	deadline = time.Now().Add(20 * time.Second)
	for seq2 == 0 {
		if l, err := bus.ListDeadLetters(ctx, a.JS, seq, "", 10); err == nil && len(l) > 0 {
			seq2 = l[0].Seq
		} else if time.Now().After(deadline) {
			t.Fatalf("the retried poison message was not dead-lettered again: %v", err)
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
	run(t, ctxB, "discard", chromedp.Navigate(base+"/console/ops"), chromedp.Click(chromedp.ID(fmt.Sprintf("discard-%d", seq2))),
		chromedp.WaitVisible(chromedp.ID("confirm")))
	if _, err := bus.GetDeadLetter(ctx, a.JS, seq2); err != nil {
		t.Fatalf("the dead letter went before the discard was confirmed: %v", err)
	}
	run(t, ctxB, "confirm discard", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("dlq-empty")))
	if _, err := bus.GetDeadLetter(ctx, a.JS, seq2); err == nil {
		t.Fatal("the discarded dead letter is still in MATE_DLQ")
	}

	// Cron jobs: an invalid expression is refused with the reason; a valid one is created and
	// shows its next fire times.
	run(t, ctxB, "cron invalid", chromedp.Navigate(base+"/console/cron"), chromedp.WaitVisible(chromedp.ID("cron-form")),
		chromedp.SetValue(chromedp.ID("c-agent"), "1"), chromedp.SetValue(chromedp.ID("c-name"), "Morning check-in"),
		chromedp.SetValue(chromedp.ID("c-expr"), "61 * * * *"), chromedp.SetValue(chromedp.ID("c-msg"), "Good morning! Anything to plan?"),
		chromedp.Click(chromedp.ID("cron-submit")), chromedp.WaitVisible(chromedp.ID("cron-error")))
	// The next fire times show while the expression is typed.
	run(t, ctxB, "cron preview", chromedp.Clear(chromedp.ID("c-expr")), chromedp.SendKeys(chromedp.ID("c-expr"), "0 8 * * 1-5"),
		chromedp.WaitVisible(chromedp.ID("c-preview-next")))
	run(t, ctxB, "cron create", chromedp.SetValue(chromedp.ID("c-expr"), "0 8 * * 1-5"), chromedp.SetValue(chromedp.ID("c-tz"), "Asia/Shanghai"),
		chromedp.Click(chromedp.ID("cron-submit")), chromedp.WaitVisible(chromedp.CSS("#next-fires li")))
	cron, err := cronjob.New(a.DB, ws)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := cron.List(ctx, cronjob.Filter{AgentID: 1, TaskType: "text"})
	if err != nil || len(jobs) != 1 || jobs[0].CronExpression != "0 8 * * 1-5" || jobs[0].Timezone != "Asia/Shanghai" {
		t.Fatalf("cron job not created as typed: %+v %v", jobs, err)
	}
	shot(t, ctxB, "cron")
	// Edit: disable it; the change is saved and validated like a new job.
	run(t, ctxB, "cron edit", chromedp.Click(chromedp.ID("c-en")), chromedp.Click(chromedp.ID("cron-submit")), chromedp.WaitVisible(chromedp.CSS(".flash")))
	if j, err := cron.Get(ctx, jobs[0].ID); err != nil || j.Enabled {
		t.Fatalf("cron job still enabled after the edit: %+v %v", j, err)
	}

	// The CSRF token and the origin are checked on every state change.
	got, err := chromedp.Call(ctxB, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	cookies := got.Cookies
	forged := func(origin string, form string) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/console/agents/1/file", strings.NewReader(form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		for _, c := range cookies {
			req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	before, _ := ws.Get(ctx, 1, "MEMORY.md")
	if st := forged("", "name=MEMORY.md&version=0&content=pwned"); st != http.StatusForbidden {
		t.Fatalf("a post without the CSRF token: %d, want 403", st)
	}
	if st := forged("http://evil.example", "name=MEMORY.md&version=0&content=pwned"); st != http.StatusForbidden {
		t.Fatalf("a cross-origin post: %d, want 403", st)
	}
	if after, _ := ws.Get(ctx, 1, "MEMORY.md"); after.Version != before.Version {
		t.Fatal("a forged request changed the file")
	}

	// Agent 2's key sees agent 2 only, and neither agent 1's pages nor the operations.
	signIn(t, ctxB, base, agent2Key)
	list, err := chromedp.Run(ctxB, chromedp.OuterHTML(chromedp.CSS("#agents")))
	if err != nil || strings.Contains(list, `href="/console/agents/1"`) || !strings.Contains(list, `href="/console/agents/2"`) {
		t.Fatalf("agent 2's list: %v %s", err, list)
	}
	for _, path := range []string{"/console/runs?agent=1", "/console/agents/1", "/console/agents/1/file?name=MEMORY.md", "/console/agents/1/runs", "/console/agents/1/file/history?name=MEMORY.md", "/console/agents/1/file/blame?name=MEMORY.md", "/console/ops"} {
		run(t, ctxB, "forbidden "+path, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.ID("error")))
		if s := text(t, ctxB, "#error"); !strings.Contains(s, "agent 1") && !strings.Contains(s, "admin") {
			t.Fatalf("%s with agent 2's key: %q", path, s)
		}
	}
	run(t, ctxB, "agent 2 runs", chromedp.Navigate(base+"/console/runs"), chromedp.WaitVisible(chromedp.ID("runs-table")))
	if html, err := chromedp.Run(ctxB, chromedp.OuterHTML(chromedp.CSS("main"))); err != nil || strings.Contains(html, "evt-console-1") {
		t.Fatalf("agent 2's ledger shows agent 1's runs (%v): %.600s", err, html)
	}
	run(t, ctxB, "agent 2 cron", chromedp.Navigate(base+"/console/cron/"+fmt.Sprint(jobs[0].ID)), chromedp.WaitVisible(chromedp.ID("error")))

	// Chinese, switched from the page.
	run(t, ctxB, "switch to zh", chromedp.Navigate(base+"/console/agents/2"), chromedp.Click(chromedp.ID("lang-switch")),
		chromedp.WaitVisible(chromedp.Search(`//h1[contains(., "智能体")]`)))
	shot(t, ctxB, "agent-zh")

	// Deleting a cron job asks first (as agent 1's key, which owns it).
	signIn(t, ctxB, base, agent1Key)
	run(t, ctxB, "delete job", chromedp.Navigate(fmt.Sprintf("%s/console/cron/%d", base, jobs[0].ID)), chromedp.Click(chromedp.ID("delete-job")),
		chromedp.WaitVisible(chromedp.ID("confirm")))
	if _, err := cron.Get(ctx, jobs[0].ID); err != nil {
		t.Fatalf("the job went before the delete was confirmed: %v", err)
	}
	run(t, ctxB, "confirm delete", chromedp.Click(chromedp.ID("confirm")), chromedp.WaitVisible(chromedp.ID("cron-form")))
	if _, err := cron.Get(ctx, jobs[0].ID); !errors.Is(err, cronjob.ErrNotFound) {
		t.Fatalf("the job is still there after the confirmed delete: %v", err)
	}

	if os.Getenv("MATE_CONSOLE_SCREENSHOTS") != "" {
		phone := browser(t, 390, 844)
		run(t, phone, "phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(1)))
		signIn(t, phone, base, adminKey)
		run(t, phone, "phone", chromedp.Navigate(base+"/console/agents/1"), chromedp.WaitVisible(chromedp.ID("files")))
		shot(t, phone, "agent-phone")
		run(t, phone, "prompt", chromedp.Navigate(base+"/console/agents/1/prompt"), chromedp.WaitVisible(chromedp.ID("system-prompt")))
		shot(t, phone, "prompt-phone")
	}
}
