// @anthropic-ai/sdk as a real client of the Ballast gateway: the Messages scenarios of README.md, one JSON line
// each.
//
//     node crates/ballast-cli/tests/sdk/anthropic_scenarios.mjs \
//         --base-url http://127.0.0.1:PORT --api-key KEY message stream ...
//
// `--base-url` is the gateway's root: the SDK adds `/v1/messages` itself. The SDK is the one scripts/sdk-clients
// installed in target/sdk/node (BALLAST_SDK_DIR overrides target/sdk). Every call sets its SDK timeout and
// `maxRetries` explicitly, so a wrong gateway can never hang the run; a watchdog ends the process if the whole run
// takes longer than `--watchdog` seconds (exit code 3).

import { emit, failed, msSince, runScenarios, selectHeaders, stderrLogger } from './sdk_common.mjs';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const sdkDir = process.env.BALLAST_SDK_DIR ?? resolve(here, '../../../../target/sdk');
const entry = join(sdkDir, 'node/node_modules/@anthropic-ai/sdk/index.mjs');
if (!existsSync(entry)) {
  process.stderr.write(`anthropic_scenarios: ${entry} is missing: run scripts/sdk-clients first\n`);
  process.exit(2);
}
const { default: Anthropic } = await import(pathToFileURL(entry).href);

const HAPPY_TIMEOUT = 15_000; // ms; every call here, the failing ones too, ends well before
const DEFAULT_MAX_RETRIES = 2; // the SDK's default, said explicitly
const MAX_TOKENS = 1024;
const MAX_TURNS = 4; // the tool-use loop's bound (the script has three turns)
const STORM_CALLS = 8; // the `storm` scenario makes at least this many calls...
const STORM_SPREAD = 600; // ...over at least this many ms (a breaker's streak must span 500 ms by default)...
const STORM_MAX_CALLS = 40; // ...and at most this many

// Request headers the SDK sets itself, reported per HTTP request it sent (the key's header by name only).
const SENT_HEADERS = [
  'x-stainless-retry-count',
  'x-stainless-read-timeout',
  'x-stainless-timeout',
  'anthropic-version',
];
const AUTH_HEADERS = ['authorization', 'x-api-key'];

const TOOLS = [
  {
    name: 'lookup_order',
    description: 'Look up an order by id.',
    input_schema: {
      type: 'object',
      properties: { order_id: { type: 'string' }, op: { type: 'string' } },
      required: ['order_id', 'op'],
    },
  },
  {
    name: 'create_refund',
    description: 'Refund an order.',
    input_schema: {
      type: 'object',
      properties: { order_id: { type: 'string' }, amount: { type: 'number' }, op: { type: 'string' } },
      required: ['order_id', 'amount', 'op'],
    },
  },
];
const TOOL_OUTPUTS = { lookup_order: { order_id: '1234', amount: 12.5 }, create_refund: { status: 'succeeded' } };

const userTurn = (op) => ({ role: 'user', content: `Refund order 1234, op=${op}` });

/** The first turn of the refund conversation for `op`: answered with a `lookup_order` tool use. */
const firstRequest = (model, op) => ({ model, max_tokens: MAX_TOKENS, messages: [userTurn(op)], tools: TOOLS });

/** The last turn of the refund conversation for `op`, the whole history sent: answered in text. */
function finalRequest(model, op) {
  const messages = [userTurn(op)];
  for (const [noun, name, input] of [
    ['lookup', 'lookup_order', { op, order_id: '1234' }],
    ['refund', 'create_refund', { amount: 12.5, op, order_id: '1234' }],
  ]) {
    const id = `toolu_${noun}_${op}`;
    messages.push({ role: 'assistant', content: [{ type: 'tool_use', id, name, input }] });
    messages.push({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: id, content: JSON.stringify(TOOL_OUTPUTS[name]) }],
    });
  }
  return { model, max_tokens: MAX_TOKENS, messages, tools: TOOLS };
}


