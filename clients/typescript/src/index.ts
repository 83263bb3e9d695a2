// MateMemory's TypeScript client. Every type comes from src/schema.ts, which openapi-typescript
// generates from the served OpenAPI document (a test fails when it drifts); this file adds
// what a chat service would otherwise write itself: retries where they are safe, waiting for
// a run, the tool round, and errors as classes. It uses fetch only (Node ≥ 20, Deno, Bun,
// browsers).
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";
import { ConnectionError, errorFor, IncompleteBundleError, MateMemoryError, retryAfterMs, TimeoutError } from "./errors.js";

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
/** What an import did (or, on a dry run, would do): records of each kind created, updated, unchanged, and the conflicts. */
export type ImportReport = Schemas["BundleImportReport"];
/** What an agent's erasure removed: counts per store, no content. */
export type ErasureReceipt = Schemas["ErasureReceipt"];
/** What a conversation's erasure removed, and the memory file versions its runs wrote (`derived`), for review. */
export type ConversationErasureReceipt = Schemas["ErasureConversationReceipt"];

/** The media type of an agent bundle (JSON Lines, docs/bundle.md). */
export const bundleContentType = "application/x-ndjson";

/** The default timeout, in ms, as the Python client's. */
export const defaultTimeoutMs = 60_000;

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
  /**
   * How long one attempt of a request may take, in ms: connecting, sending, and the answer
   * read whole; past it the attempt fails with a TimeoutError (retried where safe). An export
   * or an import is bounded by how long it may stall instead (no byte moving). 0 turns it
   * off. Default 60000 (defaultTimeoutMs), as the Python client's.
   */
  timeoutMs?: number;
}

/** Options of one call, over the client's. */
export interface CallOptions {
  /** This call's timeout of each attempt, in ms (0: none); default the client's timeoutMs. */
  timeoutMs?: number;
  /** This call's retry policy, over the client's ({ attempts: 1 }: no retry). */
  retry?: Partial<RetryPolicy>;
  /** Aborts the call and its retries: it rejects with the signal's reason, and is not retried. */
  signal?: AbortSignal;
}

/** What an export holds besides the agent's settings, files and cron jobs. */
export interface ExportOptions {
  /** Every file's previous versions. */
  history?: boolean;
  /** The stored conversation messages. */
  messages?: boolean;
  /** The run ledger. */
  ledger?: boolean;
}

/** An export being received: read `body` (it errors with IncompleteBundleError at its end when the bundle was cut short). */
export interface ExportStream {
  body: ReadableStream<Uint8Array>;
  /** The server's suggested file name (agent-N-TIME.ndjson). */
  filename?: string;
}

/** What exportAgent wrote. */
export interface Exported {
  /** The bundle's size. */
  bytes: number;
  /** The server's suggested file name (agent-N-TIME.ndjson). */
  filename?: string;
}

/** An import's mode and whether it is a dry run. */
export interface ImportOptions {
  /**
   * "empty" (the default): the agent must hold nothing yet (an id never used, or exactly this
   * bundle: 0 changes), else a ConflictError. "merge": keep what the agent has, add what it
   * lacks, list conflicts. There is no replace: erase the agent (eraseAgent), then import.
   */
  mode?: "empty" | "merge";
  /** Validate and report what would change; write nothing. */
  dryRun?: boolean;
}

/** A bundle to import: the export's bytes, unchanged. */
export type Bundle = string | Uint8Array | Blob | ReadableStream<Uint8Array>;

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
  /** Give up after this many ms (default: wait as long as signal allows). Each look at the ledger has the client's timeout. */
  timeoutMs?: number;
  /** Aborts the wait, and the look at the ledger under way. */
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

/** What each attempt of a request gets: the signal to send it with, and the fetch that sends it. */
type Attempt = { signal: AbortSignal; fetch: (req: Request) => Promise<Response> };

