// Drives carmy's example order server (examples/orders) with the official
// TypeScript MCP SDK, a client nobody working on carmy wrote.
//
//   node client.mjs http <url>                    # streamable HTTP, e.g. http://127.0.0.1:3000/mcp
//   node client.mjs stdio <command> [args...]     # spawns the server, e.g. ./orders -stdio
//
// It lists the tools, calls create_order and list_orders, gets a validation
// error and a confirmation error, and asserts what it gets back; it also
// reports whether Client.callTool itself hands a tool failure back (see
// probeStockError). It prints one summary
// line and exits 0 when every assertion holds; otherwise it prints what
// failed and exits 1. Usage errors exit 2.
//
// CARMY_INTEROP_TIMEOUT_MS bounds each request (default 10000); the whole
// run is bounded by four times that.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";

const TOOLS = ["cancel_order", "create_order", "export_orders", "get_order", "list_orders", "whoami"];
const HINTS = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"];

const requestTimeout = Number(process.env.CARMY_INTEROP_TIMEOUT_MS || 10000);
if (!Number.isFinite(requestTimeout) || requestTimeout <= 0) {
  usage(`CARMY_INTEROP_TIMEOUT_MS=${process.env.CARMY_INTEROP_TIMEOUT_MS} is not a positive number`);
}
const requestOptions = { timeout: requestTimeout, maxTotalTimeout: requestTimeout };

class AssertionError extends Error {}

function check(cond, message, got) {
  if (!cond) {
    throw new AssertionError(got === undefined ? message : `${message}; got ${JSON.stringify(got)}`);
  }
}

function usage(message) {
  console.error(`interop: ${message}`);
  console.error("usage: node client.mjs http <url> | node client.mjs stdio <command> [args...]");
  process.exit(2);
}

function transportFrom(argv) {
  const [mode, ...rest] = argv;
  switch (mode) {
    case "http": {
      if (rest.length !== 1) usage("http takes exactly one URL");
      let url;
      try {
        url = new URL(rest[0]);
      } catch {
        usage(`bad URL ${JSON.stringify(rest[0])}`);
      }
      return { name: "streamable-http", transport: new StreamableHTTPClientTransport(url) };
    }
    case "stdio": {
      if (rest.length < 1) usage("stdio takes a command and its arguments");
      // The server's logs (standard error) show up in ours.
      return {
        name: "stdio",
        transport: new StdioClientTransport({ command: rest[0], args: rest.slice(1), stderr: "inherit" }),
      };
    }
    default:
      usage(`unknown transport ${JSON.stringify(mode)}`);
  }
}

// callTool is what an agent built on the SDK calls: Client.callTool, which
// also validates structuredContent against the tool's outputSchema from
// tools/list. A protocol error fails the run: tool failures must come back
// as results with isError set.
async function callTool(client, name, args) {
  try {
    return await client.callTool({ name, arguments: args }, undefined, requestOptions);
  } catch (err) {
    throw new AssertionError(`tools/call ${name}: protocol error instead of a result: ${err?.message ?? err}`);
  }
}

// callRaw sends tools/call through the same Client and transport, checking
// the result against the SDK's CallToolResult schema, but without
// Client.callTool's output-schema check: it shows what carmy put on the wire
// for a tool failure (see probeStockError).
async function callRaw(client, name, args) {
  try {
    return await client.request({ method: "tools/call", params: { name, arguments: args } }, CallToolResultSchema, requestOptions);
  } catch (err) {
    throw new AssertionError(`tools/call ${name}: protocol error instead of a result: ${err?.message ?? err}`);
  }
}

// KNOWN_SDK_BUG is how Client.callTool of @modelcontextprotocol/sdk 1.x
// (1.32.2 included) rejects an isError result whose structuredContent does
// not match the tool's outputSchema, although the MCP server side of the
// same SDK exempts error results from that schema:
// https://github.com/modelcontextprotocol/typescript-sdk/issues/1943
const KNOWN_SDK_BUG = "Structured content does not match the tool's output schema";

