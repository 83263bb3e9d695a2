// MateMemory's TypeScript client. Every type comes from src/schema.ts, which openapi-typescript
// generates from the served OpenAPI document (a test fails when it drifts); this file adds
// what a chat service would otherwise write itself: retries where they are safe, waiting for
// a run, the tool round, and errors as classes. It uses fetch only (Node ≥ 20, Deno, Bun,
// browsers).
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";
import { errorFor, MateMemoryError, retryAfterMs } from "./errors.js";

export * from "./errors.js";
export type { components, paths } from "./schema.js";

type Schemas = components["schemas"];
/** A message to store (role, content, toolCalls, toolCallId, name). */
export type MessageIn = Schemas["MessageIn"];
/** A conversation's messages as stored. */
export type Messages = Schemas["Messages"];
/** A completed conversation turn, published after the reply was sent. */
export type CompletionEvent = Schemas["EventConversationCompletedEvent"];
/** JetStream's acknowledgement of a published event (duplicate: that id was stored before). */
export type EventAck = Schemas["EventAck"];
/** One summarize or emergence attempt of the run ledger. */
export type Run = Schemas["LedgerRun"];
/** The context request: the current user message, the chat service's system prompt, the budget. */
export type ContextRequest = Schemas["WindowContextBody"];
/** Recall options of a context request: put memory search hits in the system message. */
export type RecallRequest = Schemas["WindowRecallRequest"];
/** An assembled context window and how it was made. */
export type ContextResult = Schemas["WindowResult"];
/** A message in OpenAI's chat format, as the context window is exchanged. */
export type ChatMessage = Schemas["WindowMessage"];
/** An OpenAI function-calling tool definition, ready to pass to a model. */
export type ToolDefinition = Schemas["ToolDefinition"];
/** A memory search. */
export type SearchRequest = Schemas["SearchBody"];
/** A memory search's answer. */
export type SearchResult = Schemas["RecallResult"];
/** A workspace memory file. */
export type WorkspaceFile = Schemas["WorkspaceFile"];
/** A file after a write, and whether the write created it. */
export type WriteResult = Schemas["WriteResult"];
/** A file in a listing (no content). */
export type FileInfo = Schemas["WorkspaceInfo"];

/** How a client retries: only transport errors, 429, 502, 503 and 504, and only requests that are safe to repeat (429 always: the server answers it before doing anything). */
export interface RetryPolicy {
  /** Total tries (1 = no retry). Default 4. */
  attempts: number;
  /** First backoff in ms, doubled each retry with jitter. Default 200. */
  baseMs: number;
  /** Longest backoff, and the cap on a server's Retry-After, in ms. Default 5000. */
  maxMs: number;
}

export const defaultRetry: RetryPolicy = { attempts: 4, baseMs: 200, maxMs: 5000 };

export interface ClientOptions {
  /** The API's base URL, e.g. "http://127.0.0.1:8080". */
  baseUrl: string;
  /** Sent as a bearer token; leave it out when the server runs without keys. */
  apiKey?: string;
  /** A fetch to use instead of globalThis.fetch (for tests, proxies). */
  fetch?: typeof globalThis.fetch;
  /** Retry policy; { attempts: 1 } turns retries off. */
  retry?: Partial<RetryPolicy>;
}

/** The model's assistant message as OpenAI returns it; only tool_calls is read. */
export interface AssistantMessage {
  role?: string;
  content?: string | null;
  tool_calls?: ReadonlyArray<{ id: string; type?: string; function: { name: string; arguments: string } }> | null;
}

/** A tool message answering one tool call, to append to the conversation before calling the model again. */
export interface ToolMessage {
  role: "tool";
  tool_call_id: string;
  content: string;
}

export interface WaitOptions {
  /** Give up after this many ms (default: wait as long as signal allows). */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** First and longest wait between two looks at the run ledger (default 200 and 2000 ms). */
  intervalMs?: number;
  maxIntervalMs?: number;
}

/** A run is final when nothing more will happen for its event: completed, skipped, refused, or failed for good (dead-lettered). */
export function isFinal(run: Run): boolean {
  switch (run.status) {
    case "completed":
    case "skipped":
    case "refused":
      return true;
    case "failed":
      return (run.reason ?? "").includes("dead-lettered");
  }
  return false;
}

type Sent<D> = { data?: D; error?: unknown; response: Response };

