// Runs a task on carmy's example order server (examples/orders) with the
// experimental task client of the official TypeScript MCP SDK (v1), in a
// session (2025-11-25) over streamable HTTP.
//
//   node tasks.mjs <url>        # e.g. http://127.0.0.1:3000/mcp
//
// It starts export_orders as a task with client.experimental.tasks
// .callToolStream, which polls tasks/get and ends with tasks/result, and
// checks what the stream yields: the task created, its statuses, then the
// call's result; then it finds the task with listTasks and reads it with
// getTask. It prints one summary line and exits 0 when every assertion
// holds; otherwise it prints what failed and exits 1.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const url = process.argv[2];
if (!url) {
  console.error("usage: node tasks.mjs <url>");
  process.exit(2);
}

function check(cond, message, got) {
  if (!cond) {
    throw new Error(got === undefined ? message : `${message}; got ${JSON.stringify(got)}`);
  }
}

const client = new Client({ name: "carmy-interop-tasks", version: "1.0.0" }, { capabilities: {} });
const transport = new StreamableHTTPClientTransport(new URL(url));
try {
  await client.connect(transport);
  const tasksCap = client.getServerCapabilities()?.tasks;
  check(tasksCap?.requests?.tools?.call, "initialize: capabilities.tasks.requests.tools.call", tasksCap);
  const { tools } = await client.listTools();
  const exportTool = tools.find((t) => t.name === "export_orders");
  check(exportTool?.execution?.taskSupport === "optional", "export_orders: execution.taskSupport", exportTool?.execution);

  const seen = [];
  let taskId;
  let result;
  const stream = client.experimental.tasks.callToolStream({ name: "export_orders", arguments: {} }, CallToolResultSchema, { task: { ttl: 60000 } });
  for await (const message of stream) {
    seen.push(message.type);
    if (message.type === "taskCreated") {
      taskId = message.task.taskId;
    } else if (message.type === "result") {
      result = message.result;
    } else if (message.type === "error") {
      throw new Error(`callToolStream: ${message.error}`);
    }
  }
  check(seen[0] === "taskCreated" && taskId, "callToolStream: first the task created", seen);
  check(seen.at(-1) === "result", "callToolStream: last the result", seen);
  check(!result.isError && typeof result.structuredContent?.orders === "number", "the task's result: an export", result);

  const { tasks } = await client.experimental.tasks.listTasks();
  check(tasks.some((t) => t.taskId === taskId), "listTasks: the task", tasks);
  const task = await client.experimental.tasks.getTask(taskId);
  check(task.status === "completed", "getTask: completed", task);

  console.log(`ok: export_orders ran as task ${taskId}: ${seen.join(" → ")}; ${result.structuredContent.orders} orders`);
  await client.close();
} catch (err) {
  console.error(`FAIL: ${err.message}`);
  await client.close().catch(() => {});
  process.exit(1);
}