/**
 * A client of one MateMemory API. `api` is the generated openapi-fetch client for every other
 * operation: the escape hatch (errors are returned, not thrown, and nothing is retried; the
 * client's timeout bounds the wait for the response headers, and connection failures are
 * ConnectionError, as for the methods).
 */
export class MateMemory {
  /** The typed openapi-fetch client (errors are returned, not thrown, and nothing is retried). */
  readonly api: Client<paths>;
  private readonly retry: RetryPolicy;
  private readonly timeoutMs: number;
  private readonly plainFetch: (req: Request) => Promise<Response>;

  constructor(opts: ClientOptions) {
    const headers: Record<string, string> = { Accept: "application/json" };
    if (opts.apiKey) headers.Authorization = `Bearer ${opts.apiKey}`;
    const f = opts.fetch ?? globalThis.fetch;
    // Called through a wrapper so a test's or a proxy's fetch is looked up per request.
    this.plainFetch = (req: Request) => f(req);
    this.timeoutMs = opts.timeoutMs ?? defaultTimeoutMs;
    this.api = createClient<paths>({
      baseUrl: opts.baseUrl.replace(/\/+$/, ""),
      headers,
      // The escape hatch's requests: the client's timeout until the headers arrive, and a
      // ConnectionError for a transport failure. The methods pass their own fetch.
      fetch: async (req: Request) => {
        const d = new Deadline(this.timeoutMs, req.signal, req.method, new URL(req.url).pathname);
        try {
          return await f(new Request(req, { signal: d.signal }));
        } catch (err) {
          throw d.explain(err);
        } finally {
          d.done();
        }
      },
    });
    this.retry = { ...defaultRetry, ...opts.retry };
    this.retry.attempts = Math.max(1, this.retry.attempts);
  }

  /**
   * attempts runs once (an attempt of method path) as the policy allows: again after a
   * ConnectionError (a timeout included) or a temporary error answer when safe, after 429
   * always; never after the caller's abort. once's errors are MateMemoryError for an answer.
   */
  private async attempts<T>(method: string, path: string, safe: boolean, opts: CallOptions, once: (a: Attempt, d: Deadline) => Promise<T>): Promise<T> {
    const policy = { ...this.retry, ...opts.retry };
    const tries = Math.max(1, policy.attempts);
    for (let attempt = 1; ; attempt++) {
      opts.signal?.throwIfAborted();
      const d = new Deadline(opts.timeoutMs ?? this.timeoutMs, opts.signal, method, path);
      let err: unknown;
      try {
        return await once({ signal: d.signal, fetch: this.plainFetch }, d);
      } catch (e) {
        err = d.explain(e);
      } finally {
        d.done();
      }
      const retryable = err instanceof MateMemoryError ? err.status === 429 || (safe && err.temporary) : safe && err instanceof ConnectionError;
      if (!retryable || attempt >= tries) throw err;
      const after = err instanceof MateMemoryError ? retryAfter.get(err) : undefined;
      await sleep(backoff(policy, attempt, after), opts.signal);
    }
  }

  /** send runs call, retrying as the policy allows (safe: repeating it cannot apply it twice), and returns the envelope's data or throws the error's class. */
  private async send<D extends { data?: unknown }>(method: string, path: string, safe: boolean, opts: CallOptions, call: (a: Attempt, d: Deadline) => Promise<Sent<D>>): Promise<NonNullable<D["data"]>> {
    return this.attempts(method, path, safe, opts, async (a, d) => {
      let sent: Sent<D>;
      try {
        sent = await call(a, d);
      } catch (err) {
        // A 2xx whose body is not JSON (a proxy's page) is not the API answering.
        if (err instanceof SyntaxError) throw new MateMemoryError(500, 500, `response is not the API's JSON envelope: ${err.message}`, method, path);
        throw err;
      }
      const { response } = sent;
      if (response.ok && sent.data !== undefined) return sent.data.data as NonNullable<D["data"]>;
      throw toError(method, path, response, sent.error);
    });
  }

