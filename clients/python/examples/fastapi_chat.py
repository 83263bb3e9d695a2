"""A FastAPI chat service with MateMemory: POST /chat {conversationId, message} answers with an
OpenAI-compatible model that sees the assembled context (with recall) and may use the memory
tools; the turn is then stored and published for memory extraction.

    MATE_URL=... MATE_API_KEY=... MATE_AGENT_ID=1 OPENAI_BASE_URL=... OPENAI_API_KEY=... \
        python3 -m uvicorn fastapi_chat:app --port 8000
"""

from __future__ import annotations

import os
from typing import Any

import httpx
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

from matememory import AsyncMateMemory, MateMemoryError

mem = AsyncMateMemory(os.environ.get("MATE_URL", "http://127.0.0.1:8080"), os.environ.get("MATE_API_KEY"))
agent_id = int(os.environ.get("MATE_AGENT_ID", "1"))
model = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
llm = httpx.AsyncClient(base_url=os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/"),
                        headers={"Authorization": f"Bearer {os.environ.get('OPENAI_API_KEY', '')}"}, timeout=120)
app = FastAPI()


class ChatIn(BaseModel):
    conversationId: str
    message: str


async def complete(messages: list[Any], tools: list[Any]) -> dict[str, Any]:
    r = await llm.post("/chat/completions", json={"model": model, "messages": messages, "tools": tools})
    r.raise_for_status()
    message: dict[str, Any] = r.json()["choices"][0]["message"]
    return message


@app.post("/chat")
async def chat(body: ChatIn) -> dict[str, Any]:
    try:
        ctx = await mem.context(agent_id, body.conversationId, body.message, model=model, recall=True,
                                system_prompt="You are a helpful assistant with a memory.")
        tools = await mem.tools("en")
        messages: list[Any] = list(ctx["messages"] or [])
        reply = await complete(messages, tools)
        rounds = 0
        # The model may call memory tools a few rounds before it answers.
        while reply.get("tool_calls") and rounds < 4:
            messages.append({"role": "assistant", "content": reply.get("content") or "", "tool_calls": reply["tool_calls"]})
            messages.extend(await mem.run_tool_round(agent_id, reply))
            reply = await complete(messages, tools)
            rounds += 1
        answer = reply.get("content") or ""
        await mem.store_messages(agent_id, body.conversationId, [{"role": "user", "content": body.message},
                                                                 {"role": "assistant", "content": answer}])
        ack = await mem.publish_completion({"agentId": agent_id, "conversationId": body.conversationId,
                                            "userMessage": body.message, "assistantReply": answer,
                                            "messageCount": ctx["historyMessages"] + 2, "triggerSource": "web"})
    except (MateMemoryError, httpx.HTTPError) as err:
        raise HTTPException(status_code=502, detail=str(err)) from err
    return {"reply": answer, "eventId": ack["eventId"], "toolRounds": rounds}