/**
 * An exception as a result reports it: its class, and what the SDK exposes — `status`, `type` (the error's type,
 * `overloaded_error`...), `error_code` (`error.details.error_code`), `body` (the error object) and `headers` — and
 * `code`, the gateway's stable code from the body's `error.code` (the SDK has no property for it).
 */
function errorReport(err) {
  const report = {
    class: err?.constructor?.name ?? typeof err,
    message: String(err?.message ?? err),
    status: err?.status ?? null,
    code: err?.error?.error?.code ?? null,
    type: err?.type ?? null,
    error_code: err?.errorCode ?? null,
    body: err?.error ?? null,
    request_id: err?.requestID ?? null,
    headers: selectHeaders(err?.headers),
  };
  if (err?.cause) report.cause = `${err.cause.name ?? err.cause.constructor?.name}: ${err.cause.message ?? err.cause}`;
  if (!(err instanceof Anthropic.AnthropicError)) {
    // Not an SDK error: a bug in the program or an unexpected answer shape; keep where it happened.
    report.stack = String(err?.stack ?? '').split('\n').slice(0, 4);
  }
  return report;
}


/**
 * A client whose every HTTP request (each SDK retry included) is recorded in `http`, and the request options every
 * call passes (the timeout per request too, as the OpenAI programs do).
 */
function makeClient(ctx, { maxRetries, http, headers = undefined }) {
  const recordingFetch = async (url, init) => {
    const sent = new Headers(init?.headers);
    const record = {
      method: (init?.method ?? 'GET').toUpperCase(),
      path: new URL(typeof url === 'string' || url instanceof URL ? url : url.url).pathname,
      sent: Object.fromEntries(SENT_HEADERS.filter((name) => sent.has(name)).map((name) => [name, sent.get(name)])),
      key_header: AUTH_HEADERS.filter((name) => sent.has(name)),
      status: null,
    };
    http.push(record);
    const response = await fetch(url, init);
    record.status = response.status;
    record.headers = selectHeaders(response.headers);
    return response;
  };
  const sdk = new Anthropic({
    baseURL: ctx.baseURL,
    apiKey: ctx.apiKey,
    timeout: HAPPY_TIMEOUT,
    maxRetries,
    defaultHeaders: headers,
    fetch: recordingFetch,
    logger: stderrLogger, // stdout carries only the result lines, whatever ANTHROPIC_LOG says
  });
  return { sdk, options: { timeout: HAPPY_TIMEOUT, maxRetries } };
}

/** The HTTP requests one SDK call sent: each SDK retry is one more. */
const sdkAttempts = (http) => ({ http, sdk_requests: http.length, sdk_retried: http.length > 1 });

/** A message: its id, `model`, stop reason, tool uses, text, content blocks and usage. */
function summary(message) {
  const uses = message.content
    .filter((block) => block.type === 'tool_use')
    .map((block) => ({ name: block.name, id: block.id, input: block.input }));
  const text = message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  const { input_tokens, output_tokens } = message.usage;
  return {
    id: message.id,
    model: message.model,
    stop_reason: message.stop_reason,
    tool_uses: uses,
    text,
    content: message.content.map((block) => JSON.parse(JSON.stringify(block, (_, v) => (v === null ? undefined : v)))),
    usage: { input_tokens, output_tokens },
  };
}

/** Runs `fn`: its fields, `ok` and `elapsed_ms`; an exception is its `error`, never thrown. */
async function outcome(fn) {
  const started = performance.now();
  let fields;
  try {
    fields = { ...(await fn()) };
    fields.ok = !('error' in fields);
  } catch (err) {
    fields = { ok: false, error: errorReport(err) };
  }
  fields.elapsed_ms = msSince(started);
  return fields;
}

/** One non-streamed `messages.create` through `.withResponse()`: its outcome and the message (null on error). */
async function created(client, params) {
  let message = null;
  const fields = await outcome(async () => {
    const { data, response } = await client.sdk.messages.create(params, client.options).withResponse();
    message = data;
    return { status: response.status, headers: selectHeaders(response.headers), ...summary(data) };
  });
  return [fields, message];
}

