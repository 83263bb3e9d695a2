"""The chat-service story against a live MateMemory (started by pkg/internal/test/clients/clients_test.go with a
scripted fake model that writes every "fact-..." word of a transcript to the daily note):
MATE_URL, MATE_API_KEY (allowed for MATE_AGENT_ID), MATE_OTHER_KEY (not allowed for it)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import time

import pytest

from matememory import (
    AsyncMateMemory,
    ConflictError,
    ForbiddenError,
    InvalidRequestError,
    MateMemory,
    NotFoundError,
    UnauthorizedError,
)
from matememory.models import EventConversationCompletedEvent

URL = os.environ.get("MATE_URL", "")
KEY = os.environ.get("MATE_API_KEY", "")
AGENT = int(os.environ.get("MATE_AGENT_ID", "0"))
live = pytest.mark.skipif(not URL or AGENT <= 0, reason="MATE_URL and MATE_AGENT_ID not set")


@live
def test_story() -> None:
    conv = f"py-{time.time_ns()}"
    fact = "fact-py-jasmine"
    with MateMemory(URL, KEY) as mem:
        # Store messages.
        stored = mem.store_messages(AGENT, conv, [
            {"role": "user", "content": f"I only drink {fact} tea, remember that."},
            {"role": "assistant", "content": "Noted: jasmine it is."},
            {"role": "user", "content": "And what should I cook tonight?"},
        ])
        assert stored["count"] == 3
        assert (stored["messages"] or [])[0]["role"] == "user"

        # Get the context, with recall.
        ctx = mem.context(AGENT, conv, "And what should I cook tonight?", system_prompt="You are a helpful assistant.", recall=True)
        msgs = ctx["messages"] or []
        assert msgs[0]["role"] == "system" and "You are a helpful assistant." in (msgs[0]["content"] or "")
        assert msgs[-1]["content"] == "And what should I cook tonight?"
        assert "recall" in ctx
        assert any(fact in (m["content"] or "") for m in msgs), "the stored history is in the window"

        # Run a tool round: the definitions, then a model's calls (one right, two wrong).
        tools = mem.tools("en")
        names = [t["function"]["name"] for t in tools]
        assert {"list_workspace_memory_files", "read_workspace_memory_file", "write_workspace_memory_file"} <= set(names)
        note = f"notes/{conv}.md"
        round_ = mem.run_tool_round(AGENT, {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "write_workspace_memory_file",
                                                              "arguments": json.dumps({"filename": note, "content": "- cooks rice", "expectedVersion": 0})}},
            {"id": "call_2", "type": "function", "function": {"name": "read_workspace_memory_file", "arguments": '{"filename":"nope/missing.md"}'}},
            {"id": "call_3", "type": "function", "function": {"name": "read_workspace_memory_file", "arguments": "{not json"}},
        ]})
        assert [m["tool_call_id"] for m in round_] == ["call_1", "call_2", "call_3"]
        assert all(m["role"] == "tool" for m in round_)
        assert "error" not in json.loads(round_[0]["content"]), round_[0]
        assert json.loads(round_[1]["content"])["error"]
        assert json.loads(round_[2]["content"])["error"]
        assert mem.read_file(AGENT, note)["content"] == "- cooks rice"
        with pytest.raises(NotFoundError):
            mem.execute_tool(AGENT, "no_such_tool", {})

        # Publish the completion (the event id is filled in; the same event again is a duplicate).
        mem.store_messages(AGENT, conv, [{"role": "assistant", "content": "Rice with vegetables."}])
        event: EventConversationCompletedEvent = {
            "agentId": AGENT, "conversationId": conv, "userMessage": "And what should I cook tonight?",
            "assistantReply": "Rice with vegetables.", "messageCount": 4, "triggerSource": "web",
        }
        ack = mem.publish_completion(event)
        assert ack["eventId"] == event.get("eventId") and not ack["duplicate"]
        assert mem.publish_completion(event)["duplicate"]

        # Wait for the run.
        run = mem.wait_run(AGENT, ack["eventId"], timeout=60)
        assert run["status"] == "completed", run

        # Search for what the extraction wrote.
        # The index follows the file's change asynchronously: poll with a deadline.
        deadline = time.monotonic() + 30
        found = mem.search(AGENT, {"query": fact, "filenamePrefix": "memory/"})
        while not found["hits"] and time.monotonic() < deadline:
            time.sleep(0.05)
            found = mem.search(AGENT, {"query": fact, "filenamePrefix": "memory/"})
        hits = found["hits"] or []
        assert hits, found
        assert re.fullmatch(r"memory/\d{4}-\d{2}-\d{2}\.md", hits[0]["filename"])
        assert fact in hits[0]["snippet"]

        # Read the daily note.
        daily = mem.read_file(AGENT, hits[0]["filename"])
        assert daily["content"].count(f"- {fact}") == 1, daily["content"]

        # Hit a conflict and retry.
        name = f"notes/{conv}-c.md"
        first = mem.write_file(AGENT, name, "one", expected_version=0)
        assert first["created"]
        mem.write_file(AGENT, name, "two", expected_version=first["version"])
        with pytest.raises(ConflictError) as stale:
            mem.write_file(AGENT, name, "lost", expected_version=first["version"])
        assert stale.value.status == 409
        with pytest.raises(ConflictError):
            mem.write_file(AGENT, name, "again", expected_version=0)
        fresh = mem.read_file(AGENT, name)
        assert mem.write_file(AGENT, name, fresh["content"] + " three", expected_version=fresh["version"])["content"] == "two three"
        assert mem.update_file(AGENT, name, lambda c: c + " four")["content"] == "two three four"
        with pytest.raises(NotFoundError):
            mem.read_file(AGENT, "notes/never-written.md")
        with pytest.raises(InvalidRequestError):
            mem.search(AGENT, {"query": fact, "maxResults": 100000})

    # An unauthorised key is refused: unknown (401), not allowed for the agent (403).
    with MateMemory(URL, "no-such-key") as stranger, pytest.raises(UnauthorizedError):
        stranger.read_file(AGENT, daily["filename"])
    with MateMemory(URL, os.environ.get("MATE_OTHER_KEY", "")) as other, pytest.raises(ForbiddenError):
        other.read_file(AGENT, daily["filename"])


@live
def test_async_story() -> None:
    async def story() -> None:
        conv = f"py-async-{time.time_ns()}"
        async with AsyncMateMemory(URL, KEY) as mem:
            await mem.store_messages(AGENT, conv, [{"role": "user", "content": "fact-py-async-pu-erh, please."},
                                                   {"role": "assistant", "content": "Pu-erh noted."}])
            ctx = await mem.context(AGENT, conv, "What do I drink?", recall={"topK": 3})
            assert (ctx["messages"] or [])[-1]["content"] == "What do I drink?"
            tools = await mem.tools()
            assert len(tools) >= 3
            tool_msgs = await mem.run_tool_round(AGENT, {"tool_calls": [
                {"id": "a1", "function": {"name": "list_workspace_memory_files", "arguments": ""}}]})
            assert "error" not in json.loads(tool_msgs[0]["content"])
            ack = await mem.publish_completion({"agentId": AGENT, "conversationId": conv, "userMessage": "fact-py-async-pu-erh, please.",
                                                "assistantReply": "Pu-erh noted.", "messageCount": 2, "triggerSource": "web"})
            run = await mem.wait_run(AGENT, ack["eventId"], timeout=60)
            assert run["status"] in ("completed", "skipped"), run
            name = f"notes/{conv}.md"
            w = await mem.write_file(AGENT, name, "x", expected_version=0)
            with pytest.raises(ConflictError):
                await mem.write_file(AGENT, name, "y", expected_version=w["version"] + 1)
            assert (await mem.update_file(AGENT, name, lambda c: c + "y"))["content"] == "xy"
            assert (await mem.search(AGENT, "fact-py-async-pu-erh"))["query"] == "fact-py-async-pu-erh"
        async with AsyncMateMemory(URL, os.environ.get("MATE_OTHER_KEY", "")) as other:
            with pytest.raises(ForbiddenError):
                await other.list_files(AGENT)

    asyncio.run(story())
