package clients_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browserPage loads the built TypeScript client as ES modules, with openapi-fetch from
// node_modules through an import map: no bundler, no Node.
const browserPage = `<!doctype html>
<html><head><meta charset="utf-8"><title>clients</title>
<script type="importmap">{"imports": {"openapi-fetch": "/node_modules/openapi-fetch/dist/index.mjs"}}</script>
<script type="module">
import { MateMemory, ConflictError, UnauthorizedError, NotFoundError } from "/dist/src/index.js";
window.story = async (url, key, agentId) => {
  const mem = new MateMemory({ baseUrl: url, apiKey: key });
  const out = {};
  out.tools = (await mem.tools("en")).map((t) => t.function.name);
  const name = "notes/browser-" + Date.now() + ".md";
  const first = await mem.writeFile(agentId, name, "one", { expectedVersion: 0 });
  out.created = first.created;
  try { await mem.writeFile(agentId, name, "two", { expectedVersion: first.version + 1 }); } catch (e) { out.conflict = e instanceof ConflictError; }
  out.updated = (await mem.updateFile(agentId, name, (c) => c + " two")).content;
  const round = await mem.runToolRound(agentId, { tool_calls: [
    { id: "b1", type: "function", function: { name: "read_workspace_memory_file", arguments: JSON.stringify({ filename: name }) } },
    { id: "b2", type: "function", function: { name: "write_workspace_memory_file", arguments: JSON.stringify({ filename: name, content: "three", expectedVersion: 1 }) } } ] });
  out.toolRead = JSON.parse(round[0].content).content;
  out.toolConflict = JSON.parse(round[1].content).error || "";
  await mem.storeMessages(agentId, "browser-conv", [{ role: "user", content: "Hello from a browser." }]);
  const ctx = await mem.context(agentId, "browser-conv", { userMessage: "Hello again.", recall: true });
  out.last = ctx.messages.at(-1).content;
  const ack = await mem.publishCompletion({ agentId, conversationId: "browser-conv", userMessage: "Hello again.",
    assistantReply: "Hi.", messageCount: 2, triggerSource: "web" });
  out.eventId = ack.eventId;
  out.run = (await mem.waitRun(agentId, ack.eventId, { timeoutMs: 30000 })).status;
  try { await mem.readFile(agentId, "notes/none.md"); } catch (e) { out.notFound = e instanceof NotFoundError; }
  try { await new MateMemory({ baseUrl: url, apiKey: "no-such-key-0123456789" }).tools(); } catch (e) { out.unauthorized = e instanceof UnauthorizedError; }
  return JSON.stringify(out);
};
document.title = "ready";
</script></head><body><main>clients</main></body></html>`

func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("MATE_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	p, err := exec.LookPath("chromium")
	need(t, "chromium", err)
	return p
}

// browserStory runs the built TypeScript client in Chromium against the service, from
// another origin (CORS), with the headers it sends (Authorization, If-Match, X-Tool-Call-Id).
func browserStory(t *testing.T, page string, svc service) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	tctx, cancel3 := context.WithTimeout(ctx, 60*time.Second)
	defer cancel3()
	if err := chromedp.Do(tctx, chromedp.Navigate(page+"/"), chromedp.Poll[chromedp.Void]("document.title === 'ready'")); err != nil {
		t.Fatalf("open the page: %v", err)
	}
	raw, err := chromedp.Run(tctx, chromedp.Evaluate[string](`window.story(`+jsString(svc.url)+`, "story-key-0123456789", 11)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("the story in the browser: %v", err)
	}
	var got struct {
		Tools                                      []string
		Created, Conflict, NotFound, Unauthorized  bool
		Updated, ToolRead, ToolConflict, Last, Run string
		EventID                                    string
	}
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if !got.Created || !got.Conflict || got.Updated != "one two" || got.ToolRead != "one two" || got.ToolConflict == "" ||
		got.Last != "Hello again." || got.EventID == "" || got.Run == "" || !got.NotFound || !got.Unauthorized ||
		!strings.Contains(strings.Join(got.Tools, ","), "read_workspace_memory_file") {
		t.Errorf("the story in the browser: %s", raw)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
