// The web console in a real browser (Debian's Chromium, driven by
// playwright-core; no downloaded browser build), against the real services
// scripts/test.sh starts: PostgreSQL and Kafka. console_app (beside this
// file) is the application: a Kafka binding starting `fulfil_order` runs,
// plus workflows to cancel and to dead-letter.
//
//   node --test console.test.mjs
// Environment: HARVEST_TEST_DATABASE_URL, HARVEST_TEST_KAFKA_BOOTSTRAP,
// CONSOLE_APP (the binary), CONSOLE_SCREENSHOTS (a directory), CHROMIUM
// (default /usr/bin/chromium).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { freePort, eventuallyOr, launchBrowser, accessibilityViolations, inertProblems } from './support.mjs';

const APP = process.env.CONSOLE_APP;
const ADMIN_URL = process.env.HARVEST_TEST_DATABASE_URL;
const KAFKA = process.env.HARVEST_TEST_KAFKA_BOOTSTRAP;
const SHOTS = process.env.CONSOLE_SCREENSHOTS ?? '/tmp/harvest-console-screenshots';
const TOKEN = 'console-test-token-7f3a';
const suffix = `${process.pid}_${Date.now()}`;
const DB = `console_${suffix}`;
const DB_URL = ADMIN_URL.replace(/\/[^/]*$/, `/${DB}`);
const TOPIC = `console-orders-${suffix}`;

let port;
let app;  // the running console_app serve
let appLog = '';
let manifest;  // record label -> coordinates
let browser;
let page;
const consoleErrors = [];

function sql(query) {
  return execFileSync('psql', [DB_URL, '-qXtAc', query], { encoding: 'utf8' }).trim();
}

// The status of a run in PostgreSQL.
function statusOf(id) {
  return sql(`SELECT status FROM harvest_workflow_executions WHERE id = '${id}'`);
}

