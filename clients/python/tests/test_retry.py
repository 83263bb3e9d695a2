"""Retries only where safe, errors as classes: against httpx's MockTransport."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from matememory import AsyncMateMemory, MateMemory, MateMemoryError, RateLimitedError, Retry, UnavailableError

FILE = {"agentId": 1, "filename": "a.md", "content": "x", "fileSize": 1, "enabled": True, "sortOrder": 0,
        "version": 1, "createTime": "", "updateTime": ""}
FAST = Retry(attempts=4, base=0.001, max=0.005)


def answers(statuses: list[int], seen: list[str]) -> httpx.MockTransport:
    def handle(req: httpx.Request) -> httpx.Response:
        seen.append(req.method)
        s = statuses[min(len(seen) - 1, len(statuses) - 1)]
        body = {"code": s, "data": FILE} if s < 300 else {"code": s, "msg": f"status {s}"}
        return httpx.Response(s, json=body, headers={"Retry-After": "0"})
    return httpx.MockTransport(handle)


@pytest.mark.parametrize("statuses,method,want_calls,want", [
    ([429, 503, 200], "read", 3, None),             # a GET is retried on 429 and 503
    ([503, 200], "write_any", 1, UnavailableError),  # an unconditional PUT is not repeated after a 503
    ([503, 200], "write_versioned", 2, None),        # with expected_version a repeat cannot apply twice
    ([429], "store", 4, RateLimitedError),          # 429 is retried even for a POST, then raised
    ([500], "read", 1, MateMemoryError),             # a 500 is not temporary
])
def test_retry(statuses: list[int], method: str, want_calls: int, want: type[Exception] | None) -> None:
    seen: list[str] = []
    with MateMemory("http://mem.test", retry=FAST, transport=answers(statuses, seen)) as c:
        def call() -> object:
            if method == "read":
                return c.read_file(1, "a.md")
            if method == "write_any":
                return c.write_file(1, "a.md", "x")
            if method == "write_versioned":
                return c.write_file(1, "a.md", "x", expected_version=1)
            return c.store_messages(1, "c", [{"role": "user", "content": "hi"}])
        if want is None:
            call()
        else:
            with pytest.raises(want) as err:
                call()
            if isinstance(err.value, RateLimitedError):
                assert err.value.retry_after == 0.0
    assert len(seen) == want_calls


def test_transport_error_retried_only_when_safe() -> None:
    seen: list[str] = []

    def handle(req: httpx.Request) -> httpx.Response:
        seen.append(req.method)
        if len(seen) == 1:
            raise httpx.ConnectError("refused", request=req)
        return httpx.Response(200, json={"code": 200, "data": FILE})

    with MateMemory("http://mem.test", retry=FAST, transport=httpx.MockTransport(handle)) as c:
        assert c.read_file(1, "a.md")["content"] == "x"
        assert seen == ["GET", "GET"]
        seen.clear()
        with pytest.raises(httpx.ConnectError):
            c.execute_tool(1, "write_workspace_memory_file", {"filename": "a.md", "content": "x"})
        assert seen == ["POST"]


def test_not_the_envelope() -> None:
    t = httpx.MockTransport(lambda req: httpx.Response(200, text="<html>proxy</html>"))
    with MateMemory("http://mem.test", transport=t) as c, pytest.raises(MateMemoryError, match="not the API's JSON envelope"):
        c.read_file(1, "a.md")


def test_requests_as_sent() -> None:
    sent: list[httpx.Request] = []

    def handle(req: httpx.Request) -> httpx.Response:
        sent.append(req)
        return httpx.Response(200, json={"code": 200, "data": FILE})

    with MateMemory("http://mem.test/", "k", transport=httpx.MockTransport(handle)) as c:
        c.write_file(1, "memory/2026 04.md", "x", expected_version=0)
        c.execute_tool(1, "read_workspace_memory_file", '{"filename": "a.md"}', tool_call_id="call_9")
    put, tool = sent
    assert put.url.raw_path == b"/api/v1/agents/1/files/memory/2026%2004.md"
    assert put.headers["If-Match"] == '"0"' and put.headers["Authorization"] == "Bearer k"
    assert json.loads(put.content) == {"content": "x"}
    assert tool.content == b'{"filename": "a.md"}' and tool.headers["X-Tool-Call-Id"] == "call_9"


def test_async_retry() -> None:
    seen: list[str] = []

    async def run() -> None:
        async with AsyncMateMemory("http://mem.test", retry=FAST, transport=answers([503, 200], seen)) as c:
            assert (await c.read_file(1, "a.md"))["version"] == 1

    asyncio.run(run())
    assert len(seen) == 2


def test_wait_run_waits_through_deferred_and_retried_runs() -> None:
    answers: list[list[dict[str, str]]] = [
        [],
        [{"runId": "r1", "status": "deferred", "reason": "cooldown"}],
        [{"runId": "r2", "status": "failed", "reason": "model timeout"}, {"runId": "r1", "status": "deferred"}],
        [{"runId": "r3", "status": "completed"}, {"runId": "r2", "status": "failed"}],
    ]
    seen: list[str] = []

    def handle(req: httpx.Request) -> httpx.Response:
        seen.append(str(req.url))
        runs = answers[min(len(seen) - 1, len(answers) - 1)]
        return httpx.Response(200, json={"code": 200, "data": {"agentId": 1, "count": len(runs), "runs": runs}})

    with MateMemory("http://mem.test", transport=httpx.MockTransport(handle)) as c:
        # Integer intervals are accepted as they would be typed by hand.
        run = c.wait_run(1, "evt-1", interval=0, max_interval=0)
    assert run["runId"] == "r3"
    assert len(seen) == 4 and "eventId=evt-1" in seen[0]

    seen.clear()
    answers[:] = [[{"runId": "r1", "status": "deferred", "reason": "cooldown"}]]
    with MateMemory("http://mem.test", transport=httpx.MockTransport(handle)) as c, \
            pytest.raises(TimeoutError, match="last run deferred: cooldown"):
        c.wait_run(1, "evt-1", timeout=0.05, interval=0.01)
