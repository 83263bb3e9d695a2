"""What the sync and the async client share: each operation as a request, the envelope, the
retry rule, a bundle's framing. No network I/O here (an export's file and an import's are
opened here)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, BinaryIO
from urllib.parse import quote

import httpx

from .errors import MateMemoryError, RateLimitedError, error_for
from .models import EventConversationCompletedEvent, LedgerRun, MessageIn, SearchBody, WindowContextBody, WindowRecallRequest

#: Tool-call errors a model made (bad arguments, unknown file, stale version, too big): the
#: tool round hands their message back to the model instead of raising.
MODEL_ERRORS = (400, 404, 409, 413, 415)


@dataclass(frozen=True)
class Retry:
    """How a client retries: transport errors, 429, 502, 503 and 504, and only requests safe
    to repeat (429 always: the server answers it before doing anything)."""

    attempts: int = 4
    """Total tries (1 = no retry)."""
    base: float = 0.2
    """First backoff in seconds, doubled each retry with jitter."""
    max: float = 5.0
    """Longest backoff, and the cap on a server's Retry-After, in seconds."""

    def backoff(self, attempt: int, after: float | None) -> float:
        if after is not None:
            return min(after, self.max)
        d: float = min(self.base * 2 ** (attempt - 1), self.max)
        # Full jitter over the upper half: retries of many clients spread out.
        return d / 2 + random.random() * d / 2


@dataclass
class Call:
    """One request: safe means repeating it cannot apply it twice."""

    method: str
    path: str
    safe: bool
    params: dict[str, str | int] = field(default_factory=dict)
    body: Any = None
    raw: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: A body sent as it is (an agent bundle), of content_type.
    data: Any = None
    content_type: str = "application/json"

    def request(self, client: httpx.Client | httpx.AsyncClient, timeout: Any = None) -> httpx.Request:
        headers = dict(self.headers)
        content: Any = None
        if self.data is not None:
            content = self.data
        elif self.raw is not None:
            content = self.raw
        elif self.body is not None:
            content = json.dumps(self.body, ensure_ascii=False)
        if content is not None:
            headers["Content-Type"] = self.content_type
        # httpx's default is its client's timeout; a client made by with_options sets its own.
        extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        return client.build_request(self.method, self.path, params=self.params or None, content=content, headers=headers, **extra)


def decode(call: Call, resp: httpx.Response) -> Any:
    """The envelope's data, or the error's class."""
    try:
        env = resp.json()
    except ValueError:
        env = None
    code = resp.status_code
    msg = ""
    if isinstance(env, dict):
        if isinstance(env.get("code"), int):
            code = env["code"]
        if isinstance(env.get("msg"), str):
            msg = env["msg"]
    if resp.status_code < 300 and code < 300 and isinstance(env, dict) and "data" in env:
        return env["data"]
    if not msg:
        msg = resp.text.strip()[:512] or resp.reason_phrase or f"HTTP {resp.status_code}"
    status = resp.status_code
    if status < 300:
        # An error envelope behind a 2xx, or a 2xx without the envelope, is still an error.
        status = code if code >= 300 else 500
        if code < 300:
            msg = f"response is not the API's JSON envelope: {msg}"
    raise error_for(status, code, msg, call.method, call.path, resp.headers)


def should_retry(call: Call, attempt: int, retry: Retry, err: Exception) -> bool:
    if attempt >= retry.attempts:
        return False
    if isinstance(err, MateMemoryError):
        return err.status == 429 or (call.safe and err.temporary)
    return call.safe and isinstance(err, httpx.TransportError)


def wait_of(err: Exception) -> float | None:
    """The server's Retry-After of a 429."""
    return err.retry_after if isinstance(err, RateLimitedError) else None


def is_final(run: LedgerRun) -> bool:
    """Nothing more will happen for the run's event: completed, skipped, refused, or failed
    for good (dead-lettered)."""
    status = run.get("status")
    if status in ("completed", "skipped", "refused"):
        return True
    return status == "failed" and "dead-lettered" in (run.get("reason") or "")


def seg(s: str) -> str:
    return quote(s, safe="")


def file_path(agent_id: int, filename: str) -> str:
    # A filename's '/' separate folders; each segment is escaped.
    return f"/api/v1/agents/{agent_id}/files/" + "/".join(quote(p, safe="") for p in filename.split("/"))


# The operations, one function each.


