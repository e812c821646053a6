// The web console over the Kafka quickstart itself (examples/
// kafka_connector_quickstart.cpp, the program a new user runs first), in
// Debian's Chromium: orders and two poison records produced to
// `orders.placed`, the overview's binding and charts, a run found and
// opened, the poison records replayed and then purged in bulk — every
// outcome checked in PostgreSQL. Needs PostgreSQL and Kafka from
// scripts/test.sh; shares `orders.placed` and the `harvest-orders` group with
// the quickstart's own test (a ctest resource lock keeps them apart), and
// leaves the group owing nothing.
// Environment: HARVEST_TEST_DATABASE_URL, HARVEST_TEST_KAFKA_BOOTSTRAP,
// QUICKSTART_APP, ORDERS_TOOL, CHROMIUM (default /usr/bin/chromium).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { freePort, eventuallyOr, launchBrowser, accessibilityViolations, inertProblems } from './support.mjs';

const APP = process.env.QUICKSTART_APP;
const TOOL = process.env.ORDERS_TOOL;
const ADMIN_URL = process.env.HARVEST_TEST_DATABASE_URL;
const KAFKA = process.env.HARVEST_TEST_KAFKA_BOOTSTRAP;
const TOKEN = 'quickstart-console-token-19c2';
const suffix = `${process.pid}_${Date.now()}`;
const DB = `qs_console_${suffix}`;
const DB_URL = ADMIN_URL.replace(/\/[^/]*$/, `/${DB}`);
const ORDERS = 20;
const POISON = ['not json {', '<script>window.__pwned=1</script>'];

let port;
let app;
let appLog = '';
let browser;
let page;
const consoleErrors = [];

const sql = (query) => execFileSync('psql', [DB_URL, '-qXtAc', query], { encoding: 'utf8' }).trim();
const eventually = (what, fn, timeoutMs = 60000) =>
  eventuallyOr(what, fn, timeoutMs, () => `\n--- quickstart log ---\n${appLog.slice(-4000)}`);
const tool = (args, input) => execFileSync(TOOL, args, {
  env: { ...process.env, KAFKA_BOOTSTRAP: KAFKA }, input, encoding: 'utf8',
}).trim();

async function open(hash) {
  await page.goto(`http://127.0.0.1:${port}/ui/${hash}`);
  await page.locator('main h1').first().waitFor();
}

async function check(label) {
  assert.deepEqual(await inertProblems(page), [], label);
  assert.deepEqual(await accessibilityViolations(page), [], `accessibility on ${label}`);
}