/**
 * One `messages.stream(...)` read to its end: the event types, the text as it arrived, the final message the SDK
 * reassembled; what arrived before an exception is kept beside it.
 */
async function streamed(client, params) {
  const started = performance.now();
  const fields = { event_types: [], text: '', content_events: 0 };
  try {
    const stream = client.sdk.messages.stream(params, client.options);
    const { response } = await stream.withResponse();
    fields.status = response.status;
    fields.headers = selectHeaders(response.headers);
    for await (const event of stream) {
      fields.event_types.push(event.type);
      if (event.type === 'message_start') fields.model = event.message.model;
      else if (event.type === 'content_block_delta') {
        fields.content_events += 1;
        if (event.delta.type === 'text_delta') fields.text += event.delta.text;
      }
    }
    fields.final = summary(await stream.finalMessage());
    fields.ok = true;
  } catch (err) {
    fields.ok = false;
    fields.error = errorReport(err);
  }
  fields.message_stop = fields.event_types.includes('message_stop');
  fields.elapsed_ms = msSince(started);
  return fields;
}

/**
 * `POST /v1/tools/{name}` on the gateway with the model's input as the body, under the run and a step (the gateway
 * derives a side effect's key from them): its status and answer.
 */
async function callTool(ctx, runId, name, input, step) {
  const answer = await fetch(`${ctx.baseURL}/v1/tools/${name}`, {
    method: 'POST',
    body: JSON.stringify(input),
    headers: {
      Authorization: `Bearer ${ctx.apiKey}`,
      'content-type': 'application/json',
      'ballast-run-id': runId,
      'ballast-step-id': step,
    },
    signal: AbortSignal.timeout(HAPPY_TIMEOUT),
  });
  return { name, step, status: answer.status, output: await answer.text() };
}

// --- the scenarios ---------------------------------------------------------------------------------------------

/**
 * The agent loop on `claude`: each tool use called through the gateway's tools under one run, its output sent back
 * as a `tool_result`, until the final text.
 */
async function message(ctx) {
  const http = [];
  const runId = `run-${crypto.randomUUID()}`;
  const client = makeClient(ctx, { maxRetries: 0, http, headers: { 'ballast-run-id': runId } });
  const op = ctx.op();
  const turns = [];
  const toolCalls = [];
  Object.assign(ctx.out, { op, turns, tool_calls: toolCalls, http });
  let params = firstRequest('claude', op);
  for (let turnNumber = 1; turnNumber <= MAX_TURNS; turnNumber++) {
    const [turn, answer] = await created(client, params);
    turns.push(turn);
    if (answer === null || answer.stop_reason !== 'tool_use') break;
    const results = [];
    for (const use of turn.tool_uses) {
      const called = await callTool(ctx, runId, use.name, use.input, `turn-${turnNumber}-${use.name}`);
      toolCalls.push(called);
      const isError = called.status !== 200;
      results.push({ type: 'tool_result', tool_use_id: use.id, content: called.output, is_error: isError });
    }
    params = {
      ...params,
      messages: [...params.messages, { role: 'assistant', content: turn.content }, { role: 'user', content: results }],
    };
  }
  ctx.out.tool_names = turns.map((turn) => (turn.tool_uses ?? []).map((use) => use.name));
  const last = turns.at(-1);
  ctx.out.final_text = last?.ok ? last.text : null;
}

/** The first turn (a tool use) and the last turn (text) on `claude`, each streamed, then not streamed. */
async function stream(ctx) {
  const http = [];
  const client = makeClient(ctx, { maxRetries: 0, http });
  Object.assign(ctx.out, { op: ctx.op(), http });
  for (const [part, params] of [
    ['first', firstRequest('claude', ctx.op())],
    ['final', finalRequest('claude', ctx.op())],
  ]) {
    ctx.out[`${part}_stream`] = await streamed(client, params);
    [ctx.out[`${part}_json`]] = await created(client, params);
  }
}

