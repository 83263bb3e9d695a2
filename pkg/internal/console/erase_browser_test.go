package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/matememory/matememory/pkg/internal/workspace"
)

// TestConsoleEraseInBrowser erases an agent from its console page: the typed confirmation
// must match, the receipt lists what went, and the agent's files are gone while another
// agent's stay.
func TestConsoleEraseInBrowser(t *testing.T) {
	ctxB := browser(t, 1280, 900)
	a := startApp(t)
	base := "http://" + a.Addr
	ctx := context.Background()
	for _, id := range []int64{3, 4} {
		if _, _, err := a.Workspace.Write(ctx, id, "notes.md", "- secret of the agent", workspace.AnyVersion, workspace.Change{Actor: "tool"}); err != nil {
			t.Fatal(err)
		}
	}
	signIn(t, ctxB, base, adminKey)
	run(t, ctxB, "open the erase page", chromedp.Navigate(base+"/console/agents/3"), chromedp.Click(chromedp.ID("erase-link")),
		chromedp.WaitVisible(chromedp.ID("confirm")))
	run(t, ctxB, "a wrong id erases nothing", chromedp.SendKeys(chromedp.ID("confirm"), "4"), chromedp.Click(chromedp.ID("erase")),
		chromedp.WaitVisible(chromedp.ID("erase-error")))
	if files, _ := a.Workspace.List(ctx, 3, ""); len(files) == 0 {
		t.Fatal("a mismatched confirmation erased the agent")
	}
	shot(t, ctxB, "erase")
	run(t, ctxB, "erase", chromedp.SendKeys(chromedp.ID("confirm"), "3"), chromedp.Click(chromedp.ID("erase")),
		chromedp.WaitVisible(chromedp.ID("receipt")))
	if got := text(t, ctxB, "#receipt"); !strings.Contains(got, "mate_workspace_file") || !strings.Contains(got, "MATE_EVENTS") {
		t.Fatalf("receipt %q", got)
	}
	// The erased id starts anew: a read may seed the default core files again, but nothing
	// the agent had is left.
	files, err := a.Workspace.List(ctx, 3, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Filename == "notes.md" {
			t.Fatalf("agent 3 still has %s after its erasure", f.Filename)
		}
	}
	if files, _ := a.Workspace.List(ctx, 4, ""); len(files) == 0 {
		t.Fatal("agent 4's files went too")
	}
}
