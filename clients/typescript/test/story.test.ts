// The chat-service story against a live MateMemory (started by pkg/internal/test/clients/clients_test.go with a
// scripted fake model that writes every "fact-…" word of a transcript to the daily note):
// MATE_URL, MATE_API_KEY (allowed for MATE_AGENT_ID), MATE_OTHER_KEY (not allowed for it).
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  ConflictError,
  ConnectionError,
  ForbiddenError,
  InvalidRequestError,
  MateMemory,
  MateMemoryError,
  NotFoundError,
  RateLimitedError,
  UnauthorizedError,
  type CompletionEvent,
} from "../src/index.js";

const url = process.env.MATE_URL ?? "";
const key = process.env.MATE_API_KEY ?? "";
const agentId = Number(process.env.MATE_AGENT_ID ?? "0");
const live = url !== "" && agentId > 0;

test("chat-service story", { skip: !live && "MATE_URL and MATE_AGENT_ID not set" }, async () => {
  const mem = new MateMemory({ baseUrl: url, apiKey: key });
  const conv = `ts-${Date.now()}`;
  const fact = "fact-ts-oolong";

  // Store messages.
  const stored = await mem.storeMessages(agentId, conv, [
    { role: "user", content: `I only drink ${fact} tea, remember that.` },
    { role: "assistant", content: "Noted: oolong it is." },
    { role: "user", content: "And what should I cook tonight?" },
  ]);
  assert.equal(stored.count, 3);
  assert.equal(stored.messages?.[0]?.role, "user");

  // Get the context, with recall.
  const ctx = await mem.context(agentId, conv, { systemPrompt: "You are a helpful assistant.", userMessage: "And what should I cook tonight?", recall: true });
  const msgs = ctx.messages ?? [];
  assert.equal(msgs[0]?.role, "system");
  assert.match(msgs[0]?.content ?? "", /You are a helpful assistant\./);
  assert.equal(msgs.at(-1)?.content, "And what should I cook tonight?");
  assert.ok(ctx.recall, "recall was asked for and is reported");
  assert.ok(msgs.some((m) => (m.content ?? "").includes(fact)), "the stored history is in the window");

  // Run a tool round: the definitions, then a model's calls (one right, one wrong).
  const tools = await mem.tools("en");
  const names = tools.map((t) => t.function.name);
  for (const n of ["list_workspace_memory_files", "read_workspace_memory_file", "write_workspace_memory_file"]) assert.ok(names.includes(n), `${n} in ${names}`);
  assert.equal(tools[0]?.type, "function");
  const note = `notes/${conv}.md`;
  const round = await mem.runToolRound(agentId, {
    role: "assistant",
    content: null,
    tool_calls: [
      { id: "call_1", type: "function", function: { name: "write_workspace_memory_file", arguments: JSON.stringify({ filename: note, content: "- cooks noodles", expectedVersion: 0 }) } },
      { id: "call_2", type: "function", function: { name: "read_workspace_memory_file", arguments: '{"filename":"nope/missing.md"}' } },
      { id: "call_3", type: "function", function: { name: "read_workspace_memory_file", arguments: "{not json" } },
    ],
  });
  assert.deepEqual(round.map((m) => m.tool_call_id), ["call_1", "call_2", "call_3"]);
  assert.ok(round.every((m) => m.role === "tool"));
  assert.ok(!("error" in JSON.parse(round[0]!.content)), round[0]!.content);
  assert.match(JSON.parse(round[1]!.content).error, /nope\/missing\.md|not found|no such/i);
  assert.ok(JSON.parse(round[2]!.content).error, round[2]!.content);
  assert.equal((await mem.readFile(agentId, note)).content, "- cooks noodles");
  await assert.rejects(mem.executeTool(agentId, "no_such_tool", {}), NotFoundError);

  // Publish the completion (the event id is filled in; publishing the same event again is a duplicate).
  const event: CompletionEvent = {
    agentId, conversationId: conv, userMessage: "And what should I cook tonight?",
    assistantReply: "Noodles with vegetables.", messageCount: 4, triggerSource: "web",
  };
  await mem.storeMessages(agentId, conv, [{ role: "assistant", content: "Noodles with vegetables." }]);
  const ack = await mem.publishCompletion(event);
  assert.ok(event.eventId && ack.eventId === event.eventId);
  assert.equal(ack.duplicate, false);
  assert.equal((await mem.publishCompletion(event)).duplicate, true);

  // Wait for the run.
  const run = await mem.waitRun(agentId, ack.eventId, { timeoutMs: 60_000 });
  assert.equal(run.status, "completed", run.reason);

  // Search for what the extraction wrote.
  // The index follows the file's change asynchronously: poll with a deadline.
  const deadline = Date.now() + 30_000;
  let found = await mem.search(agentId, { query: fact, filenamePrefix: "memory/" });
  while ((found.hits ?? []).length === 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    found = await mem.search(agentId, { query: fact, filenamePrefix: "memory/" });
  }
  const hit = (found.hits ?? [])[0];
  assert.ok(hit, `no hit for ${fact}: ${JSON.stringify(found)}`);
  assert.match(hit.filename, /^memory\/\d{4}-\d{2}-\d{2}\.md$/);
  assert.match(hit.snippet, new RegExp(fact));

  // Read the daily note.
  const daily = await mem.readFile(agentId, hit.filename);
  assert.equal(daily.content.split(`- ${fact}`).length - 1, 1, daily.content);

  // Hit a conflict and retry.
  const first = await mem.writeFile(agentId, `notes/${conv}-c.md`, "one", { expectedVersion: 0 });
  assert.equal(first.created, true);
  await mem.writeFile(agentId, first.filename, "two", { expectedVersion: first.version });
  const stale = await mem.writeFile(agentId, first.filename, "lost", { expectedVersion: first.version }).catch((e: unknown) => e);
  assert.ok(stale instanceof ConflictError, String(stale));
  assert.equal(stale.status, 409);
  await assert.rejects(mem.writeFile(agentId, first.filename, "again", { expectedVersion: 0 }), ConflictError);
  const fresh = await mem.readFile(agentId, first.filename);
  const retried = await mem.writeFile(agentId, first.filename, fresh.content + " three", { expectedVersion: fresh.version });
  assert.equal(retried.content, "two three");
  const updated = await mem.updateFile(agentId, first.filename, (c) => c + " four");
  assert.equal(updated.content, "two three four");
  await assert.rejects(mem.readFile(agentId, "notes/never-written.md"), NotFoundError);
  await assert.rejects(mem.search(agentId, { query: fact, maxResults: 100000 }), InvalidRequestError);

  // An unauthorised key is refused: unknown (401), not allowed for the agent (403).
  const stranger = new MateMemory({ baseUrl: url, apiKey: "no-such-key" });
  await assert.rejects(stranger.readFile(agentId, hit.filename), UnauthorizedError);
  const other = new MateMemory({ baseUrl: url, apiKey: process.env.MATE_OTHER_KEY ?? "" });
  const refused = await other.readFile(agentId, hit.filename).catch((e: unknown) => e);
  assert.ok(refused instanceof ForbiddenError && refused instanceof MateMemoryError, String(refused));
  assert.match(refused.msg, /agent|forbidden|not allowed/i);
});

