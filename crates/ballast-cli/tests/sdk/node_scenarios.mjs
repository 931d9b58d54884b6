// openai-node as a real client of the Ballast gateway: the scenarios of README.md, one JSON line each.
//
//     node crates/ballast-cli/tests/sdk/node_scenarios.mjs \
//         --base-url http://127.0.0.1:PORT/v1 --api-key KEY responses.tool_call chat.stream ...
//
// The SDK is the one scripts/sdk-clients installed in target/sdk/node (BALLAST_SDK_DIR overrides target/sdk).
// Every call sets its SDK timeout and `maxRetries` explicitly, so a wrong gateway can never hang the run; a
// watchdog ends the process if the whole run takes longer than `--watchdog` seconds (exit code 3).

import { emit, failed, msSince, runScenarios, selectHeaders, stderrLogger } from './sdk_common.mjs';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const sdkDir = process.env.BALLAST_SDK_DIR ?? resolve(here, '../../../../target/sdk');
const entry = join(sdkDir, 'node/node_modules/openai/index.mjs');
if (!existsSync(entry)) {
  process.stderr.write(`node_scenarios: ${entry} is missing: run scripts/sdk-clients first\n`);
  process.exit(2);
}
const { default: OpenAI } = await import(pathToFileURL(entry).href);

const HAPPY_TIMEOUT = 15_000; // ms; the calls that should simply succeed
const SHORT_TIMEOUT = 2_000; // the `timeout` and `long_stream` scenarios
const SHED_TIMEOUT = 30_000; // each of the two `shed` calls, its SDK retry wait included
const DEFAULT_MAX_RETRIES = 2; // the SDK's default, said explicitly
const MAX_TURNS = 4; // the tool-calling loop's bound (the script has three turns)

// Request headers the SDK sets itself, reported per HTTP request it sent.
const SENT_HEADERS = ['x-stainless-retry-count', 'x-stainless-read-timeout', 'x-stainless-timeout'];

const TOOL_SCHEMAS = {
  lookup_order: {
    description: 'Look up an order by id.',
    parameters: {
      type: 'object',
      properties: { order_id: { type: 'string' }, op: { type: 'string' } },
      required: ['order_id', 'op'],
    },
  },
  create_refund: {
    description: 'Refund an order.',
    parameters: {
      type: 'object',
      properties: { order_id: { type: 'string' }, amount: { type: 'number' }, op: { type: 'string' } },
      required: ['order_id', 'amount', 'op'],
    },
  },
};
const RESPONSES_TOOLS = Object.entries(TOOL_SCHEMAS).map(([name, schema]) => ({ type: 'function', name, ...schema }));
const CHAT_TOOLS = Object.entries(TOOL_SCHEMAS).map(([name, schema]) => ({
  type: 'function',
  function: { name, ...schema },
}));
const TOOL_OUTPUTS = { lookup_order: { order_id: '1234', amount: 12.5 }, create_refund: { status: 'succeeded' } };

const userTurn = (op) => `Refund order 1234, op=${op}`;
const toolOutput = (name) => JSON.stringify(TOOL_OUTPUTS[name] ?? { error: `no such tool: ${name}` });

/** Four older user/assistant turns of about 2,000 characters each, then the user turn naming `op`. */
function longHistory(op) {
  const filler = 'The quick brown fox jumps over the lazy dog while the ledger is reconciled line by line. ';
  const messages = [];
  for (let turn = 0; turn < 4; turn++) {
    messages.push({ role: 'user', content: `Earlier question ${turn}: ` + filler.repeat(22) });
    messages.push({ role: 'assistant', content: `Earlier answer ${turn}: ` + filler.repeat(22) });
  }
  messages.push({ role: 'user', content: userTurn(op) });
  return messages;
}