def store_messages(agent_id: int, conversation_id: str, messages: list[MessageIn]) -> Call:
    if not messages:
        raise ValueError("matememory: store_messages needs at least one message")
    return Call("POST", f"/api/v1/conversations/{seg(conversation_id)}/messages", False,
                body={"agentId": agent_id, "messages": messages})


def publish_completion(event: EventConversationCompletedEvent) -> Call:
    if not event.get("eventId"):
        event["eventId"] = str(uuid.uuid4())
    if not event.get("occurredAt"):
        event["occurredAt"] = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
    return Call("POST", "/api/v1/events/conversation-completed", True, body=event)


def runs(agent_id: int, kind: str | None, event_id: str | None, limit: int | None) -> Call:
    params: dict[str, str | int] = {}
    if kind:
        params["kind"] = kind
    if event_id:
        params["eventId"] = event_id
    if limit:
        params["limit"] = limit
    return Call("GET", f"/api/v1/memory/{agent_id}/runs", True, params=params)


def context(agent_id: int, conversation_id: str, user_message: str, system_prompt: str | None, model: str | None,
            max_input_tokens: int | None, messages: list[Any] | None, recall: bool | WindowRecallRequest,
            retry: bool = False) -> Call:
    body: WindowContextBody = {"userMessage": user_message}
    if system_prompt is not None:
        body["systemPrompt"] = system_prompt
    if model:
        body["model"] = model
    if max_input_tokens:
        body["maxInputTokens"] = max_input_tokens
    if messages is not None:
        body["messages"] = messages
    if recall:
        body["recall"] = {} if recall is True else recall
    path = f"/api/v1/agents/{agent_id}/conversations/{seg(conversation_id)}/context" + ("/retry" if retry else "")
    # Safe to repeat: it changes nothing but caches, and the memory flush it may request has an
    # id made of the agent, conversation and last evicted message (JetStream deduplicates).
    return Call("POST", path, True, body=body)


def tools(language: str | None) -> Call:
    return Call("GET", "/api/v1/tools", True, params={"language": language} if language else {})


def execute_tool(agent_id: int, name: str, args: str | dict[str, Any] | None, tool_call_id: str | None) -> Call:
    # The model's arguments go as it wrote them: a malformed one gets the server's message.
    raw = args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)
    headers = {"X-Tool-Call-Id": tool_call_id} if tool_call_id else {}
    return Call("POST", f"/api/v1/agents/{agent_id}/tools/{seg(name)}", False, raw=raw.strip() or "{}", headers=headers)


def search(agent_id: int, query: str | SearchBody) -> Call:
    body: SearchBody = {"query": query} if isinstance(query, str) else query
    return Call("POST", f"/api/v1/agents/{agent_id}/memory/search", True, body=body)


def list_files(agent_id: int, prefix: str | None) -> Call:
    return Call("GET", f"/api/v1/agents/{agent_id}/files", True, params={"prefix": prefix} if prefix else {})


def read_file(agent_id: int, filename: str) -> Call:
    return Call("GET", file_path(agent_id, filename), True)


def write_file(agent_id: int, filename: str, content: str, expected_version: int | None) -> Call:
    # With a version a repeat cannot apply twice (it conflicts), so it is retried.
    headers = {} if expected_version is None else {"If-Match": f'"{expected_version}"'}
    return Call("PUT", file_path(agent_id, filename), expected_version is not None, body={"content": content}, headers=headers)


def tool_calls(message: Any) -> list[tuple[str, str, str]]:
    """(id, name, arguments) of each tool call of an assistant message: a dict as OpenAI's
    JSON has it, or an object with attributes as the openai package returns it."""
    get = (lambda o, k: o.get(k)) if isinstance(message, dict) else getattr
    out = []
    for c in get(message, "tool_calls") or []:
        g = (lambda o, k: o.get(k)) if isinstance(c, dict) else getattr
        fn = g(c, "function")
        gf = (lambda o, k: o.get(k)) if isinstance(fn, dict) else getattr
        out.append((str(g(c, "id")), str(gf(fn, "name")), str(gf(fn, "arguments") or "")))
    return out


def tool_message(call_id: str, result: Any) -> dict[str, str]:
    return {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result, ensure_ascii=False)}


# Bundles and erasure (docs/bundle.md).

BUNDLE_CONTENT_TYPE = "application/x-ndjson"
CHUNK = 64 << 10


