"""Bundles through the client against httpx's MockTransport (the body sent as it is, retried
only when it can be sent again, a bundle cut short), and the timeout and connection failures
against local sockets: one that never answers, a port nobody listens on."""

from __future__ import annotations

import asyncio
import io
import json
import pathlib
import socket
import threading
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from matememory import AsyncMateMemory, Bundle, IncompleteBundleError, MateMemory, Retry, UnavailableError

FAST = Retry(attempts=3, base=0.001, max=0.005)
MANIFEST = b'{"kind":"manifest","format":"matememory-agent-bundle","version":1}\n'
CHECKSUMS = b'{"kind":"checksums","counts":{},"sha256":{},"all":"ab12"}\n'
BUNDLE = MANIFEST + b'{"kind":"agent","language":"en"}\n' + CHECKSUMS
REPORT = {"agentId": 3, "sourceAgentId": 7, "mode": "merge", "dryRun": True, "changes": 0, "conflictCount": 0, "conflicts": []}


def importer(seen: list[tuple[str, str, bytes]], first: int = 503) -> httpx.MockTransport:
    def handle(req: httpx.Request) -> httpx.Response:
        seen.append((str(req.url), req.headers.get("content-type", ""), req.read()))
        if len(seen) == 1 and first != 200:
            return httpx.Response(first, json={"code": first, "msg": "database unavailable"})
        return httpx.Response(200, json={"code": 200, "data": REPORT})
    return httpx.MockTransport(handle)


@pytest.mark.parametrize("kind", ["bytes", "str", "path"])
def test_import_sends_the_bundle_as_it_is_and_retries_what_it_can_resend(kind: str, tmp_path: pathlib.Path) -> None:
    seen: list[tuple[str, str, bytes]] = []
    path = tmp_path / "agent.ndjson"
    path.write_bytes(BUNDLE)
    bundles: dict[str, Bundle] = {"bytes": BUNDLE, "str": BUNDLE.decode(), "path": path}
    bundle = bundles[kind]
    with MateMemory("http://mem.test", retry=FAST, transport=importer(seen)) as c:
        rep = c.import_agent(3, bundle, mode="merge", dry_run=True)
    assert rep["sourceAgentId"] == 7
    assert len(seen) == 2, "sent again after a 503"
    for url, ctype, body in seen:
        assert url == "http://mem.test/api/v1/agents/3/import?mode=merge&dryRun=true"
        assert ctype == "application/x-ndjson"
        assert body == BUNDLE


def test_import_of_a_stream_is_sent_once() -> None:
    seen: list[tuple[str, str, bytes]] = []
    with MateMemory("http://mem.test", retry=FAST, transport=importer(seen)) as c:
        with pytest.raises(UnavailableError):
            c.import_agent(3, io.BytesIO(BUNDLE))
    assert len(seen) == 1 and seen[0][2] == BUNDLE


def test_async_import_streams_and_retries() -> None:
    seen: list[tuple[str, str, bytes]] = []

    async def go() -> None:
        async with AsyncMateMemory("http://mem.test", retry=FAST, transport=importer(seen)) as c:
            assert (await c.import_agent(3, BUNDLE))["changes"] == 0
            assert len(seen) == 2 and seen[1][2] == BUNDLE

            async def chunks() -> AsyncIterator[bytes]:
                yield BUNDLE[:10]
                yield BUNDLE[10:]
            seen.clear()
            with pytest.raises(UnavailableError):
                await c.import_agent(3, chunks())
            assert len(seen) == 1 and seen[0][2] == BUNDLE
    asyncio.run(go())


def exporter(body: bytes) -> httpx.MockTransport:
    def handle(req: httpx.Request) -> httpx.Response:
        assert req.url.path == "/api/v1/agents/7/export" and req.url.params.get("history") == "true"
        chunks = [body[i:i + 7] for i in range(0, len(body), 7)]
        return httpx.Response(200, headers={"Content-Type": "application/x-ndjson",
                                            "Content-Disposition": 'attachment; filename="agent-7-20261201T100000Z.ndjson"'},
                              stream=Chunks(chunks))
    return httpx.MockTransport(handle)


