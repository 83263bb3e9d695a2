"""Export, import and erasure against a live MateMemory (pkg/internal/test/clients/clients_test.go):
MATE_AGENT_ID's memory is exported to a file and imported into MATE_IMPORT_AGENT_ID, which is
then erased (the key may act for both)."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import re
import time

import pytest

from matememory import AsyncMateMemory, ConflictError, InvalidRequestError, MateMemory, NotFoundError

URL = os.environ.get("MATE_URL", "")
KEY = os.environ.get("MATE_API_KEY", "")
AGENT = int(os.environ.get("MATE_AGENT_ID", "0"))
TARGET = int(os.environ.get("MATE_IMPORT_AGENT_ID", "0"))


@pytest.mark.skipif(not URL or AGENT <= 0 or TARGET <= 0, reason="MATE_URL, MATE_AGENT_ID and MATE_IMPORT_AGENT_ID not set")
def test_export_import_erase(tmp_path: pathlib.Path) -> None:
    conv = f"py-bundle-{time.time_ns()}"
    name = f"notes/{conv}.md"
    path = tmp_path / "agent.ndjson"
    with MateMemory(URL, KEY) as mem:
        mem.write_file(AGENT, name, "- exported by the Python client\n", expected_version=0)
        mem.store_messages(AGENT, conv, [{"role": "user", "content": "Keep this conversation in the bundle."},
                                         {"role": "assistant", "content": "It is kept."}])
        ex = mem.export_agent(AGENT, path, history=True, messages=True)
        text = path.read_text()
        assert ex.size == path.stat().st_size
        assert re.fullmatch(rf"agent-{AGENT}-\d{{8}}T\d{{6}}Z\.ndjson", ex.filename or ""), ex.filename
        lines = [json.loads(line) for line in text.splitlines()]
        assert lines[0]["kind"] == "manifest" and lines[-1]["kind"] == "checksums"
        assert any(r["kind"] == "file" and r["filename"] == name for r in lines)
        assert sum(1 for r in lines if r["kind"] == "message" and r["conversationId"] == conv) == 2

        dry = mem.import_agent(TARGET, path, dry_run=True)
        assert dry["dryRun"] and dry["sourceAgentId"] == AGENT and dry["created"]["file"] >= 1 and dry["changes"] > 0
        with pytest.raises(NotFoundError):
            mem.export_agent(TARGET, tmp_path / "none.ndjson")
        assert not (tmp_path / "none.ndjson").exists()

        with path.open("rb") as f:  # a file object: streamed, sent once
            rep = mem.import_agent(TARGET, f)
        assert rep["mode"] == "empty" and rep["created"] == dry["created"]
        assert mem.read_file(TARGET, name)["content"] == "- exported by the Python client\n"
        assert mem.import_agent(TARGET, text, mode="merge")["changes"] == 0
        with pytest.raises(InvalidRequestError) as bad:
            mem.import_agent(TARGET, json.dumps(text))  # what a JSON body serializer would send
        assert "the bundle was sent JSON-encoded; send the export's bytes unchanged" in bad.value.msg
        mem.write_file(TARGET, name, "- changed in the copy\n")
        merged = mem.import_agent(TARGET, path.read_bytes(), mode="merge")
        assert merged["conflictCount"] == 1 and (merged["conflicts"] or [])[0]["name"] == name
        with pytest.raises(ConflictError):
            mem.import_agent(TARGET, path)

    async def erase() -> None:
        async with AsyncMateMemory(URL, KEY) as amem:
            cr = await amem.erase_conversation(TARGET, conv)
            assert cr["conversationId"] == conv and cr["rows"]["mate_message"] == 2
            er = await amem.erase_agent(TARGET)
            assert er["agentId"] == TARGET and er["rows"]["mate_workspace_file"] >= 1
            with pytest.raises(NotFoundError):
                await amem.export_agent(TARGET, tmp_path / "erased.ndjson")
    asyncio.run(erase())
