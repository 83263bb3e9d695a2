package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The agent page's Export link downloads the agent's whole bundle with the browser's
// session: an attachment, the manifest first, the checksums last; another agent's key gets
// no such link for agent 1 and is refused the download.
func TestConsoleExportInBrowser(t *testing.T) {
	ctx := browser(t, 1280, 900)
	a := startApp(t)
	base := "http://" + a.Addr
	signIn(t, ctx, base, agent1Key)
	run(t, ctx, "open agent 1", chromedp.Navigate(base+"/console/agents/1"), chromedp.WaitVisible(chromedp.ID("export")))
	if got := text(t, ctx, "#export"); got != "Export" {
		t.Fatalf("the link says %q", got)
	}
	// What the link fetches, as the browser sends it (cookie included).
	const fetchLink = `fetch(document.getElementById("export").href).then(async r => [String(r.status), r.headers.get("Content-Disposition") || "", await r.text()])`
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got, err := chromedp.Run(tctx, chromedp.Evaluate[[]string](fetchLink, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	status, disposition, body := got[0], got[1], got[2]
	lines := strings.Split(strings.TrimRight(body, "\n"), "\n")
	if status != "200" || !strings.HasPrefix(disposition, `attachment; filename="agent-1-`) ||
		!strings.Contains(lines[0], `"kind":"manifest"`) || !strings.Contains(lines[0], `"includes":{"history":true,"messages":true,"ledger":true}`) ||
		!strings.HasPrefix(lines[len(lines)-1], `{"kind":"checksums"`) {
		t.Fatalf("export: %s %q\n%.400s", status, disposition, body)
	}
	signIn(t, ctx, base, agent2Key)
	run(t, ctx, "agent 1 with agent 2's key", chromedp.Navigate(base+"/console/agents/1/export"), chromedp.WaitVisible(chromedp.CSS("main")))
	if msg := text(t, ctx, "main"); !strings.Contains(msg, "may not act for agent 1") {
		t.Fatalf("agent 2's key downloaded agent 1: %.300s", msg)
	}
}