  /** Appends messages, in order, to a conversation of agentId (at most 1000 in one call) and returns them as stored. Not retried (a repeat would store them twice). */
  async storeMessages(agentId: number, conversationId: string, messages: MessageIn[], opts: CallOptions = {}): Promise<Messages> {
    if (messages.length === 0) throw new Error("matememory: storeMessages needs at least one message");
    return this.send("POST", `/api/v1/conversations/${conversationId}/messages`, false, opts, (a) =>
      this.api.POST("/api/v1/conversations/{conversationId}/messages", {
        params: { path: { conversationId } },
        body: { agentId, messages },
        ...a,
      }),
    );
  }

  /**
   * Publishes a completed conversation and returns once JetStream has stored it. An absent
   * eventId and occurredAt are filled in on `event` first, so publishing the same object again
   * after an error stores it once (ack.duplicate), never twice; that is also why it is retried.
   */
  async publishCompletion(event: CompletionEvent, opts: CallOptions = {}): Promise<EventAck> {
    event.eventId ||= globalThis.crypto.randomUUID();
    event.occurredAt ||= new Date().toISOString();
    return this.send("POST", "/api/v1/events/conversation-completed", true, opts, (a) =>
      this.api.POST("/api/v1/events/conversation-completed", { body: event, ...a }),
    );
  }