/**
 * `claude-overloaded`, whose primary is overloaded on every attempt (a stream hears it after `message_start`): the
 * last turn streamed, then not; the SDK retries nothing, the gateway falls back.
 */
async function overloadedBeforeContent(ctx) {
  const http = [];
  const client = makeClient(ctx, { maxRetries: 0, http });
  Object.assign(ctx.out, { op: ctx.op(), http });
  const params = finalRequest('claude-overloaded', ctx.op());
  ctx.out.stream = await streamed(client, params);
  [ctx.out.json] = await created(client, params);
}

/** `claude-late`, whose streams send `overloaded_error` after their first content event, default retries. */
async function overloadedAfterContent(ctx) {
  const http = [];
  const client = makeClient(ctx, { maxRetries: DEFAULT_MAX_RETRIES, http });
  ctx.out.op = ctx.op();
  const call = await streamed(client, finalRequest('claude-late', ctx.op()));
  delete call.ok;
  Object.assign(ctx.out, call, sdkAttempts(http));
}

/** `claude-spend`, whose provider's spend limit is reached: one call, the SDK's default retries. */
async function spendLimit(ctx) {
  const http = [];
  const client = makeClient(ctx, { maxRetries: DEFAULT_MAX_RETRIES, http });
  ctx.out.op = ctx.op();
  const [call] = await created(client, firstRequest('claude-spend', ctx.op()));
  delete call.ok;
  Object.assign(ctx.out, call, sdkAttempts(http));
}

/**
 * `claude-storm`, one overloaded deployment: calls with the SDK's default retries, at least `STORM_CALLS` over at
 * least `STORM_SPREAD` ms (no sleeping: the next call starts when one ends).
 */
async function storm(ctx) {
  const started = performance.now();
  const calls = [];
  Object.assign(ctx.out, { op: ctx.op(), calls });
  while (calls.length < STORM_MAX_CALLS && (calls.length < STORM_CALLS || msSince(started) < STORM_SPREAD)) {
    const http = [];
    const client = makeClient(ctx, { maxRetries: DEFAULT_MAX_RETRIES, http });
    const [call] = await created(client, firstRequest('claude-storm', ctx.op(`-${calls.length + 1}`)));
    calls.push({ ...call, ...sdkAttempts(http) });
  }
  ctx.out.spread_ms = msSince(started);
}

/** `messages.countTokens` on `claude` for the first turn (tools declared). */
async function countTokens(ctx) {
  const http = [];
  const client = makeClient(ctx, { maxRetries: 0, http });
  const { max_tokens: _, ...params } = firstRequest('claude', ctx.op());
  const { data, response } = await client.sdk.messages.countTokens(params, client.options).withResponse();
  Object.assign(ctx.out, {
    op: ctx.op(),
    status: response.status,
    headers: selectHeaders(response.headers),
    input_tokens: data.input_tokens,
    http,
  });
}

/** `models.list` and `models.retrieve`: the gateway's routes as Anthropic's model objects. */
async function models(ctx) {
  const client = makeClient(ctx, { maxRetries: 0, http: [] });
  const listed = [];
  for await (const model of client.sdk.models.list({}, client.options)) listed.push(model.id);
  const retrieved = await client.sdk.models.retrieve('claude', {}, client.options);
  Object.assign(ctx.out, { listed, retrieved: retrieved.id, display_name: retrieved.display_name });
}

const SCENARIOS = new Map([
  ['message', message],
  ['stream', stream],
  ['overloaded_before_content', overloadedBeforeContent],
  ['overloaded_after_content', overloadedAfterContent],
  ['spend_limit', spendLimit],
  ['storm', storm],
  ['count_tokens', countTokens],
  ['models', models],
]);

await runScenarios({ program: 'anthropic_scenarios.mjs', table: SCENARIOS, opOf: (name) => `op-claude-node-${name}`, errorReport });
