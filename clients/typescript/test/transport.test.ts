// The client's timeouts, aborts and connection failures against local HTTP servers (one that
// never answers, one that stalls mid-stream, a port nobody listens on), and the bundle
// transfer's framing; no MateMemory needed.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import {
  ConnectionError,
  defaultTimeoutMs,
  IncompleteBundleError,
  MateMemory,
  MateMemoryError,
  TimeoutError,
} from "../src/index.js";

const fast = { baseMs: 1, maxMs: 5 };
const manifest = '{"kind":"manifest","format":"matememory-agent-bundle","version":1}\n';
const checksums = '{"kind":"checksums","counts":{},"sha256":{},"all":"ab12"}\n';

/** serve starts an HTTP server on a free loopback port; requests counts what it received. */
async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: string; requests: string[]; close: () => Promise<void> }> {
  const requests: string[] = [];
  const srv: Server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    handler(req, res);
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = srv.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => {
      srv.closeAllConnections();
      return new Promise((r) => srv.close(() => r()));
    },
  };
}

test("a server that never answers: a TimeoutError per attempt, retried only where safe, per-call options over the client's", async () => {
  const silent = await serve(() => {});
  // Attempts are counted as sent: the server may see a request after its attempt timed out.
  const sent: string[] = [];
  const counting = ((req: Request) => {
    sent.push(req.method);
    return fetch(req);
  }) as typeof fetch;
  try {
    const mem = new MateMemory({ baseUrl: silent.url, fetch: counting, timeoutMs: 100, retry: { ...fast, attempts: 2 } });
    const start = Date.now();
    const err = await mem.readFile(1, "a.md").catch((e: unknown) => e);
    assert.ok(err instanceof TimeoutError && err instanceof ConnectionError && !(err instanceof MateMemoryError), String(err));
    assert.equal(err.timeoutMs, 100);
    assert.match(err.message, /GET \/api\/v1\/agents\/1\/files\/a\.md: no answer within 100 ms/);
    assert.ok(Date.now() - start >= 200, "two attempts of 100 ms");
    assert.equal(sent.length, 2, "a read is retried after a timeout");

    sent.length = 0;
    await assert.rejects(mem.storeMessages(1, "c", [{ role: "user", content: "hi" }]), TimeoutError);
    assert.equal(sent.length, 1, "storing messages is not repeated: the first may have been stored");

    sent.length = 0;
    const once = await mem.readFile(1, "a.md", { timeoutMs: 30, retry: { attempts: 1 } }).catch((e: unknown) => e);
    assert.ok(once instanceof TimeoutError && once.timeoutMs === 30, String(once));
    assert.equal(sent.length, 1);

    // The caller's signal: its reason, at once, not retried.
    sent.length = 0;
    const ctl = new AbortController();
    const pending = mem.readFile(1, "a.md", { signal: ctl.signal, timeoutMs: 0 });
    setTimeout(() => ctl.abort(new Error("the user left")), 20);
    await assert.rejects(pending, /the user left/);
    assert.equal(sent.length, 1);

    // The escape hatch has the client's timeout too (until the headers).
    await assert.rejects(mem.api.GET("/api/v1/tools", {}), TimeoutError);
  } finally {
    await silent.close();
  }
  assert.equal(defaultTimeoutMs, 60_000, "the default matches the Python client's");
});

test("the default timeout is 60 s", async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  let aborted: unknown;
  const hang = ((req: Request) =>
    new Promise<Response>((_, reject) => {
      req.signal.addEventListener("abort", () => {
        aborted = req.signal.reason;
        reject(req.signal.reason);
      });
    })) as unknown as typeof fetch;
  const mem = new MateMemory({ baseUrl: "http://mem.test", fetch: hang, retry: { attempts: 1 } });
  const pending = mem.readFile(1, "a.md").catch((e: unknown) => e);
  await new Promise((r) => setImmediate(r));
  t.mock.timers.tick(59_999);
  await new Promise((r) => setImmediate(r));
  assert.equal(aborted, undefined, "aborted before 60 s");
  t.mock.timers.tick(1);
  const err = await pending;
  assert.ok(err instanceof TimeoutError && err.timeoutMs === 60_000, String(err));
});