/** An exception as a result reports it: its class, and what the SDK exposes of status, code and body. */
function errorReport(err) {
  const report = {
    class: err?.constructor?.name ?? typeof err,
    message: String(err?.message ?? err),
    status: err?.status ?? null,
    code: err?.code ?? null,
    type: err?.type ?? null,
    param: err?.param ?? null,
    body: err?.error ?? null,
    request_id: err?.requestID ?? null,
    headers: selectHeaders(err?.headers),
  };
  if (err?.cause) report.cause = `${err.cause.name ?? err.cause.constructor?.name}: ${err.cause.message ?? err.cause}`;
  if (err?.cause?.cause) report.cause += ` (${err.cause.cause.code ?? err.cause.cause.message ?? err.cause.cause})`;
  if (!(err instanceof OpenAI.OpenAIError)) {
    // Not an SDK error: a bug in the program or an unexpected answer shape; keep where it happened.
    report.stack = String(err?.stack ?? '').split('\n').slice(0, 4);
  }
  return report;
}


/**
 * A client whose every HTTP request (each SDK retry included) is recorded in `http`, and the request options
 * every call passes: openai-node sends `x-stainless-timeout` only for a timeout given per request (7.59.0,
 * src/client.ts buildRequest passes the caller's options, not the client's defaults, to buildHeaders).
 */
function makeClient(ctx, { timeout, maxRetries, http }) {
  const recordingFetch = async (url, init) => {
    const sent = new Headers(init?.headers);
    const record = {
      method: (init?.method ?? 'GET').toUpperCase(),
      path: new URL(typeof url === 'string' || url instanceof URL ? url : url.url).pathname,
      sent: Object.fromEntries(SENT_HEADERS.filter((name) => sent.has(name)).map((name) => [name, sent.get(name)])),
      status: null,
    };
    http.push(record);
    const response = await fetch(url, init);
    record.status = response.status;
    record.headers = selectHeaders(response.headers);
    return response;
  };
  const sdk = new OpenAI({
    baseURL: ctx.baseURL,
    apiKey: ctx.apiKey,
    timeout,
    maxRetries,
    fetch: recordingFetch,
    logger: stderrLogger, // stdout carries only the result lines, whatever OPENAI_LOG says
  });
  return { sdk, options: { timeout, maxRetries } };
}

/** The HTTP requests one SDK call sent: each SDK retry is one more. */
const sdkAttempts = (http) => ({ http, sdk_requests: http.length, sdk_retried: http.length > 1 });

const resource = (client, api) => (api === 'responses' ? client.sdk.responses : client.sdk.chat.completions);

/** The first turn of the refund conversation for `op`, in `api`'s shape, tools declared. */
function request(api, model, op) {
  return api === 'responses'
    ? { model, input: userTurn(op), tools: RESPONSES_TOOLS }
    : { model, messages: [{ role: 'user', content: userTurn(op) }], tools: CHAT_TOOLS };
}

/**
 * The last turn of the refund conversation for `op`, the whole history sent (no `previous_response_id`):
 * answered in text. A streamed chat answer in text starts with a bare role chunk (nothing to commit), where a
 * call's first chunk already names the function.
 */
function finalRequest(api, model, op) {
  const calls = [
    [`call_lookup_${op}`, 'lookup_order', JSON.stringify({ op, order_id: '1234' })],
    [`call_refund_${op}`, 'create_refund', JSON.stringify({ amount: 12.5, op, order_id: '1234' })],
  ];
  const first = { role: 'user', content: userTurn(op) };
  if (api === 'responses') {
    const input = [first];
    for (const [call_id, name, args] of calls) {
      input.push({ type: 'function_call', call_id, name, arguments: args });
      input.push({ type: 'function_call_output', call_id, output: toolOutput(name) });
    }
    return { model, input, tools: RESPONSES_TOOLS };
  }
  const messages = [first];
  for (const [id, name, args] of calls) {
    messages.push({
      role: 'assistant',
      content: null,
      tool_calls: [{ id, type: 'function', function: { name, arguments: args } }],
    });
    messages.push({ role: 'tool', tool_call_id: id, content: toolOutput(name) });
  }
  return { model, messages, tools: CHAT_TOOLS };
}

