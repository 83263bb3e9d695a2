// The official MCP TypeScript SDK against MateMemory: list the tools, call every one (the SDK
// checks each structuredContent against the tool's outputSchema), read a resource, subscribe
// to it and wait for notifications/resources/updated after a write. Prints a JSON report.
// Usage: node client.mjs <endpoint> <api key>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  EmptyResultSchema,
  McpError,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [endpoint, key] = process.argv.slice(2);
const report = { tools: [], called: {}, errors: [], updated: [], listChanged: 0 };

const transport = new StreamableHTTPClientTransport(new URL(endpoint), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: "matememory-ts-test", version: "1.0.0" });
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
  report.updated.push(n.params.uri);
});
client.setNotificationHandler(ResourceListChangedNotificationSchema, () => {
  report.listChanged++;
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

try {
  await client.connect(transport);
  report.protocolVersion = transport.protocolVersion ?? null;
  report.capabilities = client.getServerCapabilities();

  const { tools } = await client.listTools();
  report.tools = tools.map((t) => t.name);
  report.untitled = tools.filter((t) => !t.title).map((t) => t.name);
  report.noOutputSchema = tools.filter((t) => !t.outputSchema).map((t) => t.name);

  const day = new Date().toISOString().slice(0, 10);
  const file = `memory/${day}.md`;
  const calls = [
    ["write_workspace_memory_file", { filename: file, content: `# ${day}\n\nThe user's parrot is called Kiwi.\n` }],
    ["read_workspace_memory_file", { filename: file }],
    ["edit_workspace_memory_file", { filename: file, oldText: "Kiwi", newText: "Kiwi II" }],
    ["append_workspace_memory_file", { filename: file, text: "- likes apples" }],
    ["list_workspace_memory_files", {}],
    ["read_workspace_memory_file_history", { filename: file }],
    ["blame_workspace_memory_file", { filename: file }],
    ["rollback_workspace_memory_file", { filename: file, version: 1 }],
    ["read_workspace_memory_lines", { filename: file, startLine: 1, endLine: 3 }],
    ["search_workspace_memory", { query: "parrot Kiwi" }],
    ["delete_workspace_memory_file", { filename: file }],
  ];
  for (const [name, args] of calls) {
    try {
      const res = await client.callTool({ name, arguments: args });
      if (res.isError) {
        report.errors.push(`${name}: tool error ${JSON.stringify(res.content)}`);
      } else if (!res.structuredContent) {
        report.errors.push(`${name}: no structuredContent`);
      }
      report.called[name] = true;
    } catch (e) {
      report.errors.push(`${name}: ${e.message}`);
    }
  }
  // Arguments the input schema refuses are a tool error the model can read.
  const bad = await client.callTool({ name: "read_workspace_memory_file", arguments: { filename: "../x.md" } });
  report.badFilename = bad.isError ? bad.content[0].text : "accepted";

  // A method the server does not serve is a JSON-RPC error of that request (an McpError),
  // not a failure of the transport (StreamableHTTPError).
  try {
    await client.request({ method: "foo/bar", params: {} }, EmptyResultSchema);
    report.unknownMethod = "answered";
  } catch (e) {
    report.unknownMethod = `${e instanceof McpError ? "McpError" : e.constructor.name} ${e.code}`;
  }

  const { resources } = await client.listResources();
  report.resources = resources.map((r) => r.uri);
  const { resourceTemplates } = await client.listResourceTemplates();
  report.templates = resourceTemplates.map((t) => t.uriTemplate);
  const read = await client.readResource({ uri: "memory:///MEMORY.md" });
  report.memory = read.contents[0].text;

  await client.subscribeResource({ uri: "memory:///MEMORY.md" });
  // The GET event stream opens in the background: write until the notification arrives.
  for (let i = 0; i < 10 && report.updated.length === 0; i++) {
    await client.callTool({
      name: "append_workspace_memory_file",
      arguments: { filename: "MEMORY.md", text: `- written from TypeScript (${i})` },
    });
    await sleep(500);
  }
} catch (e) {
  report.errors.push(`fatal: ${e.stack || e.message}`);
} finally {
  await client.close().catch(() => {});
}
console.log(JSON.stringify(report));
