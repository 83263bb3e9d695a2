// A small program against the client generated from MateMemory's OpenAPI document
// (schema.d.ts, written by openapi-typescript); TestOpenAPIToolchain type-checks it with
// tsc --noEmit, so a document a typed client cannot use fails the build.
import createClient from "openapi-fetch";
import type { paths, components } from "./schema";

type File = components["schemas"]["WorkspaceFile"];

const api = createClient<paths>({
  baseUrl: "http://127.0.0.1:8080",
  headers: { Authorization: "Bearer secret" },
});

export async function demo(): Promise<void> {
  const put = await api.PUT("/api/v1/agents/{agentId}/files/{filename}", {
    params: { path: { agentId: 1, filename: "memory/2026-04-01.md" }, header: { "If-Match": "0" } },
    body: { content: "# 2026-04-01\n\n- likes green tea" },
  });
  if (put.error) {
    const msg: string = put.error.msg;
    throw new Error(msg);
  }
  const created: boolean = put.data.data.created;
  const version: number = put.data.data.version;

  const read = await api.GET("/api/v1/agents/{agentId}/files/{filename}", {
    params: { path: { agentId: 1, filename: "memory/2026-04-01.md" } },
  });
  const file: File | undefined = read.data?.data;

  const history = await api.GET("/api/v1/agents/{agentId}/files/{filename}/history", {
    params: { path: { agentId: 1, filename: "memory/2026-04-01.md" } },
  });
  const versions: number[] = (history.data?.data.history ?? []).map((h) => h.version);

  await api.POST("/api/v1/agents/{agentId}/files/{filename}/rollback", {
    params: { path: { agentId: 1, filename: "memory/2026-04-01.md" }, header: { "If-Match": String(version) } },
    body: { version: versions[0] ?? 1 },
  });

  const stored = await api.POST("/api/v1/conversations/{conversationId}/messages", {
    params: { path: { conversationId: "c-1" } },
    body: { agentId: 1, messages: [{ role: "user", content: "I drink green tea." }] },
  });
  const count: number | undefined = stored.data?.data.count;

  const ack = await api.POST("/api/v1/events/conversation-completed", {
    body: {
      agentId: 1, conversationId: "c-1", userMessage: "I drink green tea.", assistantReply: "Noted.",
      messageCount: 2, triggerSource: "api",
    },
  });
  const duplicate: boolean | undefined = ack.data?.data.duplicate;

  const runs = await api.GET("/api/v1/memory/{agentId}/runs", {
    params: { path: { agentId: 1 }, query: { kind: "summarize", limit: 10 } },
  });
  const statuses: string[] = (runs.data?.data.runs ?? []).map((r) => r.status);

  const hits = await api.POST("/api/v1/agents/{agentId}/memory/search", {
    params: { path: { agentId: 1 } },
    body: { query: "green tea", maxResults: 5 },
  });
  const files: string[] = (hits.data?.data.hits ?? []).map((h) => h.filename);

  const window = await api.POST("/api/v1/agents/{agentId}/conversations/{conversationId}/context", {
    params: { path: { agentId: 1, conversationId: "c-1" } },
    body: { userMessage: "What do I drink?", recall: { topK: 3 } },
  });
  const tokens: number | undefined = window.data?.data.tokens.total;

  const jobs = await api.GET("/api/v1/cron-jobs", { params: { query: { agentId: 1 } } });
  const names: string[] = (jobs.data?.data.jobs ?? []).map((j) => j.name);

  console.log(created, file?.filename, count, duplicate, statuses, files, tokens, names);
}