// Retries: a fetch that answers 429 with Retry-After, then 503, then the envelope; an unsafe
// request is retried on 429 only; Retry-After is reported when retries run out.
test("retries only where safe", async () => {
  const answers = (statuses: number[]) => {
    let i = 0;
    const seen: string[] = [];
    const f = async (req: Request): Promise<Response> => {
      seen.push(req.method);
      const s = statuses[Math.min(i++, statuses.length - 1)]!;
      const body = s < 300 ? { code: s, data: { agentId: 1, filename: "a.md", content: "x", fileSize: 1, enabled: true, sortOrder: 0, version: 1, createTime: "", updateTime: "" } } : { code: s, msg: `status ${s}` };
      return new Response(JSON.stringify(body), { status: s, headers: { "Content-Type": "application/json", "Retry-After": "0" } });
    };
    return { f: f as unknown as typeof fetch, seen };
  };
  const get = answers([429, 503, 200]);
  const c = new MateMemory({ baseUrl: "http://mem.test", fetch: get.f, retry: { baseMs: 1, maxMs: 5 } });
  assert.equal((await c.readFile(1, "a.md")).content, "x");
  assert.equal(get.seen.length, 3);

  const put = answers([503, 200]);
  const w = new MateMemory({ baseUrl: "http://mem.test", fetch: put.f, retry: { baseMs: 1, maxMs: 5 } });
  await assert.rejects(w.writeFile(1, "a.md", "x"), (e: unknown) => e instanceof MateMemoryError && e.status === 503);
  assert.equal(put.seen.length, 1, "an unconditional PUT is not repeated after a 503");

  const limited = answers([429]);
  const r = new MateMemory({ baseUrl: "http://mem.test", fetch: limited.f, retry: { attempts: 2, baseMs: 1, maxMs: 5 } });
  const err = await r.storeMessages(1, "c", [{ role: "user", content: "hi" }]).catch((e: unknown) => e);
  assert.ok(err instanceof RateLimitedError, String(err));
  assert.equal(err.retryAfterMs, 0);
  assert.equal(limited.seen.length, 2, "429 is retried even for a POST: the server refused before doing anything");
});