  /** Lists the agent's summarize and emergence runs, newest first. */
  async runs(agentId: number, filter: { kind?: "summarize" | "emergence"; eventId?: string; limit?: number } & CallOptions = {}): Promise<Run[]> {
    const { timeoutMs, retry, signal, ...query } = filter;
    const list = await this.send("GET", `/api/v1/memory/${agentId}/runs`, true, { timeoutMs, retry, signal }, (a) =>
      this.api.GET("/api/v1/memory/{agentId}/runs", { params: { path: { agentId }, query }, ...a }),
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
      const runs = await this.runs(agentId, { eventId, limit: 50, signal: opts.signal });
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
  async context(agentId: number, conversationId: string, req: Omit<ContextRequest, "recall"> & { recall?: boolean | RecallRequest }, opts: CallOptions = {}): Promise<ContextResult> {
    const { recall, ...rest } = req;
    const body: ContextRequest = { ...rest };
    if (recall) body.recall = recall === true ? {} : recall;
    // Safe to repeat: it changes nothing but caches, and the memory flush it may request has
    // an id made of the agent, conversation and last evicted message (JetStream deduplicates).
    return this.send("POST", `/api/v1/agents/${agentId}/conversations/${conversationId}/context`, true, opts, (a) =>
      this.api.POST("/api/v1/agents/{agentId}/conversations/{conversationId}/context", {
        params: { path: { agentId, conversationId } },
        body,
        ...a,
      }),
    );
  }

  /** The emergency compaction after the model answered context_length_exceeded: only the last exchanges, no LLM call. */
  async retryContext(agentId: number, conversationId: string, req: ContextRequest, opts: CallOptions = {}): Promise<ContextResult> {
    return this.send("POST", `/api/v1/agents/${agentId}/conversations/${conversationId}/context/retry`, true, opts, (a) =>
      this.api.POST("/api/v1/agents/{agentId}/conversations/{conversationId}/context/retry", {
        params: { path: { agentId, conversationId } },
        body: req,
        ...a,
      }),
    );
  }

  /** The memory tools in OpenAI's function format, described in language ("zh", "en"; default: the server's). */
  async tools(language?: "zh" | "en", opts: CallOptions = {}): Promise<ToolDefinition[]> {
    const defs = await this.send("GET", "/api/v1/tools", true, opts, (a) =>
      this.api.GET("/api/v1/tools", { params: { query: language ? { language } : {} }, ...a }),
    );
    return defs ?? [];
  }

  /**
   * Runs tool name for agentId with args: the JSON string the model produced, or an object.
   * Returns the tool's JSON output. A call the model got wrong is an error whose msg is meant
   * for the model to read (runToolRound hands it back). Not retried: a write is not idempotent.
   */
  async executeTool(agentId: number, name: string, args: string | Record<string, unknown> | undefined, opts: { toolCallId?: string } & CallOptions = {}): Promise<unknown> {
    const raw = typeof args === "string" ? (args.trim() === "" ? "{}" : args) : JSON.stringify(args ?? {});
    return this.send("POST", `/api/v1/agents/${agentId}/tools/${name}`, false, opts, (a) =>
      this.api.POST("/api/v1/agents/{agentId}/tools/{toolName}", {
        params: { path: { agentId, toolName: name }, header: opts.toolCallId ? { "X-Tool-Call-Id": opts.toolCallId } : {} },
        body: raw,
        // The model's arguments go as it wrote them: a malformed one gets the server's message.
        bodySerializer: (b: unknown) => b as string,
        headers: { "Content-Type": "application/json" },
        ...a,
      }),
    );
  }

  /**
   * Runs one round of a model's tool calls, in order, and returns the tool messages to append
   * after the assistant message before calling the model again. A call the model got wrong
   * (400, 404, 409, 413) answers with {"error": msg} so the model can correct itself; other
   * errors (auth, the service down) are thrown.
   */
  async runToolRound(agentId: number, message: AssistantMessage, opts: CallOptions = {}): Promise<ToolMessage[]> {
    const out: ToolMessage[] = [];
    for (const call of message.tool_calls ?? []) {
      let content: string;
      try {
        content = JSON.stringify(await this.executeTool(agentId, call.function.name, call.function.arguments, { ...opts, toolCallId: call.id }));
      } catch (err) {
        if (!(err instanceof MateMemoryError) || ![400, 404, 409, 413, 415].includes(err.status)) throw err;
        content = JSON.stringify({ error: err.msg });
      }
      out.push({ role: "tool", tool_call_id: call.id, content });
    }
    return out;
  }

  /** Searches the agent's memory files (hybrid BM25 + embeddings). */
  async search(agentId: number, query: string | SearchRequest, opts: CallOptions = {}): Promise<SearchResult> {
    const body: SearchRequest = typeof query === "string" ? { query } : query;
    return this.send("POST", `/api/v1/agents/${agentId}/memory/search`, true, opts, (a) =>
      this.api.POST("/api/v1/agents/{agentId}/memory/search", { params: { path: { agentId } }, body, ...a }),
    );
  }

  /** Lists the agent's files whose name starts with prefix, in injection order. */
  async listFiles(agentId: number, prefix?: string, opts: CallOptions = {}): Promise<FileInfo[]> {
    const list = await this.send("GET", `/api/v1/agents/${agentId}/files`, true, opts, (a) =>
      this.api.GET("/api/v1/agents/{agentId}/files", { params: { path: { agentId }, query: prefix ? { prefix } : {} }, ...a }),
    );
    return list.files ?? [];
  }

  /** Reads one file; its version is what writeFile's expectedVersion expects. */
  async readFile(agentId: number, filename: string, opts: CallOptions = {}): Promise<WorkspaceFile> {
    return this.send("GET", `/api/v1/agents/${agentId}/files/${filename}`, true, opts, (a) =>
      this.api.GET("/api/v1/agents/{agentId}/files/{filename}", { params: { path: { agentId, filename } }, ...a }),
    );
  }

  /**
   * Creates or replaces a file's content. expectedVersion is the version read before (a
   * ConflictError if the file changed since: read it again and redo the change), 0 to create
   * only, or absent to overwrite whatever is there. Retried only with an expectedVersion (a
   * repeat then cannot apply twice: it conflicts).
   */
  async writeFile(agentId: number, filename: string, content: string, opts: { expectedVersion?: number } & CallOptions = {}): Promise<WriteResult> {
    const v = opts.expectedVersion;
    return this.send("PUT", `/api/v1/agents/${agentId}/files/${filename}`, v !== undefined, opts, (a) =>
      this.api.PUT("/api/v1/agents/{agentId}/files/{filename}", {
        params: { path: { agentId, filename }, header: v === undefined ? {} : { "If-Match": `"${v}"` } },
        body: { content },
        ...a,
      }),
    );
  }

  /**
   * Reads a file, applies change to its content and writes it with the version read,
   * reading again and reapplying when someone else wrote in between (at most attempts times).
   * A file that does not exist is created from change(""), create-only.
   */
  async updateFile(agentId: number, filename: string, change: (content: string) => string, attempts = 5, opts: CallOptions = {}): Promise<WriteResult> {
    for (let i = 1; ; i++) {
      let content = "";
      let expectedVersion = 0;
      try {
        const f = await this.readFile(agentId, filename, opts);
        content = f.content;
        expectedVersion = f.version;
      } catch (err) {
        if (!(err instanceof MateMemoryError && err.status === 404)) throw err;
      }
      try {
        return await this.writeFile(agentId, filename, change(content), { ...opts, expectedVersion });
      } catch (err) {
        if (!(err instanceof MateMemoryError && err.status === 409) || i >= attempts) throw err;
      }
    }
  }

  /**
   * Opens the agent's bundle (GET …/export) as a stream: read `body` as it arrives (memory
   * stays bounded whatever the agent's size). The body errors at its end with
   * IncompleteBundleError when the bundle has no checksums line (the server failed after the
   * first byte), with TimeoutError when no byte arrived for the timeout. An agent never used
   * is a NotFoundError. Retried (as a read) until the response's headers arrive.
   */
  async openExport(agentId: number, opts: ExportOptions & CallOptions = {}): Promise<ExportStream> {
    const { history, messages, ledger } = opts;
    const query = { ...(history && { history }), ...(messages && { messages }), ...(ledger && { ledger }) };
    const path = `/api/v1/agents/${agentId}/export`;
    let stream: ExportStream | undefined;
    await this.attempts("GET", path, true, opts, async (a, d) => {
      const sent = await this.api.GET("/api/v1/agents/{agentId}/export", { params: { path: { agentId }, query }, parseAs: "stream", ...a });
      const { response } = sent;
      const body = sent.data as ReadableStream<Uint8Array> | null | undefined;
      if (!response.ok || !body) throw toError("GET", path, response, response.ok ? "the export has no body" : sent.error);
      stream = { body: body.pipeThrough(d.keep()).pipeThrough(checkBundle()), filename: attachmentName(response.headers) };
    });
    return stream!;
  }

  /**
   * Streams the agent's bundle to `to` (in Node: `Writable.toWeb(fs.createWriteStream(path))`;
   * in a browser a file handle's `createWritable()`) and resolves when it is all written.
   * On IncompleteBundleError or a TimeoutError, `to` is aborted: discard what it received.
   */
  async exportAgent(agentId: number, to: WritableStream<Uint8Array>, opts: ExportOptions & CallOptions = {}): Promise<Exported> {
    const ex = await this.openExport(agentId, opts);
    let bytes = 0;
    const count = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, c) {
        bytes += chunk.byteLength;
        c.enqueue(chunk);
      },
    });
    await ex.body.pipeThrough(count).pipeTo(to, opts.signal ? { signal: opts.signal } : {});
    return { bytes, filename: ex.filename };
  }

  /**
   * Imports a bundle (the export's bytes, unchanged) into the agent (POST …/import) and
   * returns the report. The whole bundle is validated before anything is written, then
   * applied in one transaction: an invalid bundle is an InvalidRequestError naming the line,
   * mode "empty" meeting an agent that holds something a ConflictError, past 4 GiB a
   * TooLargeError. Importing the same bundle again changes nothing, so a bundle that can be
   * sent again (a string, bytes, a Blob) is retried as a read is; a ReadableStream is sent
   * once. The timeout bounds how long the upload may stall, then the wait for the report.
   */
  async importAgent(agentId: number, bundle: Bundle, opts: ImportOptions & CallOptions = {}): Promise<ImportReport> {
    const query = { ...(opts.mode && { mode: opts.mode }), ...(opts.dryRun && { dryRun: true }) };
    const streamed = typeof ReadableStream !== "undefined" && bundle instanceof ReadableStream;
    return this.send("POST", `/api/v1/agents/${agentId}/import`, !streamed, opts, (a, d) => {
      const body = streamed ? (bundle as ReadableStream<Uint8Array>).pipeThrough(d.touching()) : bundle;
      return this.api.POST("/api/v1/agents/{agentId}/import", {
        params: { path: { agentId }, query },
        body: body as unknown as string,
        // The bundle goes as it is: JSON-encoding it would send one quoted string.
        bodySerializer: (b: unknown) => b as string,
        headers: { "Content-Type": bundleContentType },
        // A stream body needs half duplex in fetch (Node, Chromium).
        ...(streamed ? { duplex: "half" } : {}),
        ...a,
      });
    });
  }

  /**
   * Erases every trace of the agent from every store (DELETE …/agents/{agentId}?erase=true,
   * confirmed with its id; irreversible) and returns the receipt. The agent's own key or an
   * admin key; a ConflictError while an extraction holds the agent (retryAfterMs is not set:
   * try again in a minute). Repeating an erasure removes nothing more, so it is retried.
   */
  async eraseAgent(agentId: number, opts: CallOptions = {}): Promise<ErasureReceipt> {
    return this.send("DELETE", `/api/v1/agents/${agentId}`, true, opts, (a) =>
      this.api.DELETE("/api/v1/agents/{agentId}", { params: { path: { agentId }, query: { erase: true, confirm: String(agentId) } }, ...a }),
    );
  }

  /**
   * Erases one conversation of the agent (its messages, watermark, recall chunks, context
   * summaries, the runs that covered it and its events; irreversible) and returns the
   * receipt, whose `derived` lists the memory file versions those runs wrote, for review.
   */
  async eraseConversation(agentId: number, conversationId: string, opts: CallOptions = {}): Promise<ConversationErasureReceipt> {
    return this.send("DELETE", `/api/v1/agents/${agentId}/conversations/${conversationId}`, true, opts, (a) =>
      this.api.DELETE("/api/v1/agents/{agentId}/conversations/{conversationId}", {
        params: { path: { agentId, conversationId }, query: { erase: true, confirm: conversationId } },
        ...a,
      }),
    );
  }
}

