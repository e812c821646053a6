// harvest console: the overview page (throughput, runs by workflow and
// status, connector bindings), refreshed in place every REFRESH_MS.

import {
  REFRESH_MS, EXECUTION_STATUSES, el, withQuery, visible, cell, dataTable, setTitle, secondsAgo, morphSlot,
} from './dom.js';
import { ApiError, describeError, api, errorBox } from './api.js';
import { renderCharts } from './charts.js';

// ---------------------------------------------------------------------------
// Overview

export async function pageOverview(ctx) {
  setTitle('Overview');
  const errorSlot = el('div', { class: 'slot' });
  const statsSlot = el('div', { class: 'slot' });
  const chartsSlot = el('div', { class: 'slot' });
  const runsSlot = el('div', { class: 'slot' });
  const bindingsSlot = el('div', { class: 'slot' });
  const updated = el('p', { class: 'muted updated' });
  let mounted = false;

  // Fills the slots; the first time, mounts the page. Later refreshes morph
  // the slots in place, so a focused link or an announced alert survives.
  const refresh = async () => {
    if (ctx.stale()) return;
    if (mounted && document.hidden) { // no polling for a tab nobody looks at
      ctx.schedule(refresh);
      return;
    }
    const [overview, connectors, history] = await Promise.allSettled(
      [api('/overview'), api('/connectors'), api('/overview/history')]);
    if (ctx.stale()) return;
    const errors = [];
    const fill = (slot, result, draw) => {
      if (result.status !== 'fulfilled') {
        errors.push(result.reason);
        if (!mounted) morphSlot(slot, el('p', { class: 'muted' }, 'Not available.'));
        return;
      }
      try {
        morphSlot(slot, draw(result.value ?? {}));
      } catch (err) {
        errors.push(err);
      }
    };
    fill(statsSlot, overview, renderThroughput);
    fill(chartsSlot, history, renderCharts);
    fill(runsSlot, overview, renderRuns);
    fill(bindingsSlot, connectors, renderBindings);
    const seen = new Set();
    const unique = errors.filter((e) => {
      const key = e instanceof ApiError && e.status === 401 ? '401' : describeError(e);
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
    morphSlot(errorSlot, unique.map(errorBox));
    updated.textContent = `Updated at ${new Date().toLocaleTimeString()}; refreshes every ${REFRESH_MS / 1000} seconds.`;
    if (!mounted) {
      mounted = ctx.mount(
        el('h1', null, 'Overview'),
        errorSlot,
        el('section', { 'aria-labelledby': 'throughput-title' },
          el('h2', { id: 'throughput-title' }, 'Throughput'), statsSlot),
        el('section', { 'aria-labelledby': 'charts-title' },
          el('h2', { id: 'charts-title' }, 'The last hour'), chartsSlot),
        el('section', { 'aria-labelledby': 'runs-title' },
          el('h2', { id: 'runs-title' }, 'Runs by workflow and status'), runsSlot),
        el('section', { 'aria-labelledby': 'connectors-title' },
          el('h2', { id: 'connectors-title' }, 'Connectors'), bindingsSlot),
        updated);
    }
    // After a 401 the token dialog is open; polling resumes once a token is saved.
    if (!errors.some((e) => e instanceof ApiError && e.status === 401)) ctx.schedule(refresh);
  };
  await refresh();
}

function rate(x) {
  return typeof x === 'number' && Number.isFinite(x) ? x.toFixed(2) : '—';
}

function renderThroughput(ov) {
  const w = Number.isFinite(ov.window_seconds) ? ov.window_seconds : 60;
  return el('dl', { id: 'throughput', class: 'stats' },
    el('div', null, el('dt', null, 'Starts per second'), el('dd', { 'data-field': 'started_per_second' }, rate(ov.started_per_second))),
    el('div', null, el('dt', null, 'Completions per second'), el('dd', { 'data-field': 'completed_per_second' }, rate(ov.completed_per_second))),
    el('div', null, el('dt', null, `Started in the last ${w} s`), el('dd', { 'data-field': 'started' }, String(ov.started ?? '—'))),
    el('div', null, el('dt', null, `Completed in the last ${w} s`), el('dd', { 'data-field': 'completed' }, String(ov.completed ?? '—'))));
}

function renderRuns(ov) {
  const runs = Array.isArray(ov.runs) ? ov.runs : [];
  if (runs.length === 0) return el('p', { class: 'empty' }, 'No executions recorded yet.');
  const statuses = [...EXECUTION_STATUSES];
  const byWorkflow = new Map();
  for (const r of runs) {
    const wf = String(r.workflow ?? '');
    const st = String(r.status ?? '');
    if (!statuses.includes(st)) statuses.push(st);
    if (!byWorkflow.has(wf)) byWorkflow.set(wf, new Map());
    const m = byWorkflow.get(wf);
    m.set(st, (m.get(st) || 0) + (Number(r.count) || 0));
  }
  const workflows = [...byWorkflow.keys()].sort();
  const rows = workflows.map((wf) => el('tr', { 'data-workflow': wf },
    el('th', { scope: 'row', title: wf }, el('span', { class: 'cell', dir: 'ltr' }, visible(wf))),
    statuses.map((st) => {
      const n = byWorkflow.get(wf).get(st) || 0;
      const href = withQuery('#/executions', new URLSearchParams({ workflow: wf, status: st }));
      return el('td', { 'data-status': st, class: 'num' },
        el('a', { href, class: n === 0 ? 'zero' : null, 'aria-label': `${n} ${st} runs of ${wf}` }, String(n)));
    })));
  return dataTable({
    id: 'runs-by-status',
    label: 'Runs by workflow and status',
    layout: 'auto',
    columns: [{ label: 'Workflow' }, ...statuses.map((s) => ({ label: s, cls: 'num' }))],
    rows,
  });
}

function renderBindings(body) {
  const items = Array.isArray(body.items) ? body.items : [];
  if (items.length === 0) return el('p', { class: 'empty' }, 'This process runs no connector bindings.');
  // Ten columns that fit a 1280-pixel window: related fields share a cell,
  // each in a span of its own (data-field), the second one on a small line.
  const part = (fieldName, value, cls = '') => el('span', {
    'data-field': fieldName, class: ['cell', cls].filter(Boolean).join(' '), dir: 'ltr',
    title: value === null || value === undefined ? null : String(value),
  }, value === null || value === undefined ? '—' : visible(String(value)));
  const rows = items.map((b) => {
    const lag = b.lag === null || b.lag === undefined ? 'unknown' : String(b.lag);
    const last = b.last_pass_at ? secondsAgo(b.last_pass_at) : 'never';
    const dlqHref = withQuery('#/connector-dead-letters', new URLSearchParams({ binding: String(b.binding ?? '') }));
    return el('tr', { 'data-binding': b.binding },
      el('td', null, part('binding', b.binding, 'mono'),
        el('span', { class: 'sub' }, part('kind', b.kind), ' → ', part('workflow', b.workflow))),
      el('td', null, part('stream', b.stream, 'mono'),
        el('span', { class: 'sub' }, part('subscription', b.subscription, 'mono'))),
      el('td', null, part('running', b.running ? 'running' : 'stopped', b.running ? '' : 'bad'),
        el('span', { class: 'sub' }, 'store ', part('store_available', b.store_available ? 'available' : 'unavailable',
          b.store_available ? '' : 'bad'))),
      cell('lag', lag, { cls: 'num' }),
      cell('in_flight', b.in_flight, { cls: 'num' }),
      el('td', { 'data-field': 'last_pass_at', title: b.last_pass_at || 'never' },
        el('span', { class: 'cell', dir: 'ltr' }, last)),
      el('td', { class: 'num' }, part('stalls', b.stalls), ' / ', part('rebuilds', b.rebuilds)),
      cell('dispatched', b.dispatched, { cls: 'num' }),
      el('td', { class: 'num' }, el('a', { href: dlqHref, 'aria-label': `${b.dead_lettered ?? 0} dead letters of binding ${b.binding}` },
        part('dead_lettered', b.dead_lettered))),
      cell('retried', b.retried, { cls: 'num' }));
  });
  // A binding holding on a coordinate collision says so above the table, in
  // the runtime's own words (inert text: it quotes broker coordinates).
  const holds = items.filter((b) => typeof b.collision_hold === 'string' && b.collision_hold !== '')
    .map((b) => el('p', { class: 'bad', role: 'alert', 'data-collision-hold': b.binding },
      `Binding ${b.binding} is holding (coordinate collision): ${b.collision_hold}`));
  return [...holds, dataTable({
    id: 'bindings',
    caption: 'Connector bindings',
    layout: 'auto',
    columns: [
      { label: 'Binding' }, { label: 'Stream' }, { label: 'State' },
      { label: 'Lag', cls: 'num' }, { label: 'In flight', cls: 'num' }, { label: 'Last pass' },
      { label: 'Stalls / rebuilds', cls: 'num' }, { label: 'Dispatched', cls: 'num' },
      { label: 'Dead-lettered', cls: 'num' }, { label: 'Retried', cls: 'num' },
    ],
    rows,
  })];
}