/** A client of one MateMemory API. `api` is the generated openapi-fetch client for every other operation. */
export class MateMemory {
  /** The typed openapi-fetch client (errors are returned, not thrown, and nothing is retried). */
  readonly api: Client<paths>;
  private readonly retry: RetryPolicy;

  constructor(opts: ClientOptions) {
    const headers: Record<string, string> = { Accept: "application/json" };
    if (opts.apiKey) headers.Authorization = `Bearer ${opts.apiKey}`;
    const f = opts.fetch ?? globalThis.fetch;
    this.api = createClient<paths>({
      baseUrl: opts.baseUrl.replace(/\/+$/, ""),
      headers,
      // Called through a wrapper so a test's or a proxy's fetch is looked up per request.
      fetch: (req: Request) => f(req),
    });
    this.retry = { ...defaultRetry, ...opts.retry };
    this.retry.attempts = Math.max(1, this.retry.attempts);
  }

  /** send runs call, retrying as the policy allows (safe: repeating it cannot apply it twice), and returns the envelope's data or throws the error's class. */
  private async send<D extends { data?: unknown }>(method: string, path: string, safe: boolean, call: () => Promise<Sent<D>>): Promise<NonNullable<D["data"]>> {
    for (let attempt = 1; ; attempt++) {
      let sent: Sent<D>;
      try {
        sent = await call();
      } catch (err) {
        // A 2xx whose body is not JSON (a proxy's page) is not the API answering.
        if (err instanceof SyntaxError) throw new MateMemoryError(500, 500, `response is not the API's JSON envelope: ${err.message}`, method, path);
        // A transport failure (fetch rejects with a TypeError); the caller's abort is not retried.
        if (!safe || attempt >= this.retry.attempts || !(err instanceof TypeError)) throw err;
        await sleep(this.backoff(attempt, undefined));
        continue;
      }
      const { response } = sent;
      if (response.ok && sent.data !== undefined) return sent.data.data as NonNullable<D["data"]>;
      const err = toError(method, path, response, sent.error);
      const retryable = err.status === 429 || (safe && err.temporary);
      if (!retryable || attempt >= this.retry.attempts) throw err;
      await sleep(this.backoff(attempt, retryAfterMs(response.headers)));
    }
  }

  private backoff(attempt: number, after: number | undefined): number {
    if (after !== undefined) return Math.min(after, this.retry.maxMs);
    const d = Math.min(this.retry.baseMs * 2 ** (attempt - 1), this.retry.maxMs);
    // Full jitter over the upper half: retries of many clients spread out.
    return d / 2 + Math.random() * (d / 2);
  }

  /** Appends messages, in order, to a conversation of agentId (at most 1000 in one call) and returns them as stored. Not retried (a repeat would store them twice). */
  async storeMessages(agentId: number, conversationId: string, messages: MessageIn[]): Promise<Messages> {
    if (messages.length === 0) throw new Error("matememory: storeMessages needs at least one message");
    return this.send("POST", `/api/v1/conversations/${conversationId}/messages`, false, () =>
      this.api.POST("/api/v1/conversations/{conversationId}/messages", {
        params: { path: { conversationId } },
        body: { agentId, messages },
      }),
    );
  }

  /**
   * Publishes a completed conversation and returns once JetStream has stored it. An absent
   * eventId and occurredAt are filled in on `event` first, so publishing the same object again
   * after an error stores it once (ack.duplicate), never twice; that is also why it is retried.
   */
  async publishCompletion(event: CompletionEvent): Promise<EventAck> {
    event.eventId ||= globalThis.crypto.randomUUID();
    event.occurredAt ||= new Date().toISOString();
    return this.send("POST", "/api/v1/events/conversation-completed", true, () =>
      this.api.POST("/api/v1/events/conversation-completed", { body: event }),
    );
  }

  /** Lists the agent's summarize and emergence runs, newest first. */
  async runs(agentId: number, filter: { kind?: "summarize" | "emergence"; eventId?: string; limit?: number } = {}): Promise<Run[]> {
    const list = await this.send("GET", `/api/v1/memory/${agentId}/runs`, true, () =>
      this.api.GET("/api/v1/memory/{agentId}/runs", { params: { path: { agentId }, query: filter } }),
    );
    return list.runs ?? [];
  }

