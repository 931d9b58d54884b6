// What the Node SDK programs (node_scenarios.mjs, anthropic_scenarios.mjs) share: reading their arguments, running
// their scenarios under a watchdog with one JSON line each, and the small helpers every scenario uses.

import { Console } from 'node:console';

/** The response headers a result reports: the gateway's (`ballast-*`) and these. */
const SELECTED_HEADERS = ['x-request-id', 'x-should-retry', 'retry-after', 'retry-after-ms', 'content-type'];

export const msSince = (started) => Math.round(performance.now() - started);
export const emit = (result) => process.stdout.write(JSON.stringify(result) + '\n');
export const stderrLogger = new Console({ stdout: process.stderr, stderr: process.stderr });

/** The selected response headers (above), lowercase. */
export function selectHeaders(headers) {
  const picked = {};
  if (!headers || typeof headers.forEach !== 'function') return picked;
  headers.forEach((value, name) => {
    const lower = name.toLowerCase();
    if (SELECTED_HEADERS.includes(lower) || lower.startsWith('ballast-')) picked[lower] = value;
  });
  return picked;
}

/** A call's outcome that failed, alone or in a list. */
export function failed(value) {
  if (Array.isArray(value)) return value.some(failed);
  return value !== null && typeof value === 'object' && value.ok === false;
}

/** The arguments of `program`: `--base-url URL [--api-key KEY] [--watchdog SECONDS] SCENARIO...` of `known`. */
function parseArgs(program, argv, known) {
  const usage =
    `usage: ${program} --base-url URL [--api-key KEY] [--watchdog SECONDS] SCENARIO...\n` +
    `scenarios: ${known.join(' ')} (or all)\n`;
  const args = { baseURL: null, apiKey: 'sk-ballast-test', watchdog: 120, scenarios: [] };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${arg} needs a value`);
      return argv[++i];
    };
    if (arg === '--base-url') args.baseURL = value().replace(/\/+$/, '');
    else if (arg === '--api-key') args.apiKey = value();
    else if (arg === '--watchdog') args.watchdog = Number(value());
    else if (arg === '-h' || arg === '--help') {
      process.stdout.write(usage);
      process.exit(0);
    } else if (arg === 'all') args.scenarios.push(...known);
    else args.scenarios.push(arg);
  }
  const unknown = args.scenarios.filter((name) => !known.includes(name));
  const problem = !args.baseURL
    ? '--base-url is required'
    : args.scenarios.length === 0
      ? 'name at least one scenario'
      : !(args.watchdog > 0)
        ? '--watchdog must be a positive number of seconds'
        : unknown.length > 0
          ? `unknown scenario(s): ${unknown.join(' ')}`
          : null;
  if (problem) {
    process.stderr.write(`${usage}${program}: error: ${problem}\n`);
    process.exit(2);
  }
  return args;
}

/**
 * Runs the scenarios of `table` (name -> async function of a context) named on the command line of `program`, one
 * JSON line each (`errorReport` says what an exception was; `opOf(name)` is the scenario's operation prefix), all
 * under the watchdog; then exits.
 */
export async function runScenarios({ program, table, opOf, errorReport }) {
  process.on('unhandledRejection', (reason) => {
    process.stderr.write(`${program}: unhandled rejection: ${reason?.stack ?? reason}\n`);
  });
  let args;
  try {
    args = parseArgs(program, process.argv.slice(2), [...table.keys()]);
  } catch (err) {
    process.stderr.write(`${program}: error: ${err.message}\n`);
    process.exit(2);
  }
  let current = '(none)';
  let scenarioStarted = performance.now();
  setTimeout(() => {
    emit({
      scenario: current,
      ok: false,
      elapsed_ms: msSince(scenarioStarted),
      error: { class: 'Watchdog', message: `the run took over ${args.watchdog} s; killed` },
    });
    process.exit(3);
  }, args.watchdog * 1000).unref();

  for (const name of args.scenarios) {
    current = name;
    const started = (scenarioStarted = performance.now());
    const prefix = opOf(name);
    const ctx = { baseURL: args.baseURL, apiKey: args.apiKey, out: {}, op: (suffix = '') => `${prefix}${suffix}` };
    let error = null;
    try {
      await table.get(name)(ctx);
    } catch (err) {
      error = errorReport(err);
    }
    const result = { scenario: name, ok: error === null, elapsed_ms: msSince(started), ...ctx.out };
    if (error !== null) result.error = error;
    if ('error' in result || Object.values(ctx.out).some(failed)) result.ok = false;
    emit(result);
  }
  process.exit(0);
}