/** A non-streamed answer: its id, `model`, text and function calls (name, id, arguments string). */
function summary(api, answer) {
  if (api === 'responses') {
    const calls = (answer.output ?? [])
      .filter((item) => item.type === 'function_call')
      .map((item) => ({ name: item.name, call_id: item.call_id, arguments: item.arguments }));
    return { id: answer.id, model: answer.model, response_status: answer.status, text: answer.output_text ?? '', calls };
  }
  const choice = answer.choices[0];
  const calls = (choice.message.tool_calls ?? []).map((call) => ({
    name: call.function.name,
    call_id: call.id,
    arguments: call.function.arguments,
  }));
  return {
    id: answer.id,
    model: answer.model,
    finish_reason: choice.finish_reason,
    text: choice.message.content ?? '',
    calls,
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

/** One non-streamed call through `.withResponse()`: its outcome and the parsed answer (null on error). */
async function answered(client, api, params) {
  let answer = null;
  const fields = await outcome(async () => {
    const { data, response } = await resource(client, api).create(params, client.options).withResponse();
    answer = data;
    return { status: response.status, headers: selectHeaders(response.headers), ...summary(api, data) };
  });
  return [fields, answer];
}

/** A stream put back together as it arrives, kept when the stream throws. */
class Reassembly {
  constructor(api, started) {
    Object.assign(this, { api, started, last: started, events: 0, types: [], text: '', calls: new Map() });
    Object.assign(this, { model: null, terminal: null, final: null, firstEventMs: null, maxGapMs: 0 });
  }

  feed(item) {
    const moment = performance.now();
    if (this.firstEventMs === null) this.firstEventMs = msSince(this.started);
    else this.maxGapMs = Math.max(this.maxGapMs, Math.round(moment - this.last));
    this.last = moment;
    this.events += 1;
    if (this.api === 'responses') this.responsesEvent(item);
    else this.chatChunk(item);
  }

  call(index) {
    if (!this.calls.has(index)) this.calls.set(index, { name: null, call_id: null, arguments: '' });
    return this.calls.get(index);
  }

  responsesEvent(event) {
    const kind = event.type;
    this.types.push(kind);
    if (kind === 'response.created' || kind === 'response.in_progress') {
      this.model = event.response?.model ?? this.model;
    } else if (kind === 'response.output_item.added' && event.item?.type === 'function_call') {
      Object.assign(this.call(event.output_index), { name: event.item.name, call_id: event.item.call_id });
    } else if (kind === 'response.function_call_arguments.delta') {
      this.call(event.output_index).arguments += event.delta;
    } else if (kind === 'response.output_text.delta') {
      this.text += event.delta;
    } else if (['response.completed', 'response.incomplete', 'response.failed'].includes(kind)) {
      this.terminal = kind;
      this.model = event.response?.model ?? this.model;
      this.final = summary('responses', event.response);
    }
  }

  chatChunk(chunk) {
    this.types.push('chunk');
    this.model = chunk.model || this.model;
    for (const choice of chunk.choices ?? []) {
      const delta = choice.delta ?? {};
      if (delta.content) this.text += delta.content;
      for (const call of delta.tool_calls ?? []) {
        const entry = this.call(call.index);
        if (call.id) entry.call_id = call.id;
        if (call.function?.name) entry.name = call.function.name;
        entry.arguments += call.function?.arguments ?? '';
      }
      if (choice.finish_reason) this.terminal = `finish_reason:${choice.finish_reason}`;
    }
  }

  report() {
    const fields = {
      events: this.events,
      event_types: this.types,
      model: this.model,
      text: this.text,
      calls: [...this.calls.keys()].sort((a, b) => a - b).map((index) => this.calls.get(index)),
      terminal: this.terminal,
      completed: ['response.completed', 'finish_reason:stop', 'finish_reason:tool_calls'].includes(this.terminal),
      first_event_ms: this.firstEventMs,
      max_gap_ms: this.maxGapMs,
    };
    if (this.final !== null) fields.final = this.final;
    return fields;
  }
}

/** One streamed call, read to its end: its outcome with the reassembly (also when iterating threw). */
async function streamed(client, api, params) {
  const started = performance.now();
  const assembly = new Reassembly(api, started);
  const fields = {};
  try {
    const { data: stream, response } = await resource(client, api)
      .create({ ...params, stream: true }, client.options)
      .withResponse();
    fields.status = response.status;
    fields.headers = selectHeaders(response.headers);
    for await (const item of stream) assembly.feed(item);
    fields.ok = true;
  } catch (err) {
    fields.ok = false;
    fields.error = errorReport(err);
  }
  Object.assign(fields, assembly.report());
  fields.elapsed_ms = msSince(started);
  return fields;
}

// --- the scenarios ---------------------------------------------------------------------------------------------

/** The three-turn agent loop on model `agent`: lookup_order, create_refund, then the final text. */
async function toolCall(ctx, api) {
  const http = [];
  const client = makeClient(ctx, { timeout: HAPPY_TIMEOUT, maxRetries: 0, http });
  const op = ctx.op();
  const turns = [];
  Object.assign(ctx.out, { op, turns, http });
  let params = request(api, 'agent', op);
  for (let i = 0; i < MAX_TURNS; i++) {
    const [turn, answer] = await answered(client, api, params);
    turns.push(turn);
    if (answer === null || turn.calls.length === 0) break;
    if (api === 'responses') {
      const input = turn.calls.map((call) => ({
        type: 'function_call_output',
        call_id: call.call_id,
        output: toolOutput(call.name),
      }));
      params = { model: 'agent', previous_response_id: answer.id, input, tools: RESPONSES_TOOLS };
    } else {
      const assistant = {
        role: 'assistant',
        content: turn.text || null,
        tool_calls: turn.calls.map((call) => ({
          id: call.call_id,
          type: 'function',
          function: { name: call.name, arguments: call.arguments },
        })),
      };
      const replies = turn.calls.map((call) => ({
        role: 'tool',
        tool_call_id: call.call_id,
        content: toolOutput(call.name),
      }));
      params = { ...params, messages: [...params.messages, assistant, ...replies] };
    }
  }
  const last = turns.at(-1);
  ctx.out.final_text = last?.ok ? last.text : null;
}

/** The first turn (a call) and the last turn (text), each streamed and reassembled, then not streamed. */
async function stream(ctx, api) {
  const http = [];
  const client = makeClient(ctx, { timeout: HAPPY_TIMEOUT, maxRetries: 0, http });
  ctx.out.op = ctx.op();
  let params = request(api, 'agent', ctx.op());
  ctx.out.stream = await streamed(client, api, params);
  [ctx.out.json] = await answered(client, api, params);
  params = finalRequest(api, 'agent', ctx.op());
  ctx.out.final_stream = await streamed(client, api, params);
  [ctx.out.final_json] = await answered(client, api, params);
  ctx.out.http = http;
}

/** Model `quota`: the last turn (text) streamed, then not streamed; both answered by the fallback. */
async function quotaFallback(ctx, api) {
  const http = [];
  const client = makeClient(ctx, { timeout: HAPPY_TIMEOUT, maxRetries: 0, http });
  ctx.out.op = ctx.op();
  const params = finalRequest(api, 'quota', ctx.op());
  ctx.out.stream = await streamed(client, api, params);
  [ctx.out.json] = await answered(client, api, params);
  ctx.out.http = http;
}

/** One call; its outcome is the scenario's result. */
async function single(ctx, api, { model, timeout, maxRetries, streaming = false, params = null }) {
  const http = [];
  const client = makeClient(ctx, { timeout, maxRetries, http });
  params ??= request(api, model, ctx.op());
  ctx.out.op = ctx.op();
  const call = streaming ? await streamed(client, api, params) : (await answered(client, api, params))[0];
  delete call.ok;
  Object.assign(ctx.out, call, sdkAttempts(http));
}

/** Two calls at once on model `shed` (one slot, no queue), default maxRetries: both outcomes. */
async function shed(ctx, api) {
  const one = async (index) => {
    const http = [];
    const client = makeClient(ctx, { timeout: SHED_TIMEOUT, maxRetries: DEFAULT_MAX_RETRIES, http });
    const [call] = await answered(client, api, request(api, 'shed', ctx.op(`-${index + 1}`)));
    return { ...call, ...sdkAttempts(http) };
  };
  ctx.out.outcomes = await Promise.all([one(0), one(1)]);
}

async function previousResponse(ctx) {
  const http = [];
  const client = makeClient(ctx, { timeout: HAPPY_TIMEOUT, maxRetries: 0, http });
  Object.assign(ctx.out, { op: 'op-state', http });
  const [first, answer] = await answered(client, 'responses', request('responses', 'stateful', 'op-state'));
  ctx.out.turn1 = first;
  if (answer === null) return;
  const input = first.calls.map((call) => ({
    type: 'function_call_output',
    call_id: call.call_id,
    output: toolOutput(call.name),
  }));
  [ctx.out.turn2] = await answered(client, 'responses', {
    model: 'stateful',
    previous_response_id: answer.id,
    input,
    tools: RESPONSES_TOOLS,
  });
}

/** A long history then `Refund order 1234, op=op-ctx`, on a model whose route truncates or moves up. */
async function context(ctx, api, model) {
  const messages = longHistory('op-ctx');
  const params =
    api === 'responses'
      ? { model, input: messages, tools: RESPONSES_TOOLS }
      : { model, messages, tools: CHAT_TOOLS };
  ctx.out.history_chars = messages.reduce((sum, message) => sum + message.content.length, 0);
  await single(ctx, api, { model, timeout: HAPPY_TIMEOUT, maxRetries: 0, params });
  ctx.out.op = 'op-ctx';
}

async function embeddings(ctx) {
  const http = [];
  const client = makeClient(ctx, { timeout: HAPPY_TIMEOUT, maxRetries: 0, http });
  ctx.out.http = http;
  const { data, response } = await client.sdk.embeddings
    .create({ model: 'embed', input: ['a', 'b'] }, client.options)
    .withResponse();
  Object.assign(ctx.out, {
    status: response.status,
    headers: selectHeaders(response.headers),
    model: data.model,
    count: data.data.length,
    lengths: data.data.map((item) => item.embedding.length),
  });
}

async function models(ctx) {
  const http = [];
  const client = makeClient(ctx, { timeout: HAPPY_TIMEOUT, maxRetries: 0, http });
  ctx.out.http = http;
  const { data: page, response } = await client.sdk.models.list(client.options).withResponse();
  const ids = [];
  for await (const model of page) ids.push(model.id);
  Object.assign(ctx.out, { status: response.status, headers: selectHeaders(response.headers), ids });
  // `models.retrieve`: a route, then a name no route has (the SDK's NotFoundError, with the gateway's message).
  ctx.out.retrieved = await outcome(async () => ({ id: (await client.sdk.models.retrieve('agent', client.options)).id }));
  ctx.out.unknown = await outcome(async () => ({
    id: (await client.sdk.models.retrieve('no-such-model', client.options)).id,
  }));
  ctx.out.unknown_path = await outcome(async () => ({ body: await client.sdk.get('/no-such-path', client.options) }));
}

function scenarios() {
  const table = new Map();
  for (const api of ['responses', 'chat']) {
    table.set(`${api}.tool_call`, (ctx) => toolCall(ctx, api));
    table.set(`${api}.stream`, (ctx) => stream(ctx, api));
    table.set(`${api}.failing`, (ctx) =>
      single(ctx, api, { model: 'failing', timeout: HAPPY_TIMEOUT, maxRetries: DEFAULT_MAX_RETRIES }),
    );
    table.set(`${api}.shed`, (ctx) => shed(ctx, api));
    table.set(`${api}.timeout`, (ctx) => single(ctx, api, { model: 'slow', timeout: SHORT_TIMEOUT, maxRetries: 0 }));
    table.set(`${api}.long_stream`, (ctx) =>
      single(ctx, api, { model: 'slow-stream', timeout: SHORT_TIMEOUT, maxRetries: 0, streaming: true }),
    );
    table.set(`${api}.quota_fallback`, (ctx) => quotaFallback(ctx, api));
    if (api === 'responses') table.set('responses.previous_response', previousResponse);
    table.set(`${api}.cut`, (ctx) =>
      single(ctx, api, { model: 'cut', timeout: HAPPY_TIMEOUT, maxRetries: 0, streaming: true }),
    );
    table.set(`${api}.context_truncate`, (ctx) => context(ctx, api, 'small'));
    table.set(`${api}.context_fallback`, (ctx) => context(ctx, api, 'small-fallback'));
  }
  table.set('embeddings', embeddings);
  table.set('models', models);
  return table;
}

await runScenarios({ program: 'node_scenarios.mjs', table: scenarios(), opOf: (name) => `op-node-${name.replaceAll('.', '-')}`, errorReport });