test("connection failures are ConnectionError (fetch's TypeError as the cause), retried where safe, in the escape hatch too", async () => {
  const gone = await serve(() => {});
  const url = gone.url;
  await gone.close(); // nobody listens on the port now
  let calls = 0;
  const counting = ((req: Request) => {
    calls++;
    return fetch(req);
  }) as typeof fetch;
  const mem = new MateMemory({ baseUrl: url, fetch: counting, retry: { ...fast, attempts: 3 } });
  const err = await mem.readFile(1, "a.md").catch((e: unknown) => e);
  assert.ok(err instanceof ConnectionError && !(err instanceof TimeoutError) && !(err instanceof MateMemoryError), String(err));
  assert.ok(err.cause instanceof TypeError, String(err.cause));
  assert.equal(err.method, "GET");
  assert.equal(calls, 3);
  calls = 0;
  await assert.rejects(mem.executeTool(1, "write_workspace_memory_file", { filename: "a.md", content: "x" }), ConnectionError);
  assert.equal(calls, 1, "a tool call is not repeated");
  await assert.rejects(mem.api.GET("/api/v1/tools", {}), ConnectionError);
});

test("an export streams the bundle, reports one cut short, and its timeout is a stall", async () => {
  const srv = await serve((req, res) => {
    const u = new URL(req.url ?? "", "http://x");
    res.writeHead(200, { "Content-Type": "application/x-ndjson", "Content-Disposition": 'attachment; filename="agent-7-20261201T100000Z.ndjson"' });
    res.write(manifest);
    if (u.searchParams.has("messages")) return; // stalls after the first line
    if (u.searchParams.has("ledger")) return void res.end('{"kind":"file"}\n'); // cut short
    let n = 0;
    const tick = setInterval(() => {
      res.write(`{"kind":"file","n":${n}}\n`);
      if (++n === 6) {
        clearInterval(tick);
        res.end(checksums);
      }
    }, 40);
  });
  try {
    const mem = new MateMemory({ baseUrl: srv.url, timeoutMs: 150 });
    const chunks: Uint8Array[] = [];
    const start = Date.now();
    const ex = await mem.exportAgent(7, new WritableStream({ write: (c) => void chunks.push(c) }), { history: true });
    assert.ok(Date.now() - start >= 200, "the export outlasted the timeout while it moved");
    const text = new TextDecoder().decode(Buffer.concat(chunks));
    assert.equal(ex.bytes, Buffer.byteLength(text));
    assert.equal(ex.filename, "agent-7-20261201T100000Z.ndjson");
    assert.ok(text.startsWith(manifest) && text.endsWith(checksums), text);
    assert.equal(srv.requests.at(-1), "GET /api/v1/agents/7/export?history=true");

    let aborted: unknown;
    const sink = () => new WritableStream<Uint8Array>({ abort: (r) => void (aborted = r) });
    await assert.rejects(mem.exportAgent(7, sink(), { ledger: true }), IncompleteBundleError);
    assert.ok(aborted instanceof IncompleteBundleError, "the sink was aborted");
    await assert.rejects(mem.exportAgent(7, sink(), { messages: true }), (e: unknown) => e instanceof TimeoutError && /no byte within 150 ms/.test(e.message));
    const opened = await mem.openExport(7, { ledger: true });
    await assert.rejects(new Response(opened.body).text(), IncompleteBundleError);
  } finally {
    await srv.close();
  }
});

test("an import sends the bundle's bytes as they are, as JSON Lines; a stream is sent once", async () => {
  const bundle = manifest + '{"kind":"agent","language":"en"}\n' + checksums;
  const seen: { url: string; type: string | null; body: string }[] = [];
  let status = 503;
  const f = (async (req: Request) => {
    seen.push({ url: req.url, type: req.headers.get("Content-Type"), body: await req.text() });
    const s = status;
    status = 200;
    const body = s === 200 ? { code: 200, data: { agentId: 3, sourceAgentId: 7, mode: "merge", dryRun: true, changes: 0, conflictCount: 0, conflicts: [] } } : { code: s, msg: "database unavailable" };
    return new Response(JSON.stringify(body), { status: s, headers: { "Content-Type": "application/json" } });
  }) as unknown as typeof fetch;
  const mem = new MateMemory({ baseUrl: "http://mem.test", fetch: f, retry: fast });
  const rep = await mem.importAgent(3, bundle, { mode: "merge", dryRun: true });
  assert.equal(rep.sourceAgentId, 7);
  assert.equal(seen.length, 2, "a string bundle is sent again after a 503");
  for (const s of seen) {
    assert.equal(s.url, "http://mem.test/api/v1/agents/3/import?mode=merge&dryRun=true");
    assert.equal(s.type, "application/x-ndjson");
    assert.equal(s.body, bundle);
  }
  seen.length = 0;
  status = 503;
  const stream = new Blob([bundle]).stream();
  await assert.rejects(mem.importAgent(3, stream), (e: unknown) => e instanceof MateMemoryError && e.status === 503);
  assert.equal(seen.length, 1, "a stream cannot be sent again");
  assert.equal(seen[0]!.body, bundle);
});