  /**
   * Waits until the event (or manual request) eventId has a final run in the agent's run
   * ledger and returns it. Deferred attempts (the agent's cooldown, a held lease) and failures
   * that will be retried are waited through. Throws when timeoutMs passes or signal aborts.
   */
  async waitRun(agentId: number, eventId: string, opts: WaitOptions = {}): Promise<Run> {
    if (!eventId) throw new Error("matememory: waitRun needs an event id");
    const deadline = opts.timeoutMs === undefined ? Infinity : Date.now() + opts.timeoutMs;
    let wait = opts.intervalMs ?? 200;
    const longest = Math.max(wait, opts.maxIntervalMs ?? 2000);
    let last: Run | undefined;
    for (;;) {
      opts.signal?.throwIfAborted();
      const runs = await this.runs(agentId, { eventId, limit: 50 });
      const final = runs.find(isFinal);
      if (final) return final;
      last = runs[0] ?? last;
      const left = deadline - Date.now();
      if (left <= 0) {
        const state = last ? `last run ${last.status}: ${last.reason ?? ""}` : "no run yet";
        throw new Error(`matememory: waiting for the outcome of ${eventId} timed out (${state})`);
      }
      await sleep(Math.min(wait, left), opts.signal);
      wait = Math.min(wait * 2, longest);
    }
  }

  /**
   * Returns the messages to send to the model for the current user message: the system
   * prompt with the workspace files (and, with recall, memory search hits for the message),
   * a summary of early conversation, recent history, the current message last; compacted and
   * trimmed to fit the budget. recall: true uses the server's defaults.
   */
  async context(agentId: number, conversationId: string, req: Omit<ContextRequest, "recall"> & { recall?: boolean | RecallRequest }): Promise<ContextResult> {
    const { recall, ...rest } = req;
    const body: ContextRequest = { ...rest };
    if (recall) body.recall = recall === true ? {} : recall;
    // Safe to repeat: it changes nothing but caches, and the memory flush it may request has
    // an id made of the agent, conversation and last evicted message (JetStream deduplicates).
    return this.send("POST", `/api/v1/agents/${agentId}/conversations/${conversationId}/context`, true, () =>
      this.api.POST("/api/v1/agents/{agentId}/conversations/{conversationId}/context", {
        params: { path: { agentId, conversationId } },
        body,
      }),
    );
  }

  /** The emergency compaction after the model answered context_length_exceeded: only the last exchanges, no LLM call. */
  async retryContext(agentId: number, conversationId: string, req: ContextRequest): Promise<ContextResult> {
    return this.send("POST", `/api/v1/agents/${agentId}/conversations/${conversationId}/context/retry`, true, () =>
      this.api.POST("/api/v1/agents/{agentId}/conversations/{conversationId}/context/retry", {
        params: { path: { agentId, conversationId } },
        body: req,
      }),
    );
  }

  /** The memory tools in OpenAI's function format, described in language ("zh", "en"; default: the server's). */
  async tools(language?: "zh" | "en"): Promise<ToolDefinition[]> {
    const defs = await this.send("GET", "/api/v1/tools", true, () =>
      this.api.GET("/api/v1/tools", { params: { query: language ? { language } : {} } }),
    );
    return defs ?? [];
  }

  /**
   * Runs tool name for agentId with args: the JSON string the model produced, or an object.
   * Returns the tool's JSON output. A call the model got wrong is an error whose msg is meant
   * for the model to read (runToolRound hands it back). Not retried: a write is not idempotent.
   */
  async executeTool(agentId: number, name: string, args: string | Record<string, unknown> | undefined, opts: { toolCallId?: string } = {}): Promise<unknown> {
    const raw = typeof args === "string" ? (args.trim() === "" ? "{}" : args) : JSON.stringify(args ?? {});
    return this.send("POST", `/api/v1/agents/${agentId}/tools/${name}`, false, () =>
      this.api.POST("/api/v1/agents/{agentId}/tools/{toolName}", {
        params: { path: { agentId, toolName: name }, header: opts.toolCallId ? { "X-Tool-Call-Id": opts.toolCallId } : {} },
        body: raw,
        // The model's arguments go as it wrote them: a malformed one gets the server's message.
        bodySerializer: (b: unknown) => b as string,
        headers: { "Content-Type": "application/json" },
      }),
    );
  }