before(async () => {
  assert.ok(APP && TOOL && ADMIN_URL && KAFKA, 'QUICKSTART_APP, ORDERS_TOOL and the test services');
  execFileSync('psql', [ADMIN_URL, '-qXc', `CREATE DATABASE ${DB}`]);
  tool(['topic']);
  port = await freePort();
  app = spawn(APP, [], {
    env: {
      ...process.env, HARVEST_DATABASE_URL: DB_URL, KAFKA_BOOTSTRAP: KAFKA, HARVEST_PROFILE: 'dev',
      HARVEST_HTTP_PORT: String(port), HARVEST_API_TOKEN: TOKEN,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  app.stdout.on('data', (d) => (appLog += d));
  app.stderr.on('data', (d) => (appLog += d));
  await eventually('the quickstart to serve', async () =>
    (await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200);
  const lines = [];
  for (let i = 1; i <= ORDERS; ++i) {
    lines.push(`QS-${suffix}-${i}\t${JSON.stringify({ order_id: `QS-${suffix}-${i}`, total_cents: 100 + i })}`);
  }
  POISON.forEach((p, i) => lines.push(`poison-${suffix}-${i}\t${p}`));
  tool(['send'], lines.join('\n') + '\n');
  ({ browser, page } = await launchBrowser({ errors: consoleErrors, token: TOKEN }));
});

after(async () => {
  await browser?.close();
  if (app && app.exitCode === null) {
    const exited = new Promise((r) => app.once('exit', r));
    app.kill('SIGTERM');
    await exited;
  }
  try {
    execFileSync('psql', [ADMIN_URL, '-qXc', `DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`]);
  } catch {
    // the cluster goes with the test run anyway
  }
});

test('every order becomes one completed run, and the overview shows the binding and the last hour', async () => {
  await eventually('every order completed', async () =>
    sql(`SELECT count(*) FROM harvest_workflow_executions WHERE workflow_id LIKE 'order-QS-${suffix}-%' AND status = 'completed'`) === String(ORDERS));
  await open('#/overview');
  const row = page.locator('#bindings tr[data-binding="orders"]');
  await eventually('lag 0 on the overview', async () =>
    (await row.locator('[data-field="lag"]').textContent()).trim() === '0');
  assert.match(await row.locator('[data-field="stream"]').textContent(), /orders\.placed/);
  await eventually('the orders in the chart of runs per minute', async () => {
    await open('#/overview');
    // The peak, not the latest minute: a minute may have turned since.
    return /\(peak [1-9]/.test(await page.locator('#chart-runs figcaption').textContent());
  });
  await check('the quickstart overview');
});

test('a run is found by its workflow id and opened', async () => {
  await open(`#/executions?workflow_id=${encodeURIComponent(`order-QS-${suffix}-7`)}`);
  const rows = page.locator('#executions tr[data-execution-id]');
  assert.equal(await rows.count(), 1);
  await rows.first().locator('a').first().click();
  await page.locator('#timeline li[data-kind="WorkflowCompleted"]').waitFor();
  assert.match(await page.locator('#output').textContent(), new RegExp(`fulfilled QS-${suffix}-7`));
  await check('a quickstart run');
});

test('the poison records are replayed, then purged, in bulk from the console', async () => {
  const ours = `idempotency_key IS NOT NULL AND payload IN (${POISON.map((p) => `convert_to('${p.replace(/'/g, "''")}', 'UTF8')`).join(', ')})`;
  await eventually('both poison records dead-lettered', async () =>
    sql(`SELECT count(*) FROM harvest_connector_dead_letters WHERE ${ours} AND reason = 'undecodable'`) === '2');
  const matching = sql("SELECT count(*) FROM harvest_connector_dead_letters WHERE binding = 'orders' AND reason = 'undecodable'");
  await open('#/connector-dead-letters?binding=orders&reason=undecodable');
  await check('the quickstart dead letters');
  await page.click('#replay-filtered');
  await page.locator('#bulk-preview', { hasText: new RegExp(`^${matching} dead letters? match`) }).waitFor();
  await page.click('#confirm-bulk');
  // Still not JSON: the quickstart's consumer dead-letters them again.
  await eventually('the bulk replay carried out', async () =>
    sql(`SELECT count(*) FROM harvest_connector_dead_letters WHERE ${ours} AND replay_outcome = 'dead_lettered'`) === '2');
  await open('#/connector-dead-letters?binding=orders&reason=undecodable');
  await page.click('#purge-filtered');
  await page.locator('#bulk-preview', { hasText: /match/ }).waitFor();
  await page.click('#confirm-bulk');
  await eventually('the bulk purge carried out', async () =>
    sql("SELECT count(*) FROM harvest_connector_dead_letters WHERE binding = 'orders' AND reason = 'undecodable'") === '0');
  assert.equal(sql(`SELECT count(*) FROM harvest_workflow_executions WHERE workflow_id LIKE 'order-QS-${suffix}-%'`), String(ORDERS),
    'no order started twice');
});

test('the quickstart stops cleanly and its group owes nothing', async () => {
  await eventually('the group caught up', async () => tool(['lag']) === '0');
  const exited = new Promise((r) => app.once('exit', (code) => r(code)));
  app.kill('SIGTERM');
  assert.equal(await exited, 0);
  assert.deepEqual(consoleErrors, []);
});