// probeStockError makes a failing call through Client.callTool, as an agent
// built on the SDK does, and checks that carmy's error result comes back
// instead of the SDK's output-schema rejection (typescript-sdk#1943).
async function probeStockError(client, name, args, wantCode) {
  let result;
  try {
    result = await client.callTool({ name, arguments: args }, undefined, requestOptions);
  } catch (err) {
    if (err instanceof McpError && err.code === ErrorCode.InvalidParams && err.message.includes(KNOWN_SDK_BUG)) {
      throw new AssertionError(`Client.callTool ${name}: the SDK rejected carmy's error result (typescript-sdk#1943): carmy must keep the error out of structuredContent`);
    }
    throw new AssertionError(`Client.callTool ${name}: unexpected protocol error: ${err?.message ?? err}`);
  }
  const e = errorObject(result, `Client.callTool ${name}`);
  check(e.code === wantCode, `Client.callTool ${name}: code must be ${JSON.stringify(wantCode)}`, e);
  return "ok";
}

// errorObject reads carmy's error object from a failed call: the JSON of
// its text content, which every client shows the model (carmy keeps it out
// of structuredContent for tools with an output schema, which this SDK's
// Client.callTool would check against that schema even on errors), and the
// same object in _meta["carmy/error"].
function errorObject(result, tool) {
  check(result.isError === true, `${tool}: isError must be true`, result);
  const text = result.content?.[0]?.text;
  check(typeof text === "string", `${tool}: the error must come as text content`, result);
  let e;
  try {
    e = JSON.parse(text);
  } catch (err) {
    throw new AssertionError(`${tool}: the text content must be the error object as JSON: ${err.message}`);
  }
  check(e !== null && typeof e === "object", `${tool}: the text content must be the error object`, result);
  check(typeof e.code === "string" && typeof e.message === "string" && e.message !== "",
    `${tool}: the error object must have a code and a message`, e);
  check(result._meta?.["carmy/error"]?.code === e.code, `${tool}: _meta["carmy/error"] must carry the same error`, result._meta);
  return e;
}

