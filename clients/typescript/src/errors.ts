// Errors of the API as classes, so a chat service can `instanceof` them instead of reading
// status codes. Every class extends MateMemoryError, which carries what the server said.

/** An error answer of the API: the HTTP status and the envelope's code and msg. */
export class MateMemoryError extends Error {
  /** The HTTP status code. */
  readonly status: number;
  /** The envelope's code (normally equal to status). */
  readonly code: number;
  /** What was wrong and, mostly, what to do; meant for people (and for a model, after a tool call). */
  readonly msg: string;
  /** The request, for logs. */
  readonly method: string;
  readonly path: string;

  constructor(status: number, code: number, msg: string, method: string, path: string) {
    super(`matememory: ${method} ${path}: ${code} ${msg}`);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.msg = msg;
    this.method = method;
    this.path = path;
  }

  /** Whether the same request may succeed later unchanged (rate limited, briefly unavailable). */
  get temporary(): boolean {
    return [408, 429, 502, 503, 504].includes(this.status);
  }
}

/** 400 (and 415): the request is invalid and will stay so; msg says why. */
export class InvalidRequestError extends MateMemoryError {}
/** 401: the API key is missing or unknown. */
export class UnauthorizedError extends MateMemoryError {}
/** 403: the key may not act for that agent (or needs admin). */
export class ForbiddenError extends MateMemoryError {}
/** 404: no such file, conversation, run or route. */
export class NotFoundError extends MateMemoryError {}
/** 409: the file changed since the version sent (read it again and redo the change), or a create-only write found it there. */
export class ConflictError extends MateMemoryError {}
/**
 * 412: `If-None-Match: *` found the file (PUT …/files/{filename}, documented on writeFile and
 * mateclawWriteFile). No typed method sends that header (writeFile with
 * `expectedVersion: 0` creates with `If-Match: 0` and gets a ConflictError); a raw call through `mem.api` / `mem.http` that does can get this.
 */
export class PreconditionFailedError extends MateMemoryError {}
/** 413: the body or the assembled context is over its limit. */
export class TooLargeError extends MateMemoryError {}
/** 429: rate limited; the client already waited and retried as its retry policy allows. */
export class RateLimitedError extends MateMemoryError {
  /** The server's Retry-After in milliseconds, when it sent one. */
  readonly retryAfterMs: number | undefined;
  constructor(status: number, code: number, msg: string, method: string, path: string, retryAfterMs: number | undefined) {
    super(status, code, msg, method, path);
    this.retryAfterMs = retryAfterMs;
  }
}
/** 502, 503 or 504: JetStream or the database briefly unavailable. */
export class UnavailableError extends MateMemoryError {}

/** errorFor builds the class of error that matches status. */
export function errorFor(status: number, code: number, msg: string, method: string, path: string, headers: Headers): MateMemoryError {
  switch (status) {
    case 400:
    case 415:
      return new InvalidRequestError(status, code, msg, method, path);
    case 401:
      return new UnauthorizedError(status, code, msg, method, path);
    case 403:
      return new ForbiddenError(status, code, msg, method, path);
    case 404:
      return new NotFoundError(status, code, msg, method, path);
    case 409:
      return new ConflictError(status, code, msg, method, path);
    case 412:
      return new PreconditionFailedError(status, code, msg, method, path);
    case 413:
      return new TooLargeError(status, code, msg, method, path);
    case 429:
      return new RateLimitedError(status, code, msg, method, path, retryAfterMs(headers));
    case 502:
    case 503:
    case 504:
      return new UnavailableError(status, code, msg, method, path);
  }
  return new MateMemoryError(status, code, msg, method, path);
}

/** retryAfterMs reads a Retry-After header (seconds or an HTTP date). */
export function retryAfterMs(headers: Headers): number | undefined {
  const v = headers.get("Retry-After");
  if (v === null || v.trim() === "") return undefined;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : Math.max(t - Date.now(), 0);
}

/**
 * The API could not be reached: connection refused or reset, DNS, TLS, the network gone (what
 * fetch rejects with as a bare TypeError is its `cause`). It is no answer of the API, so it is
 * not a MateMemoryError. Retried, like a 503, for requests that are safe to repeat.
 */
export class ConnectionError extends Error {
  /** The request, for logs. */
  readonly method: string;
  readonly path: string;

  constructor(method: string, path: string, message: string, options?: { cause?: unknown }) {
    super(`matememory: ${method} ${path}: ${message}`, options);
    this.name = new.target.name;
    this.method = method;
    this.path = path;
  }
}

/** No answer within the timeout (the client's `timeoutMs`, or the call's): a ConnectionError, retried as one. */
export class TimeoutError extends ConnectionError {
  /** The timeout that ran out, in ms. */
  readonly timeoutMs: number;

  constructor(method: string, path: string, timeoutMs: number, what = "no answer") {
    super(method, path, `${what} within ${timeoutMs} ms`);
    this.timeoutMs = timeoutMs;
  }
}

/** An export ended without the bundle's checksums line: what was received is incomplete (any import refuses it); export again. */
export class IncompleteBundleError extends Error {
  /** The bytes received. */
  readonly bytes: number;

  constructor(bytes: number) {
    super(`matememory: the export ended without its checksums line after ${bytes} bytes: the bundle is incomplete, export again`);
    this.name = new.target.name;
    this.bytes = bytes;
  }
}
