"""MateMemory's Python clients: MateMemory (sync) and AsyncMateMemory (asyncio), over httpx.

Their payloads and answers are the TypedDicts of matememory.models, generated from the served
OpenAPI document; this module adds what a chat service would otherwise write itself: retries
where they are safe, waiting for a run, the tool round, and errors as classes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Literal, cast

import httpx

from . import _core
from ._core import Call, Retry
from .errors import MateMemoryError, NotFoundError
from .models import (
    EventAck,
    EventConversationCompletedEvent,
    LedgerRun,
    Messages,
    MessageIn,
    RecallResult,
    SearchBody,
    ToolDefinition,
    WindowRecallRequest,
    WindowResult,
    WorkspaceFile,
    WorkspaceInfo,
    WriteResult,
)

__all__ = ["AsyncMateMemory", "MateMemory", "Retry", "is_final"]

is_final = _core.is_final

RunKind = Literal["summarize", "emergence"]


def _headers(api_key: str | None) -> dict[str, str]:
    h = {"Accept": "application/json", "User-Agent": "matememory-python-client"}
    if api_key:
        h["Authorization"] = f"Bearer {api_key}"
    return h


class _Wait:
    """The polling of wait_run: first and longest interval, and the deadline."""

    def __init__(self, timeout: float | None, interval: float, max_interval: float) -> None:
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.interval = interval
        self.max_interval = max(interval, max_interval)
        self.last: LedgerRun | None = None

    def next(self, event_id: str, runs: list[LedgerRun]) -> LedgerRun | float:
        """The final run, or how long to sleep before looking again (TimeoutError when none is left)."""
        for r in runs:
            if is_final(r):
                return r
        if runs:
            self.last = runs[0]
        left = float("inf") if self.deadline is None else self.deadline - time.monotonic()
        if left <= 0:
            state = f"last run {self.last['status']}: {self.last.get('reason', '')}" if self.last else "no run yet"
            raise TimeoutError(f"matememory: waiting for the outcome of {event_id} timed out ({state})")
        # float(): the caller tells a run from a wait by type, and intervals may be ints.
        wait = float(min(self.interval, left))
        self.interval = min(self.interval * 2, self.max_interval)
        return wait


class MateMemory:
    """A client of one MateMemory API (thread-safe; close it, or use it as a context manager)."""

    def __init__(self, base_url: str, api_key: str | None = None, *, retry: Retry | None = None,
                 timeout: float | None = 60.0, transport: httpx.BaseTransport | None = None) -> None:
        self.retry = retry or Retry()
        self.http = httpx.Client(base_url=base_url.rstrip("/"), headers=_headers(api_key), timeout=timeout, transport=transport)
        """The httpx client, for the operations this class does not wrap."""

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> MateMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, call: Call) -> Any:
        for attempt in range(1, max(self.retry.attempts, 1) + 1):
            try:
                return _core.decode(call, self.http.send(call.request(self.http)))
            except (MateMemoryError, httpx.TransportError) as err:
                if not _core.should_retry(call, attempt, self.retry, err):
                    raise
                time.sleep(self.retry.backoff(attempt, _core.wait_of(err)))
        raise AssertionError("unreachable")

    def store_messages(self, agent_id: int, conversation_id: str, messages: list[MessageIn]) -> Messages:
        """Appends messages, in order, to a conversation (at most 1000 in one call). Not retried."""
        return cast(Messages, self._send(_core.store_messages(agent_id, conversation_id, messages)))

    def publish_completion(self, event: EventConversationCompletedEvent) -> EventAck:
        """Publishes a completed turn; returns once JetStream stored it. Fills in eventId and
        occurredAt on event first, so publishing it again after an error is a duplicate."""
        return cast(EventAck, self._send(_core.publish_completion(event)))

    def runs(self, agent_id: int, *, kind: RunKind | None = None, event_id: str | None = None, limit: int | None = None) -> list[LedgerRun]:
        """The agent's summarize and emergence runs, newest first."""
        return cast(list[LedgerRun], self._send(_core.runs(agent_id, kind, event_id, limit))["runs"] or [])

    def wait_run(self, agent_id: int, event_id: str, *, timeout: float | None = None,
                 interval: float = 0.2, max_interval: float = 2.0) -> LedgerRun:
        """Waits until event_id has a final run in the ledger and returns it (TimeoutError after timeout seconds)."""
        if not event_id:
            raise ValueError("matememory: wait_run needs an event id")
        w = _Wait(timeout, interval, max_interval)
        while True:
            got = w.next(event_id, self.runs(agent_id, event_id=event_id, limit=50))
            if not isinstance(got, float):
                return got
            time.sleep(got)

    def context(self, agent_id: int, conversation_id: str, user_message: str, *, system_prompt: str | None = None,
                model: str | None = None, max_input_tokens: int | None = None, messages: list[Any] | None = None,
                recall: bool | WindowRecallRequest = False) -> WindowResult:
        """The messages to send to the model: system prompt with the workspace files (and, with
        recall, memory hits for the message), summary, recent history, the message last."""
        return cast(WindowResult, self._send(_core.context(agent_id, conversation_id, user_message, system_prompt, model,
                                                           max_input_tokens, messages, recall)))

    def retry_context(self, agent_id: int, conversation_id: str, user_message: str, *, system_prompt: str | None = None,
                      model: str | None = None, max_input_tokens: int | None = None) -> WindowResult:
        """The emergency compaction after the model answered context_length_exceeded."""
        return cast(WindowResult, self._send(_core.context(agent_id, conversation_id, user_message, system_prompt, model,
                                                           max_input_tokens, None, False, retry=True)))

    def tools(self, language: Literal["zh", "en"] | None = None) -> list[ToolDefinition]:
        """The memory tools in OpenAI's function format."""
        return cast(list[ToolDefinition], self._send(_core.tools(language)) or [])

    def execute_tool(self, agent_id: int, name: str, args: str | dict[str, Any] | None = None, *,
                     tool_call_id: str | None = None) -> Any:
        """Runs a tool with the model's JSON arguments (or a dict); returns its JSON output. Not retried."""
        return self._send(_core.execute_tool(agent_id, name, args, tool_call_id))

    def run_tool_round(self, agent_id: int, message: Any) -> list[dict[str, str]]:
        """Runs the tool calls of a model's assistant message (a dict, or the openai package's
        object) and returns the tool messages to append. A call the model got wrong answers
        {"error": msg} so it can correct itself; other errors are raised."""
        out = []
        for call_id, name, args in _core.tool_calls(message):
            try:
                result = self.execute_tool(agent_id, name, args, tool_call_id=call_id)
            except MateMemoryError as err:
                if err.status not in _core.MODEL_ERRORS:
                    raise
                result = {"error": err.msg}
            out.append(_core.tool_message(call_id, result))
        return out

    def search(self, agent_id: int, query: str | SearchBody) -> RecallResult:
        """Searches the agent's memory files (hybrid BM25 + embeddings)."""
        return cast(RecallResult, self._send(_core.search(agent_id, query)))

    def list_files(self, agent_id: int, prefix: str | None = None) -> list[WorkspaceInfo]:
        """The agent's files whose name starts with prefix, in injection order."""
        return cast(list[WorkspaceInfo], self._send(_core.list_files(agent_id, prefix))["files"] or [])

    def read_file(self, agent_id: int, filename: str) -> WorkspaceFile:
        """One file; its version is what write_file's expected_version expects."""
        return cast(WorkspaceFile, self._send(_core.read_file(agent_id, filename)))

    def write_file(self, agent_id: int, filename: str, content: str, *, expected_version: int | None = None) -> WriteResult:
        """Creates or replaces a file. expected_version: the version read (ConflictError if it
        changed since), 0 to create only, None to overwrite whatever is there."""
        return cast(WriteResult, self._send(_core.write_file(agent_id, filename, content, expected_version)))

    def update_file(self, agent_id: int, filename: str, change: Callable[[str], str], *, attempts: int = 5) -> WriteResult:
        """Reads a file, applies change and writes it with the version read, again on a conflict."""
        for i in range(1, attempts + 1):
            content, version = "", 0
            try:
                f = self.read_file(agent_id, filename)
                content, version = f["content"], f["version"]
            except NotFoundError:
                pass
            try:
                return self.write_file(agent_id, filename, change(content), expected_version=version)
            except MateMemoryError as err:
                if err.status != 409 or i >= attempts:
                    raise
        raise AssertionError("unreachable")


