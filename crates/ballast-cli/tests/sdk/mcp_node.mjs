// The MCP TypeScript SDK (@modelcontextprotocol/sdk) as a real client of the gateway's /mcp: its MCP scenarios of
// README.md, one JSON line each.
//
//     node crates/ballast-cli/tests/sdk/mcp_node.mjs \
//         --base-url http://127.0.0.1:PORT/mcp --api-key KEY list_and_call lost_answer_reissued concurrent_same_key
//
// A `Client` over `StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } })`: the key and the run
// (`ballast-run-id`) are the transport's headers. The SDK speaks the handshake (`initialize`, 2025-11-25). Every
// request has its own timeout; the watchdog ends the run if it takes longer anyway. The SDK is the one
// scripts/sdk-clients installed in target/sdk/node (BALLAST_SDK_DIR overrides target/sdk).

import { runScenarios, msSince, selectHeaders } from './sdk_common.mjs';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const sdkDir = process.env.BALLAST_SDK_DIR ?? resolve(here, '../../../../target/sdk');
const dist = join(sdkDir, 'node/node_modules/@modelcontextprotocol/sdk/dist/esm');
if (!existsSync(join(dist, 'client/index.js'))) {
  process.stderr.write(`mcp_node: ${dist} is missing: run scripts/sdk-clients first\n`);
  process.exit(2);
}
const { Client } = await import(pathToFileURL(join(dist, 'client/index.js')).href);
const { StreamableHTTPClientTransport } = await import(pathToFileURL(join(dist, 'client/streamableHttp.js')).href);
const { McpError } = await import(pathToFileURL(join(dist, 'types.js')).href);

const TIMEOUT = 15_000; // ms, each MCP request
const CONCURRENT = 16; // identical calls at once in `concurrent_same_key`

// Request headers of the MCP transport reported per HTTP request it sent.
const SENT_HEADERS = ['mcp-protocol-version', 'mcp-method', 'mcp-name', 'mcp-session-id', 'ballast-run-id'];

const lookupArgs = (op) => ({ order_id: '1234', op });
const refundArgs = (op) => ({ order_id: '1234', amount: 1250, op });
const runId = (ctx, suffix = '') => `run-${ctx.op(suffix)}`;

/** An exception as a result reports it: an `McpError`'s JSON-RPC `code` and `data`; else where it happened. */
function errorReport(err) {
  const report = {
    class: err?.constructor?.name ?? typeof err,
    message: String(err?.message ?? err),
    code: err?.code ?? null,
    data: err?.data ?? null,
  };
  if (err?.cause) report.cause = `${err.cause.name ?? err.cause.constructor?.name}: ${err.cause.message ?? err.cause}`;
  if (!(err instanceof McpError)) report.stack = String(err?.stack ?? '').split('\n').slice(0, 4);
  return report;
}

