// An Express chat service with MateMemory: POST /chat {conversationId, message} answers with
// an OpenAI-compatible model that sees the assembled context (with recall) and may use the
// memory tools; the turn is then stored and published for memory extraction.
//   MATE_URL, MATE_API_KEY, MATE_AGENT_ID, OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL, PORT
import express from "express";
import { MateMemory, type AssistantMessage } from "../src/index.js";

const env = (k: string, d = "") => process.env[k] ?? d;
const mem = new MateMemory({ baseUrl: env("MATE_URL", "http://127.0.0.1:8080"), apiKey: env("MATE_API_KEY") });
const agentId = Number(env("MATE_AGENT_ID", "1"));
const model = env("OPENAI_MODEL", "gpt-4o-mini");
const tools = await mem.tools("en");

type Msg = object;

async function complete(messages: Msg[]): Promise<AssistantMessage> {
  const res = await fetch(`${env("OPENAI_BASE_URL", "https://api.openai.com/v1").replace(/\/+$/, "")}/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${env("OPENAI_API_KEY")}` },
    body: JSON.stringify({ model, messages, tools }),
  });
  if (!res.ok) throw new Error(`model: ${res.status} ${await res.text()}`);
  const body = (await res.json()) as { choices: { message: AssistantMessage }[] };
  return body.choices[0]!.message;
}

const app = express();
app.use(express.json());

app.post("/chat", async (req, res) => {
  const { conversationId, message } = req.body as { conversationId?: string; message?: string };
  if (!conversationId || !message) {
    res.status(400).json({ error: "conversationId and message are required" });
    return;
  }
  try {
    const ctx = await mem.context(agentId, conversationId, {
      systemPrompt: "You are a helpful assistant with a memory.", userMessage: message, model, recall: true,
    });
    const messages: Msg[] = [...(ctx.messages ?? [])];
    let reply: AssistantMessage = await complete(messages);
    // The model may call memory tools a few rounds before it answers.
    let rounds = 0;
    for (; reply.tool_calls?.length && rounds < 4; rounds++) {
      messages.push({ role: "assistant", content: reply.content ?? "", tool_calls: reply.tool_calls });
      messages.push(...(await mem.runToolRound(agentId, reply)));
      reply = await complete(messages);
    }
    const answer = reply.content ?? "";
    await mem.storeMessages(agentId, conversationId, [
      { role: "user", content: message },
      { role: "assistant", content: answer },
    ]);
    const ack = await mem.publishCompletion({
      agentId, conversationId, userMessage: message, assistantReply: answer,
      messageCount: (ctx.historyMessages ?? 0) + 2, triggerSource: "web",
    });
    res.json({ reply: answer, eventId: ack.eventId, toolRounds: rounds });
  } catch (err) {
    res.status(502).json({ error: String(err) });
  }
});

const server = app.listen(Number(env("PORT", "3000")), "127.0.0.1", () => {
  const addr = server.address();
  console.log(`listening on ${typeof addr === "object" && addr ? addr.port : addr}`);
});
