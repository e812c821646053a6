// harvest console: the constants the pages share, the DOM helpers that build
// every element (el() and friends, which keep data inert: see the rule in
// app.js), text and time formatting, morph() for in-place refreshes, and the
// page's fixed elements (dom).

import { navigate } from './nav.js';

const PRODUCT = 'harvest console';
export const REFRESH_MS = 2000;
export const HEX_DUMP_LIMIT = 64 * 1024;
const LONG_VALUE = 400;
export const EXECUTION_STATUSES = ['pending', 'running', 'waiting', 'completed', 'failed', 'cancelled', 'terminated'];
export const ACTIVE_STATUSES = new Set(['pending', 'running', 'waiting']);
export const START_SOURCES = ['api', 'client', 'broker', 'child'];
export const EXECUTION_FILTERS = ['workflow', 'status', 'start_source', 'workflow_id', 'workflow_id_prefix',
  'source_ref', 'since', 'until', 'limit'];
export const DLQ_FILTERS = ['binding', 'stream', 'reason', 'since', 'until'];
export const ISO_PLACEHOLDER = '2026-12-06T00:00:00Z';

// ---------------------------------------------------------------------------
// DOM helpers

// The only attributes el() will set. None of them can run code: event handler
// attributes (on*), style and src are deliberately absent, and href is checked.
const ALLOWED_ATTRIBUTES = new Set(['class', 'id', 'href', 'title', 'for', 'type', 'name', 'value',
  'role', 'dir', 'colspan', 'scope', 'hidden', 'placeholder', 'autocomplete', 'required', 'rel',
  'target', 'tabindex', 'lang', 'selected', 'disabled']);

// el(tag, attrs, ...children): attributes through setAttribute (allowlist
// only), children through append, where strings become inert text nodes.
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  if (attrs) {
    for (const [name, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) continue;
      if (!ALLOWED_ATTRIBUTES.has(name) && !name.startsWith('aria-') && !name.startsWith('data-')) {
        throw new Error(`el(): attribute "${name}" is not allowed`);
      }
      let text = value === true ? '' : String(value);
      if (name === 'href') text = checkedHref(text);
      node.setAttribute(name, text);
    }
  }
  appendChildren(node, children);
  return node;
}

export function appendChildren(node, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) appendChildren(node, child);
    else if (child instanceof Node) node.append(child);
    else node.append(String(child)); // a string becomes a Text node: inert
  }
}

export function on(node, type, handler) {
  node.addEventListener(type, handler);
  return node;
}

// A link target is either an in-app route or an absolute http(s) URL.
function checkedHref(href) {
  if (href.startsWith('#/') || href === '#main') return href;
  const url = httpUrl(href);
  if (url) return url;
  throw new Error('el(): refusing a link that is neither a #/ route nor http(s)');
}

export function httpUrl(value) {
  if (typeof value !== 'string' || value === '') return null;
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
  } catch {
    return null;
  }
}

export const enc = encodeURIComponent;
export const route = (...parts) => '#/' + parts.map((p, i) => (i === 0 ? p : enc(String(p)))).join('/');
export const withQuery = (base, params) => {
  const qs = params.toString();
  return qs ? `${base}?${qs}` : base;
};

// Control characters would be invisible (or, for NUL, silently dropped by
// some views): show C0 controls other than newline and tab as the Unicode
// "control pictures" (U+2400 + code), DEL as U+2421 and C1 controls as \u escapes.
export function visible(value) {
  return String(value).replace(/[\u0000-\u0008\u000B-\u001F\u007F-\u009F]/g, (c) => {
    const code = c.charCodeAt(0);
    if (code < 0x20) return String.fromCharCode(0x2400 + code);
    if (code === 0x7f) return '\u2421';
    return '\\u' + code.toString(16).padStart(4, '0');
  });
}

// Data goes into elements with dir="ltr" that base.css isolates
// (unicode-bidi: isolate): a U+202E RIGHT-TO-LEFT OVERRIDE inside a workflow
// name then reorders only that name, never the labels and buttons around it.
export function data(value, cls = '') {
  const text = value === null || value === undefined ? 'none' : visible(value);
  const classes = ['data', cls, value === null || value === undefined ? 'none' : ''].filter(Boolean).join(' ');
  if (text.length > LONG_VALUE) {
    // A long value scrolls inside its own box; tabindex makes it keyboard-scrollable.
    return el('div', { class: classes + ' long-value', dir: 'ltr', tabindex: '0' }, text);
  }
  return el('span', { class: classes, dir: 'ltr' }, text);
}

// A table cell whose text is cut with an ellipsis by CSS; the full value is in
// the title attribute (attribute values are inert).
export function cell(field, value, { cls = '', content = null } = {}) {
  const missing = value === null || value === undefined;
  const full = missing ? '' : String(value);
  return el('td', { 'data-field': field, title: missing ? null : full },
    el('span', { class: ['cell', cls, missing ? 'none' : ''].filter(Boolean).join(' '), dir: 'ltr' },
      content ?? (missing ? '—' : visible(full.length > 1000 ? full.slice(0, 1000) + '…' : full))));
}

export function statusBadge(status) {
  const token = String(status ?? 'unknown').toLowerCase().replace(/[^a-z0-9_-]/g, '-');
  return el('span', { class: `status status-${token}`, dir: 'ltr' }, visible(status ?? 'unknown'));
}

// layout 'fixed' (the default) shares the width out by column and never
// grows past its box; 'auto' sizes columns by content (small tables).
export function dataTable({ id, caption, label, columns, rows, layout = 'fixed' }) {
  return el('div', { class: 'table-wrap' },
    el('table', { id, class: `data-table layout-${layout}`, 'aria-label': caption ? null : label },
      caption ? el('caption', null, caption) : null,
      el('thead', null, el('tr', null, columns.map((c) =>
        el('th', { scope: 'col', class: [c.cls, c.w ? `w-${c.w}` : ''].filter(Boolean).join(' ') || null }, c.label)))),
      el('tbody', null, rows)));
}

