// Drives carmy's example order server (examples/orders) with
// @modelcontextprotocol/client, v2 of the official TypeScript MCP SDK,
// which speaks the sessionless protocol 2026-07-28 as well as the
// session-based versions.
//
//   node client.mjs <mode> http <url>                 # streamable HTTP, e.g. http://127.0.0.1:3000/mcp
//   node client.mjs <mode> stdio <command> [args...]  # spawns the server, e.g. ./orders -stdio
//
// <mode> is the client's version negotiation: "auto" (probe with
// server/discover, as an agent built on the SDK would opt into), "pin"
// (2026-07-28 exactly) or "legacy" (the 2025 initialize handshake, the
// SDK's default). For auto and pin the client must settle on 2026-07-28.
//
// It lists the tools, calls create_order and list_orders, gets a
// validation error and a confirmation error through Client.callTool, and
// asserts what it gets. It prints one summary line and exits 0 when every
// assertion holds; otherwise it prints what failed and exits 1. Usage
// errors exit 2. CARMY_INTEROP_TIMEOUT_MS bounds each request (default
// 10000); the whole run is bounded by four times that.

import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const SESSIONLESS = "2026-07-28";
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
  console.error("usage: node client.mjs auto|pin|legacy http <url> | node client.mjs auto|pin|legacy stdio <command> [args...]");
  process.exit(2);
}

function negotiation(mode) {
  switch (mode) {
    case "auto":
      return { mode: "auto" };
    case "pin":
      return { mode: { pin: SESSIONLESS } };
    case "legacy":
      return { mode: "legacy" };
    default:
      usage(`unknown mode ${JSON.stringify(mode)}`);
  }
}

function transportFrom(argv) {
  const [kind, ...rest] = argv;
  switch (kind) {
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
      return {
        name: "stdio",
        transport: new StdioClientTransport({ command: rest[0], args: rest.slice(1), stderr: "inherit" }),
      };
    }
    default:
      usage(`unknown transport ${JSON.stringify(kind)}`);
  }
}

// callTool is what an agent built on the SDK calls: Client.callTool, which
// validates structuredContent against the tool's outputSchema. A protocol
// error fails the run: tool failures must come back as results.
async function callTool(client, name, args) {
  try {
    return await client.callTool({ name, arguments: args }, requestOptions);
  } catch (err) {
    throw new AssertionError(`tools/call ${name}: protocol error instead of a result: ${err?.message ?? err}`);
  }
}

// errorObject reads carmy's error object from a failed call: the JSON of
// its text content and the same object in _meta["carmy/error"].
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
  check(e !== null && typeof e === "object" && typeof e.code === "string" && typeof e.message === "string",
    `${tool}: the error object must have a code and a message`, e);
  check(result._meta?.["carmy/error"]?.code === e.code, `${tool}: _meta["carmy/error"] must carry the same error`, result._meta);
  return e;
}

async function run(client) {
  const { tools } = await client.listTools(undefined, requestOptions);
  const names = tools.map((t) => t.name).sort();
  check(JSON.stringify(names) === JSON.stringify(TOOLS), `tools/list must list exactly ${TOOLS.join(", ")}`, names);
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  for (const t of tools) {
    for (const h of HINTS) {
      check(typeof t.annotations?.[h] === "boolean", `${t.name}: annotations.${h} must be set explicitly`, t.annotations);
    }
    check(t.annotations.idempotentHint === t._meta?.["carmy/idempotent"],
      `${t.name}: idempotentHint and _meta["carmy/idempotent"] must agree`, { annotations: t.annotations, _meta: t._meta });
  }
  check(byName.cancel_order.annotations.destructiveHint === true, "cancel_order: destructiveHint must be true", byName.cancel_order.annotations);
  check(byName.get_order.annotations.readOnlyHint === true, "get_order: readOnlyHint must be true", byName.get_order.annotations);

  const ok = await callTool(client, "create_order", { sku: "A-100", quantity: 2, note: "interop" });
  check(ok.isError !== true, "create_order: must succeed", ok);
  const order = ok.structuredContent;
  check(typeof order?.order_id === "number" && order.sku === "A-100" && order.status === "placed",
    "create_order: structuredContent must be the order placed", order);

  const listed = await callTool(client, "list_orders", {});
  check(Array.isArray(listed.structuredContent?.result) &&
    listed.structuredContent.result.some((o) => o.order_id === order.order_id),
  "list_orders: structuredContent must be {result: [orders]} with the new order", listed.structuredContent);

  const invalid = errorObject(await callTool(client, "create_order", { sku: "", quantity: 0 }), "create_order with invalid input");
  check(invalid.code === "invalid_input", 'create_order with invalid input: code must be "invalid_input"', invalid);
  const paths = (invalid.fields ?? []).map((f) => f?.path).filter(Boolean).sort();
  check(paths.includes("sku") || paths.includes("quantity"), 'create_order with invalid input: fields must name "sku" or "quantity"', invalid.fields);

  // This client declares no elicitation, so a call that needs the user's
  // confirmation is refused, and the order stays placed.
  const confirm = errorObject(await callTool(client, "cancel_order", { order_id: order.order_id, reason: "interop test" }),
    "cancel_order without confirmation");
  check(confirm.code === "confirmation_required", 'cancel_order without confirmation: code must be "confirmation_required"', confirm);
  const still = await callTool(client, "get_order", { order_id: order.order_id });
  check(still.structuredContent?.status === "placed", "get_order: the refused cancel_order must leave the order placed", still.structuredContent);

  return { tools: names.length, orderId: order.order_id, fields: paths };
}

async function main() {
  const [mode, ...rest] = process.argv.slice(2);
  const versionNegotiation = negotiation(mode);
  const { name, transport } = transportFrom(rest);
  const client = new Client({ name: "carmy-interop-client2", version: "0.0.0" }, { versionNegotiation });
  const watchdog = setTimeout(() => {
    console.error(`interop ${mode} ${name}: FAIL: no result within ${4 * requestTimeout}ms`);
    process.exit(1);
  }, 4 * requestTimeout);
  let summary;
  try {
    await client.connect(transport, requestOptions);
    const era = client.getProtocolEra();
    const version = client.getNegotiatedProtocolVersion();
    if (mode === "legacy") {
      check(era === "legacy" && version !== SESSIONLESS, "legacy: the client must use a session-based version", { era, version });
    } else {
      check(era === "modern" && version === SESSIONLESS, `${mode}: the client must settle on ${SESSIONLESS}`, { era, version });
    }
    const got = await run(client);
    const server = client.getServerVersion();
    summary = `interop ${mode} ${name}: ok: server ${server?.name} ${server?.version} (protocol ${version}, ${era}), ` +
      `${got.tools} tools listed, create_order -> order_id ${got.orderId}, ` +
      `invalid_input on ${got.fields.join(",")}, confirmation_required`;
  } catch (err) {
    let what = err instanceof AssertionError ? err.message : `${err?.stack ?? err}`;
    if (!(err instanceof AssertionError) && err?.cause) {
      what += `\ncaused by: ${err.cause?.message ?? err.cause}`;
    }
    console.error(`interop ${mode} ${name}: FAIL: ${what}`);
    process.exitCode = 1;
  } finally {
    await client.close().catch((err) => console.error(`interop ${mode} ${name}: closing: ${err?.message ?? err}`));
    clearTimeout(watchdog);
  }
  if (summary !== undefined && process.exitCode !== 1) {
    console.log(summary);
  }
  process.exit(process.exitCode ?? 0);
}

await main();