/**
 * Deadline is one attempt's timeout and the caller's signal as one signal: it aborts with a
 * TimeoutError when the time runs out, with the caller's reason when the caller aborts. A
 * stream kept (keep) or an upload touching it moves the time on with every chunk: for a
 * transfer the timeout is how long it may stall.
 */
class Deadline {
  readonly signal: AbortSignal;
  private readonly ctl = new AbortController();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timedOut = false;
  private kept = false;
  private readonly onAbort: () => void;

  constructor(
    private readonly ms: number,
    private readonly outer: AbortSignal | null | undefined,
    private readonly method: string,
    private readonly path: string,
  ) {
    this.signal = this.ctl.signal;
    this.onAbort = () => this.ctl.abort(outer?.reason);
    if (outer?.aborted) this.onAbort();
    else outer?.addEventListener("abort", this.onAbort, { once: true });
    this.touch();
  }

  /** Starts the time again. */
  touch(): void {
    if (!(this.ms > 0 && Number.isFinite(this.ms)) || this.signal.aborted) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timedOut = true;
      this.ctl.abort(new TimeoutError(this.method, this.path, this.ms, this.kept ? "no byte" : "no answer"));
    }, this.ms);
  }

  /** The attempt is over, unless a stream keeps it (then the stream's end is). */
  done(): void {
    if (!this.kept) this.release();
  }

  private release(): void {
    clearTimeout(this.timer);
    this.outer?.removeEventListener("abort", this.onAbort);
  }

  /** keep hands the deadline to a stream read after the attempt: each chunk starts the time again, the stream's end releases it. */
  keep(): TransformStream<Uint8Array, Uint8Array> {
    this.kept = true;
    this.touch();
    return new TransformStream<Uint8Array, Uint8Array>({
      transform: (chunk, c) => {
        this.touch();
        c.enqueue(chunk);
      },
      flush: () => this.release(),
    });
  }

  /** touching passes an upload through, each chunk starting the time again. */
  touching(): TransformStream<Uint8Array, Uint8Array> {
    return new TransformStream<Uint8Array, Uint8Array>({
      transform: (chunk, c) => {
        this.touch();
        c.enqueue(chunk);
      },
    });
  }

  /** explain turns what an attempt threw into the error to report: a TimeoutError when the time ran out, a ConnectionError for fetch's TypeError. */
  explain(err: unknown): unknown {
    if (this.timedOut) return this.signal.reason;
    if (this.outer?.aborted) return err;
    if (err instanceof TypeError) return new ConnectionError(this.method, this.path, err.message || "fetch failed", { cause: err });
    return err;
  }
}

