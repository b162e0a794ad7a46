// Starts a destructive call as a task on a carmy server over stdio with
// the experimental task client of the official TypeScript MCP SDK (v1),
// in a session (2025-11-25), and waits for a person to approve it.
//
//   node stdio-approval.mjs <tool> <arguments JSON> <server command> [args...]
//
// The server runs with this process's environment (where carmy approvals
// finds its console file). When the task waits for a person, it prints
//   waiting <taskId> <statusMessage>
// and goes on waiting (tasks/result); a person approves meanwhile, with
// carmy approvals. It prints one "ok" line and exits 0 when the task then
// completes with the tool's result; otherwise it prints what failed and
// exits 1.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const [tool, args, command, ...commandArgs] = process.argv.slice(2);
if (!command) {
  console.error("usage: node stdio-approval.mjs <tool> <arguments JSON> <server command> [args...]");
  process.exit(2);
}

function check(cond, message, got) {
  if (!cond) {
    throw new Error(got === undefined ? message : `${message}; got ${JSON.stringify(got)}`);
  }
}

const client = new Client({ name: "carmy-interop-stdio-approval", version: "1.0.0" }, { capabilities: {} });
const transport = new StdioClientTransport({ command, args: commandArgs, env: process.env, stderr: "inherit" });
try {
  await client.connect(transport);
  const seen = [];
  let result;
  let waited = false;
  const stream = client.experimental.tasks.callToolStream({ name: tool, arguments: JSON.parse(args) }, CallToolResultSchema, { task: { ttl: 600000 } });
  for await (const message of stream) {
    seen.push(message.type === "taskStatus" ? message.task.status : message.type);
    if (message.type === "taskStatus" && message.task.status === "input_required" && !waited) {
      waited = true;
      console.log(`waiting ${message.task.taskId} ${message.task.statusMessage ?? ""}`);
    } else if (message.type === "result") {
      result = message.result;
    } else if (message.type === "error") {
      throw new Error(`callToolStream: ${message.error}`);
    }
  }
  check(waited, "callToolStream: the task waited for a person (input_required)", seen);
  check(result && !result.isError, "the approved task's result", result);
  console.log(`ok: ${tool} ran as a task once a person approved it: ${seen.join(" → ")}`);
  await client.close();
} catch (err) {
  console.error(`FAIL: ${err.message}`);
  await client.close().catch(() => {});
  process.exit(1);
}