def export_agent(agent_id: int, history: bool, messages: bool, ledger: bool) -> Call:
    params: dict[str, str | int] = {k: "true" for k, on in (("history", history), ("messages", messages), ("ledger", ledger)) if on}
    return Call("GET", f"/api/v1/agents/{agent_id}/export", True, params=params)


def import_agent(agent_id: int, mode: str | None, dry_run: bool, data: Any, replayable: bool) -> Call:
    params: dict[str, str | int] = {}
    if mode:
        params["mode"] = mode
    if dry_run:
        params["dryRun"] = "true"
    # The same bundle twice changes nothing, so a body that can be sent again is retried.
    return Call("POST", f"/api/v1/agents/{agent_id}/import", replayable, params=params, data=data,
                content_type=BUNDLE_CONTENT_TYPE)


def erase_agent(agent_id: int) -> Call:
    # Repeating an erasure removes nothing more: retried as a read is.
    return Call("DELETE", f"/api/v1/agents/{agent_id}", True, params={"erase": "true", "confirm": str(agent_id)})


def erase_conversation(agent_id: int, conversation_id: str) -> Call:
    return Call("DELETE", f"/api/v1/agents/{agent_id}/conversations/{seg(conversation_id)}", True,
                params={"erase": "true", "confirm": conversation_id})


def attachment_name(headers: httpx.Headers) -> str | None:
    """Content-Disposition's filename."""
    m = re.search(r'filename="?([^";]+)"?', headers.get("content-disposition", ""))
    return m.group(1) if m else None


class LastLine:
    """Keeps the last complete line of a stream, up to a checksums line's size, to tell a
    bundle that ends with its checksums line from one cut short."""

    MAX = 4096

    def __init__(self) -> None:
        self.line = b""
        self.rest = b""
        self.long = False
        self.received = 0

    def feed(self, chunk: bytes) -> None:
        self.received += len(chunk)
        *done, tail = chunk.split(b"\n")
        for part in done:
            self.line = b"" if self.long or len(self.rest) + len(part) > self.MAX else self.rest + part
            self.rest, self.long = b"", False
        if not self.long:
            self.rest += tail
            if len(self.rest) > self.MAX:
                self.rest, self.long = b"", True

    def complete(self) -> bool:
        if self.long or self.rest or not self.line:
            return False
        try:
            last = json.loads(self.line)
        except ValueError:
            return False
        return isinstance(last, dict) and last.get("kind") == "checksums" and bool(last.get("all"))


def bundle_body(bundle: Any) -> tuple[Callable[[], Any], bool]:
    """What an import sends for bundle, made anew for each attempt, and whether it can be sent
    again: bytes and str (the bundle itself) and a path can; a file object or an iterable of
    bytes is read once."""
    if isinstance(bundle, bytes):
        return (lambda: bundle), True
    if isinstance(bundle, str):
        data = bundle.encode()
        return (lambda: data), True
    if isinstance(bundle, os.PathLike):
        path = os.fspath(bundle)
        return (lambda: file_chunks(open(path, "rb"))), True
    if hasattr(bundle, "read"):
        return (lambda: iter(lambda: bundle.read(CHUNK), b"")), False
    return (lambda: bundle), False


def file_chunks(f: BinaryIO) -> Iterator[bytes]:
    with f:
        while chunk := f.read(CHUNK):
            yield chunk


async def async_body(body: Any) -> AsyncIterator[bytes]:
    """An import's body for httpx's AsyncClient, which streams async iterables only."""
    if hasattr(body, "__aiter__"):
        async for chunk in body:
            yield chunk
        return
    for chunk in body:
        yield chunk


@contextlib.contextmanager
def sink(to: Any) -> Iterator[BinaryIO]:
    """Where an export writes: a path gets the bundle under a temporary name beside it, renamed
    to the path once complete (a failed export leaves no file that looks whole); a file object
    is written as it is."""
    if not isinstance(to, (str, os.PathLike)):
        yield to
        return
    path = os.fspath(to)
    part = path + ".part"
    try:
        with open(part, "wb") as f:
            yield f
        os.replace(part, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(part)
        raise


@dataclass(frozen=True)
class Exported:
    """What export_agent wrote."""

    size: int
    """The bundle's size in bytes."""
    filename: str | None
    """The server's suggested file name (agent-N-TIME.ndjson)."""