  /**
   * Runs one round of a model's tool calls, in order, and returns the tool messages to append
   * after the assistant message before calling the model again. A call the model got wrong
   * (400, 404, 409, 413) answers with {"error": msg} so the model can correct itself; other
   * errors (auth, the service down) are thrown.
   */
  async runToolRound(agentId: number, message: AssistantMessage): Promise<ToolMessage[]> {
    const out: ToolMessage[] = [];
    for (const call of message.tool_calls ?? []) {
      let content: string;
      try {
        content = JSON.stringify(await this.executeTool(agentId, call.function.name, call.function.arguments, { toolCallId: call.id }));
      } catch (err) {
        if (!(err instanceof MateMemoryError) || ![400, 404, 409, 413, 415].includes(err.status)) throw err;
        content = JSON.stringify({ error: err.msg });
      }
      out.push({ role: "tool", tool_call_id: call.id, content });
    }
    return out;
  }

  /** Searches the agent's memory files (hybrid BM25 + embeddings). */
  async search(agentId: number, query: string | SearchRequest): Promise<SearchResult> {
    const body: SearchRequest = typeof query === "string" ? { query } : query;
    return this.send("POST", `/api/v1/agents/${agentId}/memory/search`, true, () =>
      this.api.POST("/api/v1/agents/{agentId}/memory/search", { params: { path: { agentId } }, body }),
    );
  }

  /** Lists the agent's files whose name starts with prefix, in injection order. */
  async listFiles(agentId: number, prefix?: string): Promise<FileInfo[]> {
    const list = await this.send("GET", `/api/v1/agents/${agentId}/files`, true, () =>
      this.api.GET("/api/v1/agents/{agentId}/files", { params: { path: { agentId }, query: prefix ? { prefix } : {} } }),
    );
    return list.files ?? [];
  }

  /** Reads one file; its version is what writeFile's expectedVersion expects. */
  async readFile(agentId: number, filename: string): Promise<WorkspaceFile> {
    return this.send("GET", `/api/v1/agents/${agentId}/files/${filename}`, true, () =>
      this.api.GET("/api/v1/agents/{agentId}/files/{filename}", { params: { path: { agentId, filename } } }),
    );
  }

  /**
   * Creates or replaces a file's content. expectedVersion is the version read before (a
   * ConflictError if the file changed since: read it again and redo the change), 0 to create
   * only, or absent to overwrite whatever is there. Retried only with an expectedVersion (a
   * repeat then cannot apply twice: it conflicts).
   */
  async writeFile(agentId: number, filename: string, content: string, opts: { expectedVersion?: number } = {}): Promise<WriteResult> {
    const v = opts.expectedVersion;
    return this.send("PUT", `/api/v1/agents/${agentId}/files/${filename}`, v !== undefined, () =>
      this.api.PUT("/api/v1/agents/{agentId}/files/{filename}", {
        params: { path: { agentId, filename }, header: v === undefined ? {} : { "If-Match": `"${v}"` } },
        body: { content },
      }),
    );
  }

  /**
   * Reads a file, applies change to its content and writes it with the version read,
   * reading again and reapplying when someone else wrote in between (at most attempts times).
   * A file that does not exist is created from change(""), create-only.
   */
  async updateFile(agentId: number, filename: string, change: (content: string) => string, attempts = 5): Promise<WriteResult> {
    for (let i = 1; ; i++) {
      let content = "";
      let expectedVersion = 0;
      try {
        const f = await this.readFile(agentId, filename);
        content = f.content;
        expectedVersion = f.version;
      } catch (err) {
        if (!(err instanceof MateMemoryError && err.status === 404)) throw err;
      }
      try {
        return await this.writeFile(agentId, filename, change(content), { expectedVersion });
      } catch (err) {
        if (!(err instanceof MateMemoryError && err.status === 409) || i >= attempts) throw err;
      }
    }
  }
}

function toError(method: string, path: string, response: Response, body: unknown): MateMemoryError {
  let code = response.status;
  let msg = "";
  if (body && typeof body === "object" && "msg" in body) {
    const env = body as { code?: unknown; msg?: unknown };
    if (typeof env.msg === "string") msg = env.msg;
    if (typeof env.code === "number") code = env.code;
  } else if (typeof body === "string") {
    msg = body.trim().slice(0, 512);
  }
  if (msg === "") msg = response.statusText || `HTTP ${response.status}`;
  // An error envelope behind a 2xx (or a 2xx without the envelope) is still an error.
  const status = response.ok ? (code >= 300 ? code : 500) : response.status;
  if (response.ok && code < 300) msg = `response is not the API's JSON envelope: ${msg}`;
  return errorFor(status, code, msg, method, path, response.headers);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
