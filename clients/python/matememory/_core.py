"""What the sync and the async client share: each operation as a request, the envelope, the
retry rule. Neither does I/O here."""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any
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

    def request(self, client: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        headers = dict(self.headers)
        content: str | None = None
        if self.raw is not None:
            content = self.raw
        elif self.body is not None:
            content = json.dumps(self.body, ensure_ascii=False)
        if content is not None:
            headers["Content-Type"] = "application/json"
        return client.build_request(self.method, self.path, params=self.params or None, content=content, headers=headers)


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