class AsyncMateMemory:
    """The asyncio client: the same methods as MateMemory, as coroutines."""

    def __init__(self, base_url: str, api_key: str | None = None, *, retry: Retry | None = None,
                 timeout: float | None = 60.0, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.retry = retry or Retry()
        self.http = httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=_headers(api_key), timeout=timeout, transport=transport)
        """The httpx client, for the operations this class does not wrap."""

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncMateMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, call: Call) -> Any:
        for attempt in range(1, max(self.retry.attempts, 1) + 1):
            try:
                return _core.decode(call, await self.http.send(call.request(self.http)))
            except (MateMemoryError, httpx.TransportError) as err:
                if not _core.should_retry(call, attempt, self.retry, err):
                    raise
                await asyncio.sleep(self.retry.backoff(attempt, _core.wait_of(err)))
        raise AssertionError("unreachable")

    async def store_messages(self, agent_id: int, conversation_id: str, messages: list[MessageIn]) -> Messages:
        """See MateMemory.store_messages."""
        return cast(Messages, await self._send(_core.store_messages(agent_id, conversation_id, messages)))

    async def publish_completion(self, event: EventConversationCompletedEvent) -> EventAck:
        """See MateMemory.publish_completion."""
        return cast(EventAck, await self._send(_core.publish_completion(event)))

    async def runs(self, agent_id: int, *, kind: RunKind | None = None, event_id: str | None = None, limit: int | None = None) -> list[LedgerRun]:
        """See MateMemory.runs."""
        return cast(list[LedgerRun], (await self._send(_core.runs(agent_id, kind, event_id, limit)))["runs"] or [])

    async def wait_run(self, agent_id: int, event_id: str, *, timeout: float | None = None,
                       interval: float = 0.2, max_interval: float = 2.0) -> LedgerRun:
        """See MateMemory.wait_run."""
        if not event_id:
            raise ValueError("matememory: wait_run needs an event id")
        w = _Wait(timeout, interval, max_interval)
        while True:
            got = w.next(event_id, await self.runs(agent_id, event_id=event_id, limit=50))
            if not isinstance(got, float):
                return got
            await asyncio.sleep(got)

    async def context(self, agent_id: int, conversation_id: str, user_message: str, *, system_prompt: str | None = None,
                      model: str | None = None, max_input_tokens: int | None = None, messages: list[Any] | None = None,
                      recall: bool | WindowRecallRequest = False) -> WindowResult:
        """See MateMemory.context."""
        return cast(WindowResult, await self._send(_core.context(agent_id, conversation_id, user_message, system_prompt, model,
                                                                 max_input_tokens, messages, recall)))

    async def retry_context(self, agent_id: int, conversation_id: str, user_message: str, *, system_prompt: str | None = None,
                            model: str | None = None, max_input_tokens: int | None = None) -> WindowResult:
        """See MateMemory.retry_context."""
        return cast(WindowResult, await self._send(_core.context(agent_id, conversation_id, user_message, system_prompt, model,
                                                                 max_input_tokens, None, False, retry=True)))

    async def tools(self, language: Literal["zh", "en"] | None = None) -> list[ToolDefinition]:
        """See MateMemory.tools."""
        return cast(list[ToolDefinition], await self._send(_core.tools(language)) or [])

    async def execute_tool(self, agent_id: int, name: str, args: str | dict[str, Any] | None = None, *,
                           tool_call_id: str | None = None) -> Any:
        """See MateMemory.execute_tool."""
        return await self._send(_core.execute_tool(agent_id, name, args, tool_call_id))

    async def run_tool_round(self, agent_id: int, message: Any) -> list[dict[str, str]]:
        """See MateMemory.run_tool_round."""
        out = []
        for call_id, name, args in _core.tool_calls(message):
            try:
                result = await self.execute_tool(agent_id, name, args, tool_call_id=call_id)
            except MateMemoryError as err:
                if err.status not in _core.MODEL_ERRORS:
                    raise
                result = {"error": err.msg}
            out.append(_core.tool_message(call_id, result))
        return out

    async def search(self, agent_id: int, query: str | SearchBody) -> RecallResult:
        """See MateMemory.search."""
        return cast(RecallResult, await self._send(_core.search(agent_id, query)))

    async def list_files(self, agent_id: int, prefix: str | None = None) -> list[WorkspaceInfo]:
        """See MateMemory.list_files."""
        return cast(list[WorkspaceInfo], (await self._send(_core.list_files(agent_id, prefix)))["files"] or [])

    async def read_file(self, agent_id: int, filename: str) -> WorkspaceFile:
        """See MateMemory.read_file."""
        return cast(WorkspaceFile, await self._send(_core.read_file(agent_id, filename)))

    async def write_file(self, agent_id: int, filename: str, content: str, *, expected_version: int | None = None) -> WriteResult:
        """See MateMemory.write_file."""
        return cast(WriteResult, await self._send(_core.write_file(agent_id, filename, content, expected_version)))

    async def update_file(self, agent_id: int, filename: str, change: Callable[[str], str], *, attempts: int = 5) -> WriteResult:
        """See MateMemory.update_file."""
        for i in range(1, attempts + 1):
            content, version = "", 0
            try:
                f = await self.read_file(agent_id, filename)
                content, version = f["content"], f["version"]
            except NotFoundError:
                pass
            try:
                return await self.write_file(agent_id, filename, change(content), expected_version=version)
            except MateMemoryError as err:
                if err.status != 409 or i >= attempts:
                    raise
        raise AssertionError("unreachable")
