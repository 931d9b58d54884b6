// Loads the gateway's /dashboard in Debian's Chromium, headless, driven by playwright-core (pinned in
// tests/sdk/package.json, installed by scripts/sdk-clients into target/sdk/node), and fails on any console error
// or page error. Used by the black-box test (tests/it/dashboard.rs) and by scripts/dashboard-screenshot.
//
//   node dashboard.mjs --url http://127.0.0.1:PORT/dashboard [--key KEY] [--screenshot light.png]
//        [--dark-screenshot dark.png] [--target NAME] [--settle SECONDS] [--timeout SECONDS]
//
// It prints `loaded` once the page shows /status, then, with --target, waits (bounded by --timeout) until that
// card shows an open breaker and a retry rate above the first one it read, and the summary calls it failing
// (--timeout counts from `loaded`); with --settle, waits that long. Then it takes the screenshots and prints one JSON line: {"ok": true, "readings": [...], ...}. Exit 1 on any failure.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const sdkDir = process.env.BALLAST_SDK_DIR ?? resolve(here, '../../../../target/sdk');
const entry = join(sdkDir, 'node/node_modules/playwright-core/index.mjs');
if (!existsSync(entry)) {
  process.stderr.write(`dashboard.mjs: ${entry} is missing: run scripts/sdk-clients first\n`);
  process.exit(2);
}
const { chromium } = await import(pathToFileURL(entry).href);

const options = { timeout: '60', settle: '0' };
for (let i = 2; i < process.argv.length; i += 2) options[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
if (!options.url) {
  process.stderr.write('dashboard.mjs: --url is required\n');
  process.exit(2);
}
const problems = [];
const profile = mkdtempSync(join(tmpdir(), 'ballast-chromium-'));
// A fresh profile each run (launchPersistentContext passes it as --user-data-dir).
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.BALLAST_CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  // Without the networking flags, Chromium's own connections (updates, sync, QUIC probes) are refused on
  // sandboxed machines and it logs errors; --no-sandbox because the tests run as root.
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1440, height: 900 },
  colorScheme: 'light',
  timeout: 30000,
});
let result = { ok: false };
try {
  const page = await context.newPage();
  // The one error the page is meant to meet: /status refusing it before it has a key (Chromium logs any 4xx of a
  // fetch). Only that, only once, only when a key is expected: anything else fails the run.
  let challenged = !options.key;
  page.on('console', (message) => {
    if (message.type() !== 'error') return;
    const refusal = /status of 40[13]/.test(message.text()) && new URL(message.location().url || options.url).pathname.endsWith('/status');
    if (refusal && !challenged) challenged = true;
    else problems.push(`console error: ${message.text()} (${message.location().url})`);
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  const response = await page.goto(options.url, { waitUntil: 'load', timeout: 15000 });
  if (!response || response.status() !== 200) throw new Error(`GET ${options.url} answered ${response?.status()}`);
  const csp = response.headers()['content-security-policy'] ?? '';
  if (!csp.includes("default-src 'none'")) throw new Error(`no strict Content-Security-Policy: ${csp}`);
  if (options.key) {
    await page.waitForSelector('#auth.shown', { timeout: 10000 });
    await page.fill('#key', options.key);
    await page.click('#auth button[type=submit]');
  }
  await page.waitForSelector('#cards .card', { timeout: 10000 });
  console.log('loaded');
  // --timeout counts from here: launching Chromium and loading the page have bounds of their own (30 + 15 + 10 +
  // 10 s), which the caller allows for before `loaded`.
  const deadline = Date.now() + Number(options.timeout) * 1000;
  const read = () => page.evaluate((target) => {
    const card = [...document.querySelectorAll('#cards .card')].find((c) => c.dataset.target === target);
    const summary = document.querySelector('#summary').textContent;
    return card ? { breaker: card.dataset.breaker, retry_rate: card.dataset.retryRate === '' ? null : Number(card.dataset.retryRate), first: document.querySelector('#cards .card') === card, failing: summary.includes('failing: ' + target), all_clear: summary.includes('All clear') } : null;
  }, options.target);
  const readings = [];
  if (options.target) {
    let first = null, rose = false, opened = false, failing = false;
    while (!(rose && opened && failing)) {
      const seen = await read();
      if (seen) {
        readings.push(seen);
        if (first === null) first = seen.retry_rate ?? 0;
        rose ||= (seen.retry_rate ?? 0) > first;
        opened ||= seen.breaker === 'open' && seen.first;
        failing ||= seen.failing;
        if (seen.all_clear && (seen.retry_rate ?? 0) > 0.5) problems.push(`the summary says All clear while ${options.target} retries: ${JSON.stringify(seen)}`);
      }
      if (problems.length) break;
      if (Date.now() > deadline) {
        throw new Error(`within ${options.timeout}s the card of ${options.target} did not show an open breaker first in the page, a rising retry rate and a failing chip: ${JSON.stringify(readings)}`);
      }
      await page.waitForTimeout(500);
    }
    // The open breaker is named at the top, where an operator looks first.
    const summary = await page.textContent('#summary');
    if (!summary.includes('breaker') || !summary.includes(options.target)) throw new Error(`the summary does not name the open breaker: ${summary}`);
  }
  if (Number(options.settle) > 0) await page.waitForTimeout(Number(options.settle) * 1000);
  if (options.screenshot) await page.screenshot({ path: options.screenshot, fullPage: true });
  if (options['dark-screenshot']) {
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.waitForTimeout(2500); // one refresh in the dark theme
    await page.screenshot({ path: options['dark-screenshot'], fullPage: true });
  }
  if (problems.length) throw new Error(problems.join('\n'));
  result = { ok: true, readings };
} catch (error) {
  result = { ok: false, error: String(error.message ?? error), problems };
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
console.log(JSON.stringify(result));
process.exit(result.ok ? 0 : 1);