// The paging of a list that pages by the cursor its answer carries: "Newest"
// (on an older page) drops the cursor, "Older" (when the answer has a
// next_cursor) follows it. base: the list's route; params: its query without
// the cursor, kept on both.
export function pagingButtons(base, params, cursor, nextCursor) {
  const paging = el('div', { class: 'buttons paging' });
  if (cursor) paging.append(el('a', { id: 'first-page', href: withQuery(base, params), class: 'button-link' }, 'Newest'));
  if (nextCursor) {
    const next = new URLSearchParams(params);
    next.set('cursor', String(nextCursor));
    paging.append(on(el('button', { type: 'button', id: 'next-page' }, 'Older'), 'click',
      () => navigate(withQuery(base, next))));
  }
  return paging;
}

export function field(id, label, control, hint) {
  const hintId = hint ? `${id}-hint` : null;
  if (hintId) control.setAttribute('aria-describedby', hintId);
  return el('div', { class: 'field' },
    el('label', { for: id }, label), control,
    hint ? el('p', { id: hintId, class: 'hint' }, hint) : null);
}

export function textInput(id, value, attrs = {}) {
  return el('input', { id, name: id, type: 'text', value: value || null, autocomplete: 'off', ...attrs });
}

export function select(id, options, selected) {
  const values = options.map(([v]) => v);
  if (selected && !values.includes(selected)) options = [...options, [selected, selected]];
  return el('select', { id, name: id },
    options.map(([value, label]) => el('option', { value, selected: value === (selected || '') }, label)));
}

export function plural(n, word) {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

export function short(text, max = 60) {
  const s = String(text);
  return s.length > max ? s.slice(0, max) + '…' : s;
}

export function setTitle(page) {
  document.title = `${page} — ${PRODUCT}`;
}

// Parses an ISO 8601 time with any number of fractional digits into
// milliseconds (fractional), or NaN.
export function parseIso(iso) {
  if (typeof iso !== 'string') return NaN;
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:?\d\d)?$/i.exec(iso.trim());
  if (!m) return Date.parse(iso);
  const base = Date.parse(m[1] + (m[3] || 'Z'));
  return m[2] ? base + Number('0.' + m[2]) * 1000 : base;
}

// "2026-12-06T17:00:00.123456Z" -> "2026-12-06 17:00:00" for narrow table
// columns (UTC; the cell's title keeps the exact value).
function shortTime(iso) {
  if (typeof iso !== 'string') return iso;
  const m = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(?:\.\d+)?Z$/i.exec(iso);
  return m ? `${m[1]} ${m[2]}` : iso;
}

export function timeCell(field, iso) {
  if (iso === null || iso === undefined) return cell(field, iso);
  return cell(field, iso, { content: visible(shortTime(String(iso))) });
}

export function secondsAgo(iso) {
  const t = parseIso(iso);
  if (Number.isNaN(t)) return String(iso);
  return `${Math.max(0, Math.round((Date.now() - t) / 1000))} s ago`;
}

export function formatDuration(ms) {
  if (!Number.isFinite(ms)) return null;
  if (ms < 10) return `+${ms.toFixed(1)} ms`;
  if (ms < 10000) return `+${Math.round(ms)} ms`;
  return `+${(ms / 1000).toFixed(1)} s`;
}

export function jsonText(value, pretty) {
  if (value === undefined) return '(none)';
  try {
    return JSON.stringify(value, null, pretty ? 2 : undefined) ?? '(none)';
  } catch {
    return String(value);
  }
}

// A short text for a JSON answer: its scalar members, e.g. "outcome: delivered".
export function describeResult(result) {
  if (!result || typeof result !== 'object') return '';
  const parts = [];
  for (const [k, v] of Object.entries(result)) {
    if (v === null || typeof v === 'object') continue;
    parts.push(`${k}: ${short(v, 120)}`);
    if (parts.length >= 6) break;
  }
  return parts.join(', ');
}

// Keeps a live region, a focused link or an open <details> alive across the
// overview's periodic refresh: only changed text and attributes are written,
// nodes are replaced only when the structure differs.
function morph(current, next) {
  if (current.nodeType !== next.nodeType || current.nodeName !== next.nodeName) {
    current.replaceWith(next);
    return;
  }
  if (current.nodeType === Node.TEXT_NODE) {
    if (current.data !== next.data) current.data = next.data;
    return;
  }
  if (current.nodeType !== Node.ELEMENT_NODE) return;
  for (const { name } of [...current.attributes]) if (!next.hasAttribute(name)) current.removeAttribute(name);
  for (const { name, value } of [...next.attributes]) {
    if (current.getAttribute(name) !== value) current.setAttribute(name, value);
  }
  const a = [...current.childNodes];
  const b = [...next.childNodes];
  if (a.length !== b.length) {
    current.replaceChildren(...b);
    return;
  }
  for (let i = 0; i < a.length; i++) morph(a[i], b[i]);
}

export function morphSlot(slot, ...content) {
  morph(slot, el('div', { class: slot.getAttribute('class') }, ...content));
}

// The fixed elements of index.html.
export const dom = {
  main: document.getElementById('main'),
  view: document.getElementById('view'),
  authError: document.getElementById('auth-error'),
  tokenButton: document.getElementById('token-button'),
  tokenDialog: document.getElementById('token-dialog'),
  tokenForm: document.getElementById('token-form'),
  tokenInput: document.getElementById('token'),
  tokenCancel: document.getElementById('token-cancel'),
  skipLink: document.getElementById('skip-link'),
};