async function run(client) {
  // tools/list: names, schemas, annotations.
  const { tools } = await client.listTools(undefined, requestOptions);
  const names = tools.map((t) => t.name).sort();
  check(JSON.stringify(names) === JSON.stringify(TOOLS), `tools/list must list exactly ${TOOLS.join(", ")}`, names);
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  for (const t of tools) {
    // MCP's defaults are "destructive" and "open world", so carmy sets
    // every hint explicitly, from the tool's effect.
    for (const h of HINTS) {
      check(typeof t.annotations?.[h] === "boolean", `${t.name}: annotations.${h} must be set explicitly`, t.annotations);
    }
    check(t.inputSchema?.type === "object", `${t.name}: inputSchema.type must be "object"`, t.inputSchema);
  }
  const create = byName.create_order.inputSchema;
  const required = [...(create.required ?? [])].sort();
  check(JSON.stringify(required) === JSON.stringify(["quantity", "sku"]),
    'create_order: inputSchema.required must be ["sku","quantity"]', create.required);
  const cancelHints = byName.cancel_order.annotations;
  check(cancelHints.destructiveHint === true, "cancel_order: destructiveHint must be true", cancelHints);
  check(cancelHints.readOnlyHint === false, "cancel_order: readOnlyHint must be false", cancelHints);
  const getHints = byName.get_order.annotations;
  check(getHints.readOnlyHint === true, "get_order: readOnlyHint must be true", getHints);

  // A successful call. Client.callTool validates structuredContent
  // against the outputSchema from tools/list (with Ajv): carmy's output
  // schemas hold for a client that checks them.
  const ok = await callTool(client, "create_order", { sku: "A-100", quantity: 2, note: "interop" });
  check(ok.isError !== true, "create_order: must succeed", ok);
  const order = ok.structuredContent;
  check(typeof order?.order_id === "number", "create_order: structuredContent.order_id must be a number", order);
  check(order.sku === "A-100" && order.quantity === 2 && order.status === "placed",
    "create_order: structuredContent must be the order placed", order);
  check(ok.content?.[0]?.type === "text", "create_order: content must carry the output as text", ok.content);

  // A non-object output is wrapped as {"result": …}, in the schema and in
  // the structured content alike.
  const listed = await callTool(client, "list_orders", {});
  check(Array.isArray(listed.structuredContent?.result) &&
    listed.structuredContent.result.some((o) => o.order_id === order.order_id),
  "list_orders: structuredContent must be {result: [orders]} with the new order", listed.structuredContent);

  // Invalid input: a tool failure that names the fields.
  const bad = { sku: "", quantity: 0 };
  const invalid = errorObject(await callRaw(client, "create_order", bad), "create_order with invalid input");
  check(invalid.code === "invalid_input", 'create_order with invalid input: code must be "invalid_input"', invalid);
  const paths = (invalid.fields ?? []).map((f) => f?.path);
  check(paths.includes("sku") || paths.includes("quantity"),
    'create_order with invalid input: fields must name "sku" or "quantity"', invalid.fields);

  // A destructive tool without the user's confirmation is refused.
  const cancel = { order_id: order.order_id, reason: "interop test" };
  const confirm = errorObject(await callRaw(client, "cancel_order", cancel), "cancel_order without confirmation");
  check(confirm.code === "confirmation_required",
    'cancel_order without confirmation: code must be "confirmation_required"', confirm);
  check(/^[0-9a-f]{64}$/.test(confirm.details?.digest ?? ""),
    "cancel_order without confirmation: details.digest must be 64 hex digits", confirm.details);
  check(confirm.details?.tool === "cancel_order",
    'cancel_order without confirmation: details.tool must be "cancel_order"', confirm.details);

  // The same failure through Client.callTool, as an SDK-based agent makes
  // it. Neither call has an effect, so repeating it is harmless.
  const stock = await probeStockError(client, "create_order", bad, "invalid_input");
  const still = await callTool(client, "get_order", { order_id: order.order_id });
  check(still.structuredContent?.status === "placed", "get_order: the refused cancel_order must leave the order placed",
    still.structuredContent);

  return { tools: names.length, orderId: order.order_id, fields: paths.filter(Boolean).sort(), stock };
}

async function main() {
  const { name, transport } = transportFrom(process.argv.slice(2));
  const client = new Client({ name: "carmy-interop-ts", version: "0.0.0" });
  // Whatever hangs, the run ends: a watchdog bounds it as a whole.
  const watchdog = setTimeout(() => {
    console.error(`interop ${name}: FAIL: no result within ${4 * requestTimeout}ms`);
    process.exit(1);
  }, 4 * requestTimeout);
  let summary;
  try {
    await client.connect(transport, requestOptions);
    const server = client.getServerVersion();
    const got = await run(client);
    const protocol = transport.protocolVersion ? ` (protocol ${transport.protocolVersion})` : "";
    summary = `interop ${name}: ok: server ${server?.name} ${server?.version}${protocol}, ` +
      `${got.tools} tools listed, create_order -> order_id ${got.orderId}, ` +
      `invalid_input on ${got.fields.join(",")}, confirmation_required with digest; ` +
      `Client.callTool hands tool failures back: ${got.stock}`;
    if (transport instanceof StreamableHTTPClientTransport) {
      await transport.terminateSession();
    }
  } catch (err) {
    let what = err instanceof AssertionError ? err.message : `${err?.stack ?? err}`;
    if (!(err instanceof AssertionError) && err?.cause) {
      what += `\ncaused by: ${err.cause?.message ?? err.cause}`;
    }
    console.error(`interop ${name}: FAIL: ${what}`);
    process.exitCode = 1;
  } finally {
    await client.close().catch((err) => console.error(`interop ${name}: closing: ${err?.message ?? err}`));
    clearTimeout(watchdog);
  }
  if (summary !== undefined && process.exitCode !== 1) {
    console.log(summary);
  }
  // Nothing may keep the process alive once the run is over.
  process.exit(process.exitCode ?? 0);
}

await main();
