// harvest console: the overview's charts of the last hour (GET
// /overview/history) — runs started, completed and failed per minute, and
// each binding's lag — drawn as SVG lines. Built with createElementNS and a
// fixed set of attributes, all numbers computed here: no data reaches an
// attribute except as a number, and names are inert text.

import { el, visible } from './dom.js';

const SVG = 'http://www.w3.org/2000/svg';
const W = 600; // the drawing's own units; the SVG scales to its box
const H = 100;

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs ?? {})) node.setAttribute(name, String(value));
  for (const c of children) if (c) node.append(c);
  return node;
}

// `values` (numbers or null) over `n` equal steps; a null breaks the line.
function lines(values, n, max, cls) {
  const out = [];
  let points = [];
  const flush = () => {
    if (points.length === 1) points.push(points[0]); // one point still shows
    if (points.length) out.push(svg('polyline', { points: points.join(' '), class: cls }));
    points = [];
  };
  values.forEach((v, i) => {
    if (typeof v !== 'number' || !Number.isFinite(v)) {
      flush();
      return;
    }
    const x = n <= 1 ? W : (i / (n - 1)) * W;
    const y = H - 2 - (max > 0 ? (v / max) * (H - 4) : 0);
    points.push(`${x.toFixed(1)},${y.toFixed(1)}`);
  });
  flush();
  return out;
}

// One chart: a caption, an SVG of `series` ({label, cls, values}) and a
// legend with each series' latest value and peak.
function chart(id, caption, series) {
  const n = Math.max(0, ...series.map((s) => s.values.length));
  const max = Math.max(0, ...series.flatMap((s) => s.values.filter((v) => Number.isFinite(v))));
  const latest = (s) => {
    for (let i = s.values.length - 1; i >= 0; --i) if (Number.isFinite(s.values[i])) return s.values[i];
    return null;
  };
  const summary = series.map((s) => `${s.label} now ${latest(s) ?? 'unknown'}`).join(', ');
  const drawing = svg('svg', {
    viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img',
    'aria-label': `${caption}: ${summary}; peak ${max}`,
  }, svg('line', { x1: 0, y1: H - 1, x2: W, y2: H - 1, class: 'axis' }),
  ...series.flatMap((s) => lines(s.values, n, max, `series-${s.cls}`)));
  return el('figure', { class: 'chart', id },
    el('figcaption', { title: caption }, visible(caption), ` (peak ${max})`),
    drawing,
    el('ul', { class: 'legend' }, series.map((s) =>
      el('li', { class: `series-${s.cls}`, 'data-series': s.cls }, `${s.label}: ${latest(s) ?? '—'}`))));
}

export function renderCharts(history) {
  const minutes = Array.isArray(history.minutes) ? history.minutes : [];
  const pick = (k) => minutes.map((m) => (Number.isFinite(m?.[k]) ? m[k] : null));
  const out = [chart('chart-runs', 'Runs per minute, last hour', [
    { label: 'started', cls: 'started', values: pick('started') },
    { label: 'completed', cls: 'completed', values: pick('completed') },
    { label: 'failed', cls: 'failed', values: pick('failed') },
  ])];
  const lag = Array.isArray(history.lag) ? history.lag : [];
  for (const [i, b] of lag.entries()) {
    const points = Array.isArray(b?.points) ? b.points : [];
    out.push(chart(`chart-lag-${i}`, `Lag of ${String(b?.binding ?? '')}, last hour`, [
      { label: 'lag', cls: 'lag', values: points.map((p) => (Number.isFinite(p?.lag) ? p.lag : null)) },
    ]));
  }
  return el('div', { class: 'charts', id: 'charts' }, out);
}
