// Export, import and erasure against a live MateMemory (pkg/internal/test/clients/clients_test.go):
// MATE_AGENT_ID's memory is exported to a file and imported into MATE_IMPORT_AGENT_ID, which
// is then erased (the key may act for both).
import assert from "node:assert/strict";
import { createReadStream, createWriteStream, mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { test } from "node:test";
import { ConflictError, InvalidRequestError, MateMemory, NotFoundError } from "../src/index.js";

const url = process.env.MATE_URL ?? "";
const key = process.env.MATE_API_KEY ?? "";
const agentId = Number(process.env.MATE_AGENT_ID ?? "0");
const target = Number(process.env.MATE_IMPORT_AGENT_ID ?? "0");
const live = url !== "" && agentId > 0 && target > 0;

test("export to a file, import (dry run, empty, merge), erase", { skip: !live && "MATE_URL, MATE_AGENT_ID and MATE_IMPORT_AGENT_ID not set" }, async () => {
  const mem = new MateMemory({ baseUrl: url, apiKey: key });
  const conv = `ts-bundle-${Date.now()}`;
  const name = `notes/${conv}.md`;
  await mem.writeFile(agentId, name, "- exported by the TypeScript client\n", { expectedVersion: 0 });
  await mem.storeMessages(agentId, conv, [
    { role: "user", content: "Keep this conversation in the bundle." },
    { role: "assistant", content: "It is kept." },
  ]);

  // Export to a file (Node's stream as a web WritableStream).
  const file = join(mkdtempSync(join(tmpdir(), "mate-ts-")), "agent.ndjson");
  const ex = await mem.exportAgent(agentId, Writable.toWeb(createWriteStream(file)) as WritableStream<Uint8Array>, { history: true, messages: true });
  const text = readFileSync(file, "utf8");
  assert.equal(ex.bytes, statSync(file).size);
  assert.match(ex.filename ?? "", new RegExp(`^agent-${agentId}-\\d{8}T\\d{6}Z\\.ndjson$`));
  const lines = text.trimEnd().split("\n").map((l) => JSON.parse(l) as { kind: string; filename?: string; conversationId?: string });
  assert.equal(lines[0]?.kind, "manifest");
  assert.equal(lines.at(-1)?.kind, "checksums");
  assert.ok(lines.some((l) => l.kind === "file" && l.filename === name), "the file is in the bundle");
  assert.equal(lines.filter((l) => l.kind === "message" && l.conversationId === conv).length, 2);
  // The stream form, read whole, is the same bundle but for the manifest's time.
  const again = await new Response((await mem.openExport(agentId, { history: true, messages: true })).body).text();
  assert.equal(again.split("\n").length, text.split("\n").length);

  // A dry run writes nothing: the target still has no bundle to export.
  const dry = await mem.importAgent(target, text, { dryRun: true });
  assert.equal(dry.dryRun, true);
  assert.equal(dry.sourceAgentId, agentId);
  assert.ok(dry.created.file >= 1 && dry.changes > 0, JSON.stringify(dry));
  await assert.rejects(mem.openExport(target), NotFoundError);

  // The import, streamed from the file; then the same bundle merged again: 0 changes.
  const rep = await mem.importAgent(target, Readable.toWeb(createReadStream(file)) as ReadableStream<Uint8Array>);
  assert.equal(rep.mode, "empty");
  assert.deepEqual(rep.created, dry.created);
  assert.equal((await mem.readFile(target, name)).content, "- exported by the TypeScript client\n");
  const merged = await mem.importAgent(target, new Blob([text]), { mode: "merge" });
  assert.equal(merged.changes, 0);
  assert.equal(merged.conflictCount, 0);
  await assert.rejects(mem.importAgent(target, new TextEncoder().encode(text.replace('"kind":"manifest"', '"kind":"manifest","x":1'))), InvalidRequestError);
  await mem.writeFile(target, name, "- changed in the copy\n");
  const conflicted = await mem.importAgent(target, text, { mode: "merge" });
  assert.equal(conflicted.conflictCount, 1);
  assert.equal(conflicted.conflicts?.[0]?.name, name);
  await assert.rejects(mem.importAgent(target, text), ConflictError);

  // Through the escape hatch, JSON-encoding the bundle (openapi-fetch's default) is a clear 400.
  const raw = await mem.api.POST("/api/v1/agents/{agentId}/import", { params: { path: { agentId: target }, query: { dryRun: true } }, body: text });
  assert.equal(raw.response.status, 400);
  assert.match((raw.error as { msg: string }).msg, /the bundle was sent JSON-encoded; send the export's bytes unchanged/);

  // Erase one conversation, then the agent.
  const cr = await mem.eraseConversation(target, conv);
  assert.equal(cr.conversationId, conv);
  assert.equal(cr.rows["mate_message"], 2);
  const er = await mem.eraseAgent(target);
  assert.equal(er.agentId, target);
  assert.ok((er.rows["mate_workspace_file"] ?? 0) >= 1, JSON.stringify(er));
  await assert.rejects(mem.openExport(target), NotFoundError);
});