async function startApp(version) {
  app = spawn(APP, ['serve'], {
    env: {
      ...process.env,
      HARVEST_DATABASE_URL: DB_URL,
      KAFKA_BOOTSTRAP: KAFKA,
      CONSOLE_TOPIC: TOPIC,
      CONSOLE_APP_VERSION: String(version),
      HARVEST_HTTP_PORT: String(port),
      HARVEST_API_TOKEN: TOKEN,
      HARVEST_PROFILE: 'dev',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  app.stdout.on('data', (d) => (appLog += d));
  app.stderr.on('data', (d) => (appLog += d));
  await eventually('the app to serve', async () => {
    const r = await fetch(`http://127.0.0.1:${port}/healthz`);
    return r.status === 200;
  });
}

async function stopApp() {
  if (!app || app.exitCode !== null) return;
  const exited = new Promise((r) => app.once('exit', r));
  app.kill('SIGTERM');
  await exited;
}

async function api(method, path, body) {
  const r = await fetch(`http://127.0.0.1:${port}/api/harvest${path}`, {
    method,
    headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, json: await r.json() };
}

// Opens a console page and waits for its heading.
async function open(hash) {
  await page.goto(`http://127.0.0.1:${port}/ui/${hash}`);
  await page.locator('main h1').first().waitFor();
}

const eventually = (what, fn, timeoutMs = 60000) =>
  eventuallyOr(what, fn, timeoutMs, () => `\n--- app log ---\n${appLog.slice(-4000)}`);
const checkAccessibility = async (label) =>
  assert.deepEqual(await accessibilityViolations(page), [], `accessibility on ${label}`);
const checkInert = async (label) => assert.deepEqual(await inertProblems(page), [], label);

async function shoot(name, fullPage = false) {
  await page.screenshot({ path: `${SHOTS}/${name}.png`, fullPage });
}

// Starts an await_approval run and waits until it waits; its execution id.
async function waitingRun(workflowId, input = {}) {
  const started = await api('POST', '/workflows/await_approval/start', { workflow_id: workflowId, input });
  assert.equal(started.status, 201);
  const id = started.json.execution_id;
  await eventually('the run waiting', async () => statusOf(id) === 'waiting');
  return id;
}

// Stops a run from its page — the #cancel or #terminate button, a reason,
// confirm — and waits until PostgreSQL has it `status`.
async function stopFromConsole(id, button, status) {
  await open(`#/executions/${id}`);
  await page.click(`#${button}`);
  await page.fill('#stop-reason', `${status} from the browser test`);
  await page.click('#confirm-stop');
  await eventually(`the run ${status}`, async () => statusOf(id) === status);
}

before(async () => {
  assert.ok(APP && ADMIN_URL && KAFKA, 'CONSOLE_APP, HARVEST_TEST_DATABASE_URL and HARVEST_TEST_KAFKA_BOOTSTRAP');
  mkdirSync(SHOTS, { recursive: true });
  execFileSync('psql', [ADMIN_URL, '-qXc', `CREATE DATABASE ${DB}`]);
  port = await freePort();
  const out = execFileSync(APP, ['produce'], {
    env: { ...process.env, KAFKA_BOOTSTRAP: KAFKA, CONSOLE_TOPIC: TOPIC },
    encoding: 'utf8',
  });
  manifest = JSON.parse(out.trim().split('\n').pop());
  await startApp(1);
  // No token here: the first test enters it through the console's dialog.
  ({ browser, page } = await launchBrowser({ errors: consoleErrors }));
});

after(async () => {
  await browser?.close();
  await stopApp();
  try {
    execFileSync('psql', [ADMIN_URL, '-qXc', `DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`]);
  } catch {
    // the cluster goes with the test run anyway
  }
});

test('the console asks for the token, and a wrong one shows the 401 without leaking it', async () => {
  await page.goto(`http://127.0.0.1:${port}/ui/#/overview`);
  const dialog = page.locator('#token-dialog');
  await dialog.waitFor({ state: 'visible' });
  await page.fill('#token', 'not-the-token');
  await page.click('#token-save');
  const alert = page.locator('#auth-error');
  await alert.waitFor({ state: 'visible' });
  const text = await alert.textContent();
  assert.match(text, /401/);
  assert.ok(!text.includes(TOKEN) && !text.includes('not-the-token'), text);
  await shoot('token');
  await checkAccessibility('the token dialog');
  // The right token: the page renders.
  if (!(await dialog.isVisible())) await page.click('#token-button');
  await page.fill('#token', TOKEN);
  await page.click('#token-save');
  await page.locator('#bindings').waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem('harvest.token')), TOKEN);
  assert.equal(await page.evaluate(() => document.cookie), '');
  consoleErrors.length = 0;  // the deliberate 401s above are logged by the browser
});

test('the overview shows the binding, its lag reaching 0', async () => {
  await open('#/overview');
  const row = page.locator('#bindings tr[data-binding="orders"]');
  await eventually('lag 0 on the overview', async () =>
    (await row.locator('[data-field="lag"]').textContent()).trim() === '0');
  assert.match(await row.locator('[data-field="stream"]').textContent(), new RegExp(TOPIC));
  await page.locator('#runs-by-status').waitFor();
  // The last hour's charts: runs per minute (the orders started this
  // minute) and the binding's lag.
  await page.locator('#chart-runs polyline').first().waitFor();
  // The peak, not the latest minute: a minute may have turned since.
  await eventually('the starts in the chart', async () =>
    /\(peak [1-9]/.test(await page.locator('#chart-runs figcaption').textContent()));
  assert.match(await page.locator('#charts').textContent(), /Lag of orders/);
  await checkInert('the overview');
  await shoot('overview');
  await checkAccessibility('overview');
});

test('a poison record is found by its coordinates and its payload shown byte-exact', async () => {
  await open('#/connector-dead-letters?binding=orders');
  const row = page.locator(`#connector-dead-letters tr[data-coordinates="${manifest.poison}"]`);
  await eventually('the poison dead letter listed', async () => {
    await open('#/connector-dead-letters?binding=orders');
    return (await row.count()) === 1;
  });
  await shoot('connector-dead-letters');
  await checkAccessibility('connector dead letters');
  await row.locator('a').first().click();
  await page.locator('#payload-hex').waitFor({ state: 'attached' });
  const expected = Buffer.concat([
    Buffer.from('not json \0 ', 'latin1'), Buffer.from([0xff, 0xfe]), Buffer.from(' ', 'latin1'),
    Buffer.from('<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">' +
      '<a href="javascript:window.__pwned=1">x</a> \u202Egnp.exe', 'utf8'),
  ]);
  const hex = await page.locator('#payload-hex').textContent();
  assert.equal(bytesOfHexDump(hex), expected.toString('hex'));
  assert.match(await page.locator('[data-field="payload_bytes"]').textContent(), new RegExp(`${expected.length}`));
  // The record key and headers, as text, or hex for bytes that are not UTF-8.
  assert.equal((await page.locator('#message-key [data-field="key"]').textContent()).trim(), 'poison-key');
  const note = page.locator('#message-headers tr[data-header-name="x-note"] [data-field="value"]');
  assert.match(await note.textContent(), /<script>window\.__pwned=1<\/script>/);
  const binary = page.locator('#message-headers tr[data-header-name="x-binary"] [data-field="value"]');
  assert.equal((await binary.textContent()).trim(), '01 00 fe');
  await shoot('connector-dead-letter');
  await checkAccessibility('connector dead letter');
  await checkInert('the poison dead letter');
});

test('a run is found by the record that started it, and its timeline shows the steps', async () => {
  await open(`#/executions?source_ref=${encodeURIComponent(manifest.good3)}`);
  const rows = page.locator('#executions tr[data-execution-id]');
  await eventually('the run of good3', async () => {
    await open(`#/executions?source_ref=${encodeURIComponent(manifest.good3)}`);
    return (await rows.count()) === 1;
  });
  await shoot('executions');
  await checkAccessibility('executions');
  const id = await rows.first().getAttribute('data-execution-id');
  assert.equal(sql(`SELECT start_source_ref FROM harvest_workflow_executions WHERE id = '${id}'`), manifest.good3);
  await eventually('the run completed', async () => statusOf(id) === 'completed');
  await open(`#/executions/${id}`);
  const steps = page.locator('#timeline li[data-kind="StepCompleted"]');
  assert.equal(await steps.count(), 2);
  assert.match(await steps.nth(0).textContent(), /reserve/);
  assert.match(await steps.nth(1).textContent(), /charge/);
  assert.equal(await page.locator('#timeline li[data-kind="WorkflowStarted"]').count(), 1);
  assert.equal(await page.locator('#timeline li[data-kind="WorkflowCompleted"]').count(), 1);
  assert.match(await page.locator('[data-field="status"]').first().textContent(), /completed/);
  // Provenance: the producer's trace id, linked through the configured template.
  const trace = page.locator('[data-field="trace"] a');
  assert.equal(await trace.getAttribute('href'),
    'http://127.0.0.1:16686/trace/4bf92f3577b34da6a3ce929d0e0e4733');
  await shoot('execution', true);
  await checkAccessibility('execution');
});

test('a waiting run cancelled from the console is cancelled in PostgreSQL', async () => {
  const id = await waitingRun('approval-1');
  await stopFromConsole(id, 'cancel', 'cancelled');
  await page.locator('#action-status').waitFor();
});

test('hostile content in ids, payloads and error texts stays inert text', async () => {
  const failed = await api('POST', '/workflows/always_fails/start', { workflow_id: 'fails-1', input: {} });
  assert.equal(failed.status, 201);
  await eventually('the engine dead letter', async () =>
    sql(`SELECT count(*) FROM harvest_engine_dead_letters WHERE execution_id = '${failed.json.execution_id}'`) === '1');
  await open('#/dead-letters');
  await page.locator(`#dead-letters tr[data-execution-id="${failed.json.execution_id}"]`).waitFor();
  await checkInert('engine dead letters');
  await shoot('dead-letters');
  await checkAccessibility('engine dead letters');
  await open(`#/executions/${failed.json.execution_id}`);
  await checkInert('a failed run with a 1 MiB hostile error');
  // The hostile record's run: its id, input and key are markup.
  const hostileId = sql(`SELECT id FROM harvest_workflow_executions WHERE start_source_ref = '${manifest.hostile}'`);
  assert.ok(hostileId, 'the hostile record started a run');
  await open(`#/executions?workflow_id_prefix=${encodeURIComponent('order-<script>')}`);
  assert.equal(await page.locator('#executions tr[data-execution-id]').count(), 1);
  await checkInert('executions with a hostile workflow id');
  await open(`#/executions/${hostileId}`);
  assert.match(await page.locator('#input').textContent(), /<script>window.__pwned=1<\/script>/);
  await checkInert('the hostile run');
  await page.locator('#signal-name').waitFor({ state: 'attached' });
});

test('a dead letter of a fixable condition, replayed from the console after the fix, starts exactly one run', async () => {
  const dl = await eventually('the fixable record dead-lettered', async () =>
    sql(`SELECT id FROM harvest_connector_dead_letters WHERE coordinates = '${manifest.fixable}'`));
  assert.equal(sql("SELECT count(*) FROM harvest_workflow_executions WHERE workflow_id = 'order-U1'"), '0');
  await stopApp();
  await startApp(2);  // the new version accepts the currency
  await open(`#/connector-dead-letters/${dl}`);
  await page.click('#replay');
  await page.click('#confirm-replay');
  await page.locator('#action-status').waitFor();
  await eventually('one run from the replay', async () =>
    sql("SELECT count(*) FROM harvest_workflow_executions WHERE workflow_id = 'order-U1'") === '1');
  await eventually('the replay recorded', async () =>
    sql(`SELECT replay_outcome FROM harvest_connector_dead_letters WHERE id = '${dl}'`) === 'started');
  assert.equal(sql("SELECT count(*) FROM harvest_workflow_executions WHERE workflow_id = 'order-U1'"), '1');
});

test('a single line over 1 MiB is shown whole as inert text, and the page stays usable', async () => {
  const line = 'H<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">' + 'N'.repeat(1100 * 1024);
  const id = await waitingRun('big-input', { note: line });
  await open(`#/executions/${id}`);
  const shown = await page.locator('#input').textContent();
  assert.ok(shown.length >= 1100 * 1024, `the input is shown whole (${shown.length} characters)`);
  assert.ok(shown.includes('<script>window.__pwned=1</script>'), 'the markup is shown as text');
  await checkInert('a run with a 1.1 MiB input line');
  // Still usable: another page opens at once.
  const t0 = Date.now();
  await page.click('nav a[href="#/overview"]');
  await page.locator('main h1', { hasText: 'Overview' }).waitFor({ timeout: 5000 });
  assert.ok(Date.now() - t0 < 5000);
  // A signal sent from the console reaches the run, which completes.
  await open(`#/executions/${id}`);
  await page.fill('#signal-name', 'approve');
  await page.fill('#signal-payload', '{"by":"browser"}');
  await page.click('#signal-form button[type="submit"]');
  await eventually('the run completed by the signal', async () =>
    sql(`SELECT status || ' ' || (output->>'approved') FROM harvest_workflow_executions WHERE id = '${id}'`) === 'completed true');
});

test('a waiting run terminated from the console is terminated in PostgreSQL', async () => {
  await stopFromConsole(await waitingRun('approval-t'), 'terminate', 'terminated');
});

test('an engine dead letter replayed from the console runs again', async () => {
  const id = await eventually('an engine dead letter', async () =>
    sql("SELECT execution_id FROM harvest_engine_dead_letters WHERE workflow_name = 'always_fails' AND replayed_at IS NULL LIMIT 1"));
  const events = () => Number(sql(`SELECT count(*) FROM harvest_workflow_events WHERE execution_id = '${id}'`));
  const before = events();
  await open('#/dead-letters');
  await page.click(`#dead-letters tr[data-execution-id="${id}"] button.replay`);
  await eventually('the replay recorded', async () =>
    sql(`SELECT count(*) FROM harvest_engine_dead_letters WHERE execution_id = '${id}' AND replayed_at IS NOT NULL`) === '1' ||
    events() > before);
  await eventually('the run ran again and failed again', async () =>
    events() > before && statusOf(id) === 'failed');
});

test('matching connector dead letters are replayed, then purged, in bulk from the console', async () => {
  const poison = () => sql(`SELECT coalesce(replay_outcome, replay_requested_at::text, 'none') FROM harvest_connector_dead_letters WHERE coordinates = '${manifest.poison}'`);
  await open('#/connector-dead-letters?binding=orders&reason=undecodable');
  await page.click('#replay-filtered');
  await page.locator('#bulk-preview', { hasText: /1 dead letter matches/ }).waitFor();
  await page.click('#confirm-bulk');
  // Still not JSON: the replay dead-letters it again, and says so.
  await eventually('the bulk replay carried out', async () => poison() === 'dead_lettered');
  await open('#/connector-dead-letters?binding=orders&reason=undecodable');
  await page.click('#purge-filtered');
  await page.locator('#bulk-preview', { hasText: /1 dead letter matches/ }).waitFor();
  await page.click('#confirm-bulk');
  await eventually('the bulk purge carried out', async () =>
    sql("SELECT count(*) FROM harvest_connector_dead_letters WHERE reason = 'undecodable'") === '0');
  assert.notEqual(sql('SELECT count(*) FROM harvest_connector_dead_letters'), '0', 'only the matches went');
});

test('both dead-letter lists page past their first page', async () => {
  sql(`INSERT INTO harvest_connector_dead_letters (binding, stream, coordinates, idempotency_key, reason,
       detail, attempts, payload, failed_at) SELECT 'paged', 'paged.events', 'paged.events:0:' || i, 'k' || i,
       'undecodable', 'malformed', 1, 'x', now() - i * interval '1 second' FROM generate_series(1, 60) i`);
  await open('#/connector-dead-letters?binding=paged');
  const rows = page.locator('#connector-dead-letters tr[data-id]');
  assert.equal(await rows.count(), 50);
  const first = await rows.first().getAttribute('data-coordinates');
  await page.click('#next-page');
  await page.locator('#first-page').waitFor();
  assert.equal(await rows.count(), 10);
  assert.equal(await rows.last().getAttribute('data-coordinates'), 'paged.events:0:60');
  assert.notEqual(await rows.first().getAttribute('data-coordinates'), first);
  await checkInert('connector dead letters, second page');
  sql(`WITH e AS (INSERT INTO harvest_workflow_executions (id, workflow_name, workflow_id, status, input,
       start_source, created_at, completed_at, run_after) SELECT gen_random_uuid(), 'always_fails', 'paged-' || i,
       'failed', '{}'::jsonb, 'api', now() - interval '1 day', now() - interval '1 day' + i * interval '1 second',
       now() FROM generate_series(1, 105) i RETURNING id, workflow_name, workflow_id, completed_at)
       INSERT INTO harvest_engine_dead_letters (execution_id, workflow_name, workflow_id, error, attempts, failed_at)
       SELECT id, workflow_name, workflow_id, 'boom', 1, completed_at FROM e`);
  await open('#/dead-letters');
  const dead = page.locator('#dead-letters tr[data-execution-id]');
  assert.equal(await dead.count(), 100);
  await page.click('#next-page');
  await page.locator('#first-page').waitFor();
  const rest = await dead.count();
  assert.ok(rest >= 5 && rest < 100, `the second page holds the rest (${rest})`);
  await checkInert('engine dead letters, second page');
  await shoot('dead-letters-page-2');
});

test('no page logged a JavaScript error', () => {
  assert.deepEqual(consoleErrors, []);
});

// The bytes of the console's hex dump: each line is an offset, then up to 16
// two-digit hex bytes, then the printable column.
function bytesOfHexDump(text) {
  let out = '';
  for (const line of text.split('\n')) {
    const m = line.match(/^[0-9a-f]{8}\s+((?:[0-9a-f]{2}\s+){0,15}[0-9a-f]{2})/i);
    if (m) out += m[1].replace(/\s+/g, '').toLowerCase();
  }
  return out;
}