/** A `CallToolResult` as a result line reports it (README.md, "A call's outcome"). */
function resultSummary(result) {
  const structured = result.structuredContent ?? null;
  const isError = result.isError === true;
  const meta = result._meta ?? {};
  return {
    is_error: isError,
    code: isError && structured && typeof structured === 'object' ? (structured.code ?? null) : null,
    structured,
    text: (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n'),
    meta,
    replayed: meta['ballast/replayed'] === true,
  };
}

/** One call's outcome: its result summarised, `ok` (no exception), `elapsed_ms`; an exception is its `error`. */
async function outcomeOf(call) {
  const started = performance.now();
  try {
    return { ...resultSummary(await call()), ok: true, elapsed_ms: msSince(started) };
  } catch (err) {
    return { ok: false, error: errorReport(err), elapsed_ms: msSince(started) };
  }
}

/** A listed tool: its name, description, input schema and annotations. */
const toolSummary = (tool) => ({
  name: tool.name,
  description: tool.description ?? null,
  input_schema: tool.inputSchema ?? null,
  annotations: tool.annotations ?? null,
});

/**
 * Runs `body(client)` with a connected client whose transport sends the key and `run` (none when null), its HTTP
 * requests recorded in `ctx.out.http`; closes it after.
 */
async function withClient(ctx, run, body) {
  const http = (ctx.out.http ??= []);
  const recordingFetch = async (url, init) => {
    const sent = new Headers(init?.headers);
    const record = {
      method: (init?.method ?? 'GET').toUpperCase(),
      sent: Object.fromEntries(SENT_HEADERS.filter((name) => sent.has(name)).map((name) => [name, sent.get(name)])),
      status: null,
    };
    http.push(record);
    const response = await fetch(url, init);
    record.status = response.status;
    record.headers = selectHeaders(response.headers);
    return response;
  };
  const headers = { authorization: `Bearer ${ctx.apiKey}` };
  if (run !== null) headers['ballast-run-id'] = run;
  const transport = new StreamableHTTPClientTransport(new URL(ctx.baseURL), {
    requestInit: { headers },
    fetch: recordingFetch,
  });
  const client = new Client({ name: 'ballast-sdk-tests', version: '1.0.0' });
  await client.connect(transport, { timeout: TIMEOUT });
  ctx.out.protocol_version = transport.protocolVersion ?? null;
  try {
    return await body(client);
  } finally {
    await client.close();
  }
}

const call = (client, name, args, meta = undefined) => () =>
  client.callTool({ name, arguments: args, ...(meta ? { _meta: meta } : {}) }, undefined, { timeout: TIMEOUT });

async function listTools(client) {
  const tools = [];
  let cursor;
  for (let page = 0; page < 100; page++) {
    const listed = await client.listTools(cursor ? { cursor } : undefined, { timeout: TIMEOUT });
    tools.push(...listed.tools.map(toolSummary));
    cursor = listed.nextCursor;
    if (!cursor) break;
  }
  return tools;
}

const table = new Map([
  [
    'list_and_call',
    (ctx) =>
      withClient(ctx, runId(ctx), async (client) => {
        ctx.out.tools = await listTools(client);
        ctx.out.calls = {
          lookup_order: await outcomeOf(call(client, 'lookup_order', lookupArgs(ctx.op('-http')))),
          shop_lookup_order: await outcomeOf(call(client, 'shop_lookup_order', lookupArgs(ctx.op('-shop')))),
          create_refund: await outcomeOf(call(client, 'create_refund', refundArgs(ctx.op('-http')))),
          shop_create_refund: await outcomeOf(call(client, 'shop_create_refund', refundArgs(ctx.op('-shop')))),
        };
      }),
  ],
  [
    'lost_answer_reissued',
    (ctx) =>
      withClient(ctx, runId(ctx), async (client) => {
        const refund = call(client, 'shop_create_refund', refundArgs(ctx.op()));
        ctx.out.first = await outcomeOf(refund);
        ctx.out.reissued = await outcomeOf(refund);
      }),
  ],
  [
    'concurrent_same_key',
    async (ctx) => {
      // The same run and arguments: one operation by the run's fingerprint.
      await withClient(ctx, runId(ctx), async (client) => {
        const refund = call(client, 'shop_create_refund', refundArgs(ctx.op('-run')));
        ctx.out.by_run = await Promise.all(Array.from({ length: CONCURRENT }, () => outcomeOf(refund)));
      });
      // No run: the same explicit key in `_meta`.
      await withClient(ctx, null, async (client) => {
        const meta = { 'ballast/idempotency_key': `key-${ctx.op('-key')}` };
        const refund = call(client, 'shop_create_refund', refundArgs(ctx.op('-key')), meta);
        ctx.out.by_key = await Promise.all(Array.from({ length: CONCURRENT }, () => outcomeOf(refund)));
      });
    },
  ],
]);

await runScenarios({ program: 'mcp_node', table, opOf: (name) => `op-mcp-node-${name}`, errorReport });