class Chunks(httpx.SyncByteStream, httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for c in self.chunks:
            yield c


def test_export_writes_a_complete_bundle_to_a_path_and_none_when_cut_short(tmp_path: pathlib.Path) -> None:
    whole = MANIFEST + b'{"kind":"file","content":"' + b"x" * 10000 + b'"}\n' + CHECKSUMS
    target = tmp_path / "agent.ndjson"
    with MateMemory("http://mem.test", transport=exporter(whole)) as c:
        ex = c.export_agent(7, target, history=True)
    assert target.read_bytes() == whole and ex.size == len(whole) and ex.filename == "agent-7-20261201T100000Z.ndjson"
    cut = tmp_path / "cut.ndjson"
    with MateMemory("http://mem.test", transport=exporter(whole[:-len(CHECKSUMS)])) as c:
        with pytest.raises(IncompleteBundleError):
            c.export_agent(7, cut, history=True)
    assert not cut.exists() and list(tmp_path.iterdir()) == [target], "a bundle cut short leaves no file"
    out = io.BytesIO()

    async def go() -> None:
        async with AsyncMateMemory("http://mem.test", transport=exporter(whole)) as a:
            assert (await a.export_agent(7, out, history=True)).size == len(whole)
    asyncio.run(go())
    assert out.getvalue() == whole


class Silent:
    """A TCP server that accepts connections and never answers."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted = 0
        self.conns: list[socket.socket] = []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self.conns.append(conn)

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


def test_timeouts_and_connection_failures_are_httpx_transport_errors() -> None:
    silent = Silent()
    try:
        with MateMemory(silent.url, retry=Retry(attempts=2, base=0.001, max=0.005), timeout=0.2) as c:
            with pytest.raises(httpx.ReadTimeout):
                c.read_file(1, "a.md")
            assert silent.accepted == 2, "a read is retried after a timeout"
            with pytest.raises(httpx.ReadTimeout):
                c.store_messages(1, "c", [{"role": "user", "content": "hi"}])
            assert silent.accepted == 3, "storing messages is not repeated"
            once = c.with_options(timeout=0.05, retry=Retry(attempts=1))
            with pytest.raises(httpx.TimeoutException):
                once.read_file(1, "a.md")
            assert silent.accepted == 4 and c.retry.attempts == 2, "with_options leaves the client as it was"
    finally:
        silent.close()
    gone = socket.create_server(("127.0.0.1", 0))
    port = gone.getsockname()[1]
    gone.close()
    with MateMemory(f"http://127.0.0.1:{port}", retry=Retry(attempts=1)) as c:
        with pytest.raises(httpx.ConnectError):
            c.read_file(1, "a.md")
    assert MateMemory("http://x").http.timeout == httpx.Timeout(60.0)


def test_erase_sends_the_confirmation() -> None:
    seen: list[str] = []

    def handle(req: httpx.Request) -> httpx.Response:
        seen.append(f"{req.method} {req.url.raw_path.decode()}")
        data = {"agentId": 5, "conversationId": "c 1/x", "rows": {"mate_message": 3}} if "conversations" in req.url.path \
            else {"agentId": 5, "rows": {"mate_agent": 1}}
        return httpx.Response(200, content=json.dumps({"code": 200, "data": data}))
    with MateMemory("http://mem.test", transport=httpx.MockTransport(handle)) as c:
        assert c.erase_agent(5)["rows"]["mate_agent"] == 1
        assert c.erase_conversation(5, "c 1/x")["rows"]["mate_message"] == 3
    assert seen == ["DELETE /api/v1/agents/5?erase=true&confirm=5",
                    "DELETE /api/v1/agents/5/conversations/c%201%2Fx?erase=true&confirm=c+1%2Fx"]