/** checkBundle passes a bundle through and errors at its end when its last line is not the checksums line. */
function checkBundle(): TransformStream<Uint8Array, Uint8Array> {
  const nl = 10;
  const max = 4096;
  let line: number[] = [];
  let rest: number[] = [];
  let long = false;
  let bytes = 0;
  return new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, c) {
      bytes += chunk.byteLength;
      let from = 0;
      for (let i = chunk.indexOf(nl); i >= 0; i = chunk.indexOf(nl, from)) {
        line = long || rest.length + i - from > max ? [] : rest.concat(Array.from(chunk.subarray(from, i)));
        rest = [];
        long = false;
        from = i + 1;
      }
      if (!long) {
        const tail = chunk.subarray(from);
        if (rest.length + tail.byteLength > max) {
          rest = [];
          long = true;
        } else rest = rest.concat(Array.from(tail));
      }
      c.enqueue(chunk);
    },
    flush(c) {
      let ok = false;
      if (!long && rest.length === 0 && line.length > 0) {
        try {
          const last = JSON.parse(new TextDecoder().decode(new Uint8Array(line))) as { kind?: unknown; all?: unknown };
          ok = last.kind === "checksums" && typeof last.all === "string" && last.all !== "";
        } catch {
          ok = false;
        }
      }
      if (!ok) c.error(new IncompleteBundleError(bytes));
    },
  });
}

/** attachmentName reads Content-Disposition's filename. */
function attachmentName(h: Headers): string | undefined {
  const m = /filename="?([^";]+)"?/.exec(h.get("Content-Disposition") ?? "");
  return m?.[1];
}

/** backoff is the wait before retry number attempt (1-based), or the server's Retry-After, capped at the policy's maximum. */
function backoff(policy: RetryPolicy, attempt: number, after: number | undefined): number {
  if (after !== undefined) return Math.min(after, policy.maxMs);
  const d = Math.min(policy.baseMs * 2 ** (attempt - 1), policy.maxMs);
  // Full jitter over the upper half: retries of many clients spread out.
  return d / 2 + Math.random() * (d / 2);
}

/** The Retry-After of the answer each error was made from (any status may carry one). */
const retryAfter = new WeakMap<MateMemoryError, number | undefined>();

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
  const err = errorFor(status, code, msg, method, path, response.headers);
  retryAfter.set(err, retryAfterMs(response.headers));
  return err;
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
