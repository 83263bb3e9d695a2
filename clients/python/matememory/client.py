"""MateMemory's Python clients: MateMemory (sync) and AsyncMateMemory (asyncio), over httpx.

Their payloads and answers are the TypedDicts of matememory.models, generated from the served
OpenAPI document; this module adds what a chat service would otherwise write itself: retries
where they are safe, waiting for a run, the tool round, and errors as classes.
"""

from __future__ import annotations

import asyncio
import copy
import os
import time
from collections.abc import AsyncIterable, Callable, Iterable
from typing import IO, Any, Literal, cast

import httpx

from . import _core
from ._core import Call, Exported, Retry
from .errors import IncompleteBundleError, MateMemoryError, NotFoundError
from .models import (
    BundleImportReport,
    ErasureConversationReceipt,
    ErasureReceipt,
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

__all__ = ["AsyncMateMemory", "Bundle", "Exported", "ImportMode", "MateMemory", "Retry", "is_final"]

is_final = _core.is_final

RunKind = Literal["summarize", "emergence"]

#: "empty" (the default): the agent must hold nothing yet (an id never used, or exactly this
#: bundle: 0 changes), else ConflictError; "merge": keep what the agent has, add what it lacks,
#: list the conflicts. There is no replace: erase the agent (erase_agent), then import.
ImportMode = Literal["empty", "merge"]

#: A bundle to import: the bundle itself (bytes, or str), a file (a pathlib.Path: a str is the
#: bundle, not a path), a binary file object, or an iterable of bytes (read once: not retried).
Bundle = bytes | str | os.PathLike[str] | IO[bytes] | Iterable[bytes]

#: Where an export goes: a path (str or PathLike; written under NAME.part, renamed once the
#: bundle is complete) or a binary file object.
ExportTarget = str | os.PathLike[str] | IO[bytes]

_UNSET: Any = object()


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
        """The httpx client, for the operations this class does not wrap (no retries; errors
        are httpx's: call raise_for_status, or decode the envelope yourself)."""
        self._timeout: Any = None

    def with_options(self, *, timeout: float | None = _UNSET, retry: Retry | None = None) -> MateMemory:
        """A client for some calls with another timeout (seconds, None for none) or retry
        policy: it shares this one's connections (close this one, not it).

            mem.with_options(timeout=5, retry=Retry(attempts=1)).read_file(agent, name)"""
        c = copy.copy(self)
        if timeout is not _UNSET:
            c._timeout = httpx.Timeout(timeout)
        if retry is not None:
            c.retry = retry
        return c

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> MateMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, call: Call) -> Any:
        for attempt in range(1, max(self.retry.attempts, 1) + 1):
            try:
                return _core.decode(call, self.http.send(call.request(self.http, self._timeout)))
            except (MateMemoryError, httpx.TransportError) as err:
                if not _core.should_retry(call, attempt, self.retry, err):
                    raise
                time.sleep(self.retry.backoff(attempt, _core.wait_of(err)))
        raise AssertionError("unreachable")

    def _open(self, call: Call, body: Callable[[], Any] | None = None) -> httpx.Response:
        """Sends call, with body() anew for each attempt, retrying as the policy allows until a
        2xx response starts; its body is the caller's to read and close. A body that cannot be
        sent again (call not safe) is sent once."""
        for attempt in range(1, max(self.retry.attempts, 1) + 1):
            if body is not None:
                call.data = body()
            try:
                resp = self.http.send(call.request(self.http, self._timeout), stream=True)
                if resp.status_code < 300:
                    return resp
                try:
                    resp.read()
                    _core.decode(call, resp)
                finally:
                    resp.close()
                raise AssertionError("an error status decoded as data")
            except (MateMemoryError, httpx.TransportError) as err:
                if body is not None and not call.safe or not _core.should_retry(call, attempt, self.retry, err):
                    raise
                time.sleep(self.retry.backoff(attempt, _core.wait_of(err)))
        raise AssertionError("unreachable")

    def export_agent(self, agent_id: int, to: ExportTarget, *, history: bool = False, messages: bool = False,
                     ledger: bool = False) -> Exported:
        """Streams the agent's bundle (GET .../export) to a path or a binary file object, and
        returns once it is all written; memory stays bounded whatever the agent's size. A bundle
        without its checksums line (the server failed after the first byte) raises
        IncompleteBundleError (a path is then not created); an agent never used NotFoundError.
        Retried as a read until the bundle starts. The timeout bounds each read, not the whole."""
        resp = self._open(_core.export_agent(agent_id, history, messages, ledger))
        tail = _core.LastLine()
        try:
            with _core.sink(to) as out:
                for chunk in resp.iter_bytes(_core.CHUNK):
                    out.write(chunk)
                    tail.feed(chunk)
                if not tail.complete():
                    raise IncompleteBundleError(tail.received)
        finally:
            resp.close()
        return Exported(tail.received, _core.attachment_name(resp.headers))

    def import_agent(self, agent_id: int, bundle: Bundle, *, mode: ImportMode | None = None,
                     dry_run: bool = False) -> BundleImportReport:
        """Imports a bundle (the export's bytes, unchanged; see Bundle) into the agent (POST
        .../import) and returns the report. The whole bundle is validated before anything is
        written, then applied in one transaction: an invalid bundle raises InvalidRequestError
        naming the line, mode "empty" meeting an agent that holds something ConflictError.
        Importing the same bundle again changes nothing, so bytes, str and a path are retried
        as a read is; a file object or an iterable is sent once."""
        body, replayable = _core.bundle_body(bundle)
        call = _core.import_agent(agent_id, mode, dry_run, None, replayable)
        resp = self._open(call, body)
        try:
            resp.read()
            return cast(BundleImportReport, _core.decode(call, resp))
        finally:
            resp.close()

    def erase_agent(self, agent_id: int) -> ErasureReceipt:
        """Erases every trace of the agent from every store (DELETE .../agents/{id}?erase=true,
        confirmed with its id; irreversible) and returns the receipt. The agent's own key or an
        admin key; ConflictError while an extraction holds the agent (try again in a minute).
        Repeating an erasure removes nothing more, so it is retried."""
        return cast(ErasureReceipt, self._send(_core.erase_agent(agent_id)))

    def erase_conversation(self, agent_id: int, conversation_id: str) -> ErasureConversationReceipt:
        """Erases one conversation of the agent (messages, watermark, recall chunks, context
        summaries, the runs that covered it and its events; irreversible) and returns the
        receipt, whose derived lists the memory file versions those runs wrote, for review."""
        return cast(ErasureConversationReceipt, self._send(_core.erase_conversation(agent_id, conversation_id)))

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
        self._timeout: Any = None

    def with_options(self, *, timeout: float | None = _UNSET, retry: Retry | None = None) -> AsyncMateMemory:
        """See MateMemory.with_options."""
        c = copy.copy(self)
        if timeout is not _UNSET:
            c._timeout = httpx.Timeout(timeout)
        if retry is not None:
            c.retry = retry
        return c

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> AsyncMateMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, call: Call) -> Any:
        for attempt in range(1, max(self.retry.attempts, 1) + 1):
            try:
                return _core.decode(call, await self.http.send(call.request(self.http, self._timeout)))
            except (MateMemoryError, httpx.TransportError) as err:
                if not _core.should_retry(call, attempt, self.retry, err):
                    raise
                await asyncio.sleep(self.retry.backoff(attempt, _core.wait_of(err)))
        raise AssertionError("unreachable")

    async def _open(self, call: Call, body: Callable[[], Any] | None = None) -> httpx.Response:
        """See MateMemory._open."""
        for attempt in range(1, max(self.retry.attempts, 1) + 1):
            if body is not None:
                data = body()
                call.data = data if isinstance(data, bytes) else _core.async_body(data)
            try:
                resp = await self.http.send(call.request(self.http, self._timeout), stream=True)
                if resp.status_code < 300:
                    return resp
                try:
                    await resp.aread()
                    _core.decode(call, resp)
                finally:
                    await resp.aclose()
                raise AssertionError("an error status decoded as data")
            except (MateMemoryError, httpx.TransportError) as err:
                if body is not None and not call.safe or not _core.should_retry(call, attempt, self.retry, err):
                    raise
                await asyncio.sleep(self.retry.backoff(attempt, _core.wait_of(err)))
        raise AssertionError("unreachable")

    async def export_agent(self, agent_id: int, to: ExportTarget, *, history: bool = False, messages: bool = False,
                           ledger: bool = False) -> Exported:
        """See MateMemory.export_agent."""
        resp = await self._open(_core.export_agent(agent_id, history, messages, ledger))
        tail = _core.LastLine()
        try:
            with _core.sink(to) as out:
                async for chunk in resp.aiter_bytes(_core.CHUNK):
                    out.write(chunk)
                    tail.feed(chunk)
                if not tail.complete():
                    raise IncompleteBundleError(tail.received)
        finally:
            await resp.aclose()
        return Exported(tail.received, _core.attachment_name(resp.headers))

    async def import_agent(self, agent_id: int, bundle: Bundle | AsyncIterable[bytes], *, mode: ImportMode | None = None,
                           dry_run: bool = False) -> BundleImportReport:
        """See MateMemory.import_agent (an async iterable of bytes is sent once, too)."""
        body, replayable = _core.bundle_body(bundle)
        call = _core.import_agent(agent_id, mode, dry_run, None, replayable)
        resp = await self._open(call, body)
        try:
            await resp.aread()
            return cast(BundleImportReport, _core.decode(call, resp))
        finally:
            await resp.aclose()

    async def erase_agent(self, agent_id: int) -> ErasureReceipt:
        """See MateMemory.erase_agent."""
        return cast(ErasureReceipt, await self._send(_core.erase_agent(agent_id)))

    async def erase_conversation(self, agent_id: int, conversation_id: str) -> ErasureConversationReceipt:
        """See MateMemory.erase_conversation."""
        return cast(ErasureConversationReceipt, await self._send(_core.erase_conversation(agent_id, conversation_id)))

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