test("transport errors are retried only where safe; a page that is not the envelope is an error", async () => {
  const seen: string[] = [];
  const flaky = (async (req: Request): Promise<Response> => {
    seen.push(req.method);
    if (seen.length === 1) throw new TypeError("fetch failed");
    return new Response(JSON.stringify({ code: 200, data: { content: "x", version: 1 } }), { status: 200, headers: { "Content-Type": "application/json" } });
  }) as unknown as typeof fetch;
  const c = new MateMemory({ baseUrl: "http://mem.test", fetch: flaky, retry: { baseMs: 1, maxMs: 5 } });
  assert.equal((await c.readFile(1, "a.md")).content, "x");
  assert.deepEqual(seen, ["GET", "GET"]);
  seen.length = 0;
  const once = (async (req: Request): Promise<Response> => {
    seen.push(req.method);
    throw new TypeError("fetch failed");
  }) as unknown as typeof fetch;
  const t = new MateMemory({ baseUrl: "http://mem.test", fetch: once, retry: { baseMs: 1, maxMs: 5 } });
  await assert.rejects(t.executeTool(1, "write_workspace_memory_file", { filename: "a.md", content: "x" }), ConnectionError);
  assert.deepEqual(seen, ["POST"], "a tool call is not repeated");

  const html = (async () => new Response("<html>proxy</html>", { status: 200, headers: { "Content-Type": "text/html" } })) as unknown as typeof fetch;
  const h = new MateMemory({ baseUrl: "http://mem.test", fetch: html });
  await assert.rejects(h.readFile(1, "a.md"), (e: unknown) => e instanceof MateMemoryError && /not the API's JSON envelope/.test(e.msg));
});

test("waitRun waits through deferred and retried runs, and times out naming the last one", async () => {
  const answers = [
    [],
    [{ runId: "r1", status: "deferred", reason: "cooldown" }],
    [{ runId: "r2", status: "failed", reason: "model timeout" }, { runId: "r1", status: "deferred" }],
    [{ runId: "r3", status: "completed" }, { runId: "r2", status: "failed" }],
  ];
  const urls: string[] = [];
  const f = (async (req: Request): Promise<Response> => {
    urls.push(req.url);
    const runs = answers[Math.min(urls.length - 1, answers.length - 1)];
    return new Response(JSON.stringify({ code: 200, data: { agentId: 1, count: runs!.length, runs } }), { status: 200, headers: { "Content-Type": "application/json" } });
  }) as unknown as typeof fetch;
  const c = new MateMemory({ baseUrl: "http://mem.test", fetch: f });
  assert.equal((await c.waitRun(1, "evt-1", { intervalMs: 1, maxIntervalMs: 2 })).runId, "r3");
  assert.equal(urls.length, 4);
  assert.match(urls[0]!, /eventId=evt-1/);
  answers.splice(0, answers.length, [{ runId: "r1", status: "deferred", reason: "cooldown" }]);
  await assert.rejects(c.waitRun(1, "evt-1", { timeoutMs: 30, intervalMs: 5 }), /last run deferred: cooldown/);
  const abort = new AbortController();
  abort.abort(new Error("caller gave up"));
  await assert.rejects(c.waitRun(1, "evt-1", { signal: abort.signal }), /caller gave up/);
});
