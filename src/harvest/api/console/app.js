// harvest console: the browser front end served by harvest at /ui/.
//
// Plain JavaScript, one ES module, no framework and no build step. The page is
// served with `Content-Security-Policy: default-src 'self'; frame-ancestors
// 'none'`, so there is no inline script, no inline style and no eval here:
// styling happens through classes in app.css and events through
// addEventListener.
//
// The inert-text rule: everything the server sends (payloads, ids, workflow
// names, reasons, error texts) may have been chosen by whoever produced a
// message on a broker. It is therefore only ever put into the page as text
// (text nodes, textContent) or into a fixed set of harmless attributes through
// setAttribute. Nothing here hands a string to the HTML parser (no markup
// property, no document writing; tests/api checks the served script), and
// the only links built from data are "#/..." routes with encodeURIComponent'd
// segments and a trace URL that parses as http(s).

// The API this page calls: the prefix the server wrote into the page
// (ApiConfig::prefix), under the path the page itself was served from, so a
// console behind a reverse proxy at /tools/harvest/ui/ calls
// /tools/harvest/api/harvest.
const API = (() => {
  const meta = document.querySelector('meta[name="harvest-api-prefix"]');
  const prefix = meta ? meta.getAttribute('content') : '/api/harvest';
  const at = location.pathname.lastIndexOf('/ui/');
  return (at > 0 ? location.pathname.slice(0, at) : '') + prefix;
})();
const PRODUCT = 'harvest console';
// The token lives in sessionStorage: it survives a reload of this tab but not
// the closing of the tab, it is not shared with other tabs, and unlike a
// cookie the browser never attaches it to a request on its own (so there is no
// cross-site request forgery to defend against). localStorage would keep the
// secret on disk indefinitely.
const TOKEN_KEY = 'harvest.token';
const REFRESH_MS = 2000;
const HEX_DUMP_LIMIT = 64 * 1024;
const LONG_VALUE = 400;
const EXECUTION_STATUSES = ['pending', 'running', 'waiting', 'completed', 'failed', 'cancelled', 'terminated'];
const ACTIVE_STATUSES = new Set(['pending', 'running', 'waiting']);
const START_SOURCES = ['api', 'client', 'broker', 'child'];
const EXECUTION_FILTERS = ['workflow', 'status', 'start_source', 'workflow_id', 'workflow_id_prefix',
  'source_ref', 'since', 'until', 'limit'];
const DLQ_FILTERS = ['binding', 'stream', 'reason', 'since', 'until'];
const ISO_PLACEHOLDER = '2026-12-06T00:00:00Z';

// ---------------------------------------------------------------------------
// DOM helpers

// The only attributes el() will set. None of them can run code: event handler
// attributes (on*), style and src are deliberately absent, and href is checked.
const ALLOWED_ATTRIBUTES = new Set(['class', 'id', 'href', 'title', 'for', 'type', 'name', 'value',
  'role', 'dir', 'colspan', 'scope', 'hidden', 'placeholder', 'autocomplete', 'required', 'rel',
  'target', 'tabindex', 'lang', 'selected', 'disabled']);

// el(tag, attrs, ...children): attributes through setAttribute (allowlist
// only), children through append, where strings become inert text nodes.
function el(tag, attrs, ...children) {
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

function appendChildren(node, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) appendChildren(node, child);
    else if (child instanceof Node) node.append(child);
    else node.append(String(child)); // a string becomes a Text node: inert
  }
}

function on(node, type, handler) {
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

function httpUrl(value) {
  if (typeof value !== 'string' || value === '') return null;
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
  } catch {
    return null;
  }
}

const enc = encodeURIComponent;
const route = (...parts) => '#/' + parts.map((p, i) => (i === 0 ? p : enc(String(p)))).join('/');
const withQuery = (base, params) => {
  const qs = params.toString();
  return qs ? `${base}?${qs}` : base;
};

// Control characters would be invisible (or, for NUL, silently dropped by
// some views): show C0 controls other than newline and tab as the Unicode
// "control pictures" (U+2400 + code), DEL as U+2421 and C1 controls as \u escapes.
function visible(value) {
  return String(value).replace(/[\u0000-\u0008\u000B-\u001F\u007F-\u009F]/g, (c) => {
    const code = c.charCodeAt(0);
    if (code < 0x20) return String.fromCharCode(0x2400 + code);
    if (code === 0x7f) return '\u2421';
    return '\\u' + code.toString(16).padStart(4, '0');
  });
}

// Data goes into elements with dir="ltr" that app.css isolates
// (unicode-bidi: isolate): a U+202E RIGHT-TO-LEFT OVERRIDE inside a workflow
// name then reorders only that name, never the labels and buttons around it.
function data(value, cls = '') {
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
function cell(field, value, { cls = '', content = null } = {}) {
  const missing = value === null || value === undefined;
  const full = missing ? '' : String(value);
  return el('td', { 'data-field': field, title: missing ? null : full },
    el('span', { class: ['cell', cls, missing ? 'none' : ''].filter(Boolean).join(' '), dir: 'ltr' },
      content ?? (missing ? '—' : visible(full.length > 1000 ? full.slice(0, 1000) + '…' : full))));
}

function statusBadge(status) {
  const token = String(status ?? 'unknown').toLowerCase().replace(/[^a-z0-9_-]/g, '-');
  return el('span', { class: `status status-${token}`, dir: 'ltr' }, visible(status ?? 'unknown'));
}

// layout 'fixed' (the default) shares the width out by column and never
// grows past its box; 'auto' sizes columns by content (small tables).
function dataTable({ id, caption, label, columns, rows, layout = 'fixed' }) {
  return el('div', { class: 'table-wrap' },
    el('table', { id, class: `data-table layout-${layout}`, 'aria-label': caption ? null : label },
      caption ? el('caption', null, caption) : null,
      el('thead', null, el('tr', null, columns.map((c) =>
        el('th', { scope: 'col', class: [c.cls, c.w ? `w-${c.w}` : ''].filter(Boolean).join(' ') || null }, c.label)))),
      el('tbody', null, rows)));
}

function field(id, label, control, hint) {
  const hintId = hint ? `${id}-hint` : null;
  if (hintId) control.setAttribute('aria-describedby', hintId);
  return el('div', { class: 'field' },
    el('label', { for: id }, label), control,
    hint ? el('p', { id: hintId, class: 'hint' }, hint) : null);
}

function textInput(id, value, attrs = {}) {
  return el('input', { id, name: id, type: 'text', value: value || null, autocomplete: 'off', ...attrs });
}

function select(id, options, selected) {
  const values = options.map(([v]) => v);
  if (selected && !values.includes(selected)) options = [...options, [selected, selected]];
  return el('select', { id, name: id },
    options.map(([value, label]) => el('option', { value, selected: value === (selected || '') }, label)));
}

function plural(n, word) {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function short(text, max = 60) {
  const s = String(text);
  return s.length > max ? s.slice(0, max) + '…' : s;
}

function setTitle(page) {
  document.title = `${page} — ${PRODUCT}`;
}

// Parses an ISO 8601 time with any number of fractional digits into
// milliseconds (fractional), or NaN.
function parseIso(iso) {
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

function timeCell(field, iso) {
  if (iso === null || iso === undefined) return cell(field, iso);
  return cell(field, iso, { content: visible(shortTime(String(iso))) });
}

function secondsAgo(iso) {
  const t = parseIso(iso);
  if (Number.isNaN(t)) return String(iso);
  return `${Math.max(0, Math.round((Date.now() - t) / 1000))} s ago`;
}

function formatDuration(ms) {
  if (!Number.isFinite(ms)) return null;
  if (ms < 10) return `+${ms.toFixed(1)} ms`;
  if (ms < 10000) return `+${Math.round(ms)} ms`;
  return `+${(ms / 1000).toFixed(1)} s`;
}

function jsonText(value, pretty) {
  if (value === undefined) return '(none)';
  try {
    return JSON.stringify(value, null, pretty ? 2 : undefined) ?? '(none)';
  } catch {
    return String(value);
  }
}

// A short text for a JSON answer: its scalar members, e.g. "outcome: delivered".
function describeResult(result) {
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

function morphSlot(slot, ...content) {
  morph(slot, el('div', { class: slot.getAttribute('class') }, ...content));
}

// ---------------------------------------------------------------------------
// Token, API calls and errors

const dom = {
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

let memoryToken = ''; // used only when sessionStorage is unavailable

function getToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return memoryToken;
  }
}

function setToken(token) {
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    memoryToken = token;
  }
}

function openDialog(dialog) {
  if (!dialog.isConnected || dialog.open) return;
  dialog.showModal();
}

function openTokenDialog() {
  if (dom.tokenDialog.open) return;
  dom.tokenInput.value = getToken();
  openDialog(dom.tokenDialog);
}

function showAuthError(message) {
  dom.authError.textContent = '401 unauthorized — the API token is missing or wrong. ' + (message || '');
  dom.authError.hidden = false;
  openTokenDialog();
}

function hideAuthError() {
  dom.authError.hidden = true;
  dom.authError.textContent = '';
}

class ApiError extends Error {
  constructor(status, kind, message, requestId) {
    super(message);
    this.status = status;
    this.kind = kind;
    this.requestId = requestId;
  }

  describe() {
    if (this.status === 0) return `Network error: ${this.message}`;
    return `${this.status} ${this.kind}: ${this.message}` + (this.requestId ? ` (request ${this.requestId})` : '');
  }
}

function describeError(err) {
  if (err instanceof ApiError) return err.describe();
  return `Error: ${err && err.message ? err.message : String(err)}`;
}

async function api(path, { method = 'GET', body } = {}) {
  const token = getToken();
  const headers = { Accept: 'application/json', ...(token ? { Authorization: 'Bearer ' + token } : {}) };
  const init = { method, headers, cache: 'no-store', credentials: 'same-origin' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(API + path, init);
  } catch (err) {
    throw new ApiError(0, 'network', `the request could not be sent (${err && err.message ? err.message : err}).`, null);
  }
  let text = '';
  try {
    text = await response.text();
  } catch {
    text = '';
  }
  let parsed = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = null;
    }
  }
  if (response.ok) {
    if (!dom.authError.hidden) hideAuthError();
    return parsed ?? {};
  }
  const obj = parsed && typeof parsed === 'object' ? parsed : {};
  const kind = typeof obj.error === 'string' ? obj.error : (response.statusText || 'error');
  const message = typeof obj.message === 'string' ? obj.message : (text.slice(0, 500) || 'no message');
  const requestId = typeof obj.request_id === 'string' || typeof obj.request_id === 'number' ? obj.request_id : null;
  if (response.status === 401) showAuthError(message);
  throw new ApiError(response.status, kind, message, requestId);
}

// The API's query string, percent-encoded with encodeURIComponent (a space
// becomes %20, never "+", which a server may take literally).
function query(params) {
  const parts = [];
  for (const [k, v] of params) parts.push(`${enc(k)}=${enc(v)}`);
  return parts.length ? '?' + parts.join('&') : '';
}

// An error inside main. A 401 is already explained by #auth-error, so the
// page only offers the token dialog again.
function errorBox(err) {
  if (err instanceof ApiError && err.status === 401) {
    return el('div', { class: 'notice' },
      el('p', null, 'This page needs a valid API token.'),
      on(el('button', { type: 'button', class: 'secondary' }, 'Set API token'), 'click', openTokenDialog));
  }
  return el('p', { class: 'error', role: 'alert' }, visible(describeError(err)));
}

// #action-status is one element that survives re-renders of the same page,
// so the outcome of an action stays visible (and is announced) after the page
// has reloaded its data.
const actionStatus = el('p', { id: 'action-status', role: 'status', class: 'action-status', tabindex: '-1' });

function setActionStatus(text, isError = false) {
  actionStatus.textContent = text ? visible(text) : '';
  actionStatus.classList.toggle('is-error', Boolean(text) && isError);
  actionStatus.classList.toggle('is-empty', !text);
}

// Runs a POST, re-renders the page and reports the outcome in #action-status.
async function runAction(pending, request, describeOk) {
  const hash = location.hash;
  setActionStatus(pending);
  let message;
  let failed = false;
  try {
    message = describeOk(await request());
  } catch (err) {
    message = describeError(err);
    failed = true;
  }
  if (location.hash !== hash) return; // the user went elsewhere meanwhile
  await render({ soft: true });
  setActionStatus(message, failed);
  if (actionStatus.isConnected) actionStatus.focus({ preventScroll: false });
}

// A confirmation dialog: a heading, an explanation, optional extra content,
// a confirm button and "Back".
function confirmDialog({ id, titleId, title, text, confirmId, confirmLabel, danger, extra, onConfirm }) {
  const heading = el('h2', { id: titleId }, title);
  const description = el('p', { id: `${id}-text` }, text);
  const confirm = el('button', { type: 'submit', id: confirmId, class: danger ? 'danger' : null }, confirmLabel);
  const back = el('button', { type: 'button', class: 'secondary' }, 'Back');
  const form = el('form', { class: 'dialog-form' }, extra || null, el('div', { class: 'buttons' }, confirm, back));
  const dialog = el('dialog', { id, 'aria-labelledby': titleId, 'aria-describedby': `${id}-text` },
    heading, description, form);
  on(back, 'click', () => dialog.close());
  on(form, 'submit', (event) => {
    event.preventDefault();
    if (confirm.disabled) return;
    onConfirm(dialog);
  });
  return { dialog, heading, description, confirm, form };
}

// ---------------------------------------------------------------------------
// Routing

let generation = 0;
let refreshTimer = null;
let lastHash = null;
const purged = new Set(); // connector dead letters purged from their own page

function parseRoute() {
  let raw = location.hash.replace(/^#/, '');
  if (raw === '' || raw === '/') raw = '/overview';
  const q = raw.indexOf('?');
  const path = q >= 0 ? raw.slice(0, q) : raw;
  const params = new URLSearchParams(q >= 0 ? raw.slice(q + 1) : '');
  const segments = path.split('/').filter(Boolean);
  let id = null;
  if (segments.length > 1) {
    const joined = segments.slice(1).join('/');
    try {
      id = decodeURIComponent(joined);
    } catch {
      id = joined;
    }
  }
  const name = segments[0] || 'overview';
  const table = {
    overview: [pageOverview, null],
    executions: [pageExecutions, pageExecution],
    'connector-dead-letters': [pageConnectorDeadLetters, pageConnectorDeadLetter],
    'dead-letters': [pageDeadLetters, null],
  };
  const pages = table[name];
  const page = !pages ? pageNotFound : id === null ? pages[0] : pages[1] || pageNotFound;
  return { name, id, params, page };
}

function markNav(name) {
  for (const a of document.querySelectorAll('nav[aria-label="Main"] a')) {
    if (a.getAttribute('href') === '#/' + name) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

function stopRefresh() {
  if (refreshTimer !== null) clearTimeout(refreshTimer);
  refreshTimer = null;
}

// Renders the current hash. soft: a re-render after an action, which keeps
// the old content until the new data is there (no "Loading…" flash).
// navigated: the user followed a link, so focus moves to main.
async function render({ soft = false, navigated = false } = {}) {
  stopRefresh();
  const gen = ++generation;
  if (location.hash !== lastHash) {
    lastHash = location.hash;
    setActionStatus('');
    if (!soft) purged.clear();
  }
  const current = parseRoute();
  markNav(current.name);
  // A page's <h1> appears only with its data (or its error): until then the
  // view holds just "Loading…", so "the heading is there" means "the page is
  // ready". A soft re-render keeps the old content instead.
  if (!soft) dom.view.replaceChildren(loading());
  let focused = false;
  const ctx = {
    route: current,
    soft,
    stale: () => gen !== generation,
    mount: (...nodes) => {
      if (gen !== generation) return false;
      dom.view.replaceChildren();
      appendChildren(dom.view, nodes);
      if (navigated && !focused) {
        focused = true;
        window.scrollTo(0, 0);
        dom.main.focus({ preventScroll: true });
      }
      return true;
    },
    schedule: (fn) => {
      if (gen !== generation) return;
      stopRefresh();
      refreshTimer = setTimeout(() => {
        Promise.resolve().then(fn).catch(() => { /* the next render starts afresh */ });
      }, REFRESH_MS);
    },
  };
  try {
    await current.page(ctx);
  } catch (err) {
    if (!ctx.stale()) ctx.mount(el('h1', null, 'Something went wrong'), errorBox(err));
  }
}

function navigate(hash) {
  if (location.hash === hash) render({ navigated: true });
  else location.hash = hash; // hashchange renders
}

function loading() {
  return el('p', { class: 'muted' }, 'Loading…');
}

// ---------------------------------------------------------------------------
// Overview

async function pageOverview(ctx) {
  setTitle('Overview');
  const errorSlot = el('div', { class: 'slot' });
  const statsSlot = el('div', { class: 'slot' });
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
    const [overview, connectors] = await Promise.allSettled([api('/overview'), api('/connectors')]);
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
  const rows = items.map((b) => {
    const lag = b.lag === null || b.lag === undefined ? 'unknown' : String(b.lag);
    const last = b.last_pass_at ? secondsAgo(b.last_pass_at) : 'never';
    const dlqHref = withQuery('#/connector-dead-letters', new URLSearchParams({ binding: String(b.binding ?? '') }));
    return el('tr', { 'data-binding': b.binding },
      cell('binding', b.binding, { cls: 'mono' }),
      el('td', null, el('a', { href: dlqHref, 'aria-label': `Dead letters of binding ${b.binding}` }, 'Dead letters')),
      cell('kind', b.kind),
      cell('subscription', b.subscription, { cls: 'mono' }),
      cell('stream', b.stream, { cls: 'mono' }),
      cell('workflow', b.workflow),
      cell('running', b.running ? 'yes' : 'no'),
      cell('lag', lag, { cls: 'num' }),
      cell('in_flight', b.in_flight, { cls: 'num' }),
      el('td', { 'data-field': 'last_pass_at', title: b.last_pass_at || 'never' },
        el('span', { class: 'cell', dir: 'ltr' }, last)),
      cell('stalls', b.stalls, { cls: 'num' }),
      cell('rebuilds', b.rebuilds, { cls: 'num' }),
      cell('store_available', b.store_available ? 'available' : 'unavailable',
        { cls: b.store_available ? '' : 'bad' }),
      cell('dispatched', b.dispatched, { cls: 'num' }),
      cell('dead_lettered', b.dead_lettered, { cls: 'num' }),
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
      { label: 'Binding' }, { label: 'Links' }, { label: 'Kind' }, { label: 'Subscription' },
      { label: 'Stream' }, { label: 'Workflow' }, { label: 'Running' },
      { label: 'Lag', cls: 'num' }, { label: 'In flight', cls: 'num' }, { label: 'Last pass' },
      { label: 'Stalls', cls: 'num' }, { label: 'Rebuilds', cls: 'num' }, { label: 'Store' },
      { label: 'Dispatched', cls: 'num' }, { label: 'Dead-lettered', cls: 'num' },
      { label: 'Retried', cls: 'num' },
    ],
    rows,
  })];
}

// ---------------------------------------------------------------------------
// Executions

function filterForm(id, fields, onSubmit) {
  const form = el('form', { id, class: 'filters', role: 'search', 'aria-label': 'Filters' },
    el('div', { class: 'filter-grid' }, fields),
    el('div', { class: 'buttons' }, el('button', { type: 'submit' }, 'Search'),
      el('a', { href: onSubmit.base, class: 'button-link' }, 'Clear filters')));
  on(form, 'submit', (event) => {
    event.preventDefault();
    const out = new URLSearchParams();
    for (const name of onSubmit.names) {
      const control = form.elements.namedItem(name);
      const value = control ? control.value.trim() : '';
      if (value) out.set(name, value);
    }
    navigate(withQuery(onSubmit.base, out));
  });
  return form;
}

function executionFilters(params) {
  const p = (k) => params.get(k) || '';
  return filterForm('execution-filters', [
    field('workflow', 'Workflow', textInput('workflow', p('workflow'))),
    field('status', 'Status', select('status', [['', 'any'], ...EXECUTION_STATUSES.map((s) => [s, s])], p('status'))),
    field('start_source', 'Start source', select('start_source', [['', 'any'], ...START_SOURCES.map((s) => [s, s])], p('start_source'))),
    field('workflow_id', 'Workflow id', textInput('workflow_id', p('workflow_id'))),
    field('workflow_id_prefix', 'Workflow id prefix', textInput('workflow_id_prefix', p('workflow_id_prefix'))),
    field('source_ref', 'Broker coordinates (topic:partition:offset or SQS message id)', textInput('source_ref', p('source_ref'))),
    field('since', 'Created since', textInput('since', p('since'), { placeholder: ISO_PLACEHOLDER }), 'ISO 8601, UTC'),
    field('until', 'Created until', textInput('until', p('until'), { placeholder: ISO_PLACEHOLDER }), 'ISO 8601, UTC'),
    field('limit', 'Rows per page', select('limit', ['25', '50', '100', '200'].map((n) => [n, n]), p('limit') || '50')),
  ], { base: '#/executions', names: EXECUTION_FILTERS });
}

async function pageExecutions(ctx) {
  setTitle('Executions');
  const params = ctx.route.params;
  const filters = new URLSearchParams();
  for (const k of EXECUTION_FILTERS) if (params.get(k)) filters.set(k, params.get(k));
  const cursor = params.get('cursor') || '';
  const request = new URLSearchParams(filters);
  if (cursor) request.set('cursor', cursor);
  const heading = el('h1', null, 'Executions');
  const form = executionFilters(params);
  let body;
  try {
    body = await api('/executions' + query(request));
  } catch (err) {
    ctx.mount(heading, form, errorBox(err));
    return;
  }
  if (ctx.stale()) return;
  const items = Array.isArray(body.items) ? body.items : [];
  const rows = items.map((x) => el('tr', { 'data-execution-id': x.execution_id },
    cell('execution_id', x.execution_id, {
      cls: 'mono',
      content: el('a', { href: route('executions', x.execution_id) }, visible(x.execution_id ?? '')),
    }),
    cell('workflow', x.workflow),
    cell('workflow_id', x.workflow_id, { cls: 'mono' }),
    el('td', { 'data-field': 'status' }, statusBadge(x.status)),
    cell('start_source', x.start_source),
    cell('start_source_ref', x.start_source_ref, { cls: 'mono' }),
    cell('attempt', x.attempt, { cls: 'num' }),
    timeCell('created_at', x.created_at),
    timeCell('completed_at', x.completed_at)));
  const paging = el('div', { class: 'buttons paging' });
  if (cursor) paging.append(el('a', { id: 'first-page', href: withQuery('#/executions', filters), class: 'button-link' }, 'Newest'));
  if (body.next_cursor) {
    const next = new URLSearchParams(filters);
    next.set('cursor', String(body.next_cursor));
    paging.append(on(el('button', { type: 'button', id: 'next-page' }, 'Older'), 'click',
      () => navigate(withQuery('#/executions', next))));
  }
  ctx.mount(heading, form,
    el('p', { class: 'muted' }, `Showing ${plural(items.length, 'execution')}, newest first${cursor ? ' (older page)' : ''}.`),
    dataTable({
      id: 'executions',
      caption: 'Executions',
      columns: [
        { label: 'Execution id', w: 15 }, { label: 'Workflow', w: 10 }, { label: 'Workflow id', w: 12 },
        { label: 'Status', w: 9 }, { label: 'Start source', w: 7 }, { label: 'Coordinates', w: 12 },
        { label: 'Attempt', cls: 'num', w: 7 }, { label: 'Created (UTC)', w: 14 }, { label: 'Completed (UTC)', w: 14 },
      ],
      rows,
    }),
    items.length === 0 ? el('p', { class: 'empty' }, 'No executions match these filters.') : null,
    paging.childNodes.length ? paging : null);
}

// ---------------------------------------------------------------------------
// Execution

function summaryRow(label, fieldName, ...content) {
  return [el('dt', null, label), el('dd', { 'data-field': fieldName }, ...content)];
}

function idHeading(prefix, id) {
  return el('h1', { class: 'clamp', title: id }, prefix, ' ', el('span', { class: 'data mono', dir: 'ltr' }, visible(id)));
}

async function pageExecution(ctx) {
  const id = ctx.route.id;
  setTitle(`Execution ${short(id)}`);
  const back = el('p', null, el('a', { href: '#/executions' }, 'All executions'));
  let ex;
  try {
    ex = await api('/executions/' + enc(id));
  } catch (err) {
    ctx.mount(idHeading('Execution', id), back, errorBox(err));
    return;
  }
  if (ctx.stale()) return;
  ctx.mount(
    idHeading('Execution', id),
    back,
    executionSummary(ex),
    jsonSection('Input', 'input', ex.input, false),
    jsonSection('Output', 'output', ex.output, false),
    jsonSection('Error', 'error', ex.error, true),
    el('section', { 'aria-labelledby': 'timeline-title' },
      el('h2', { id: 'timeline-title' }, 'Timeline'), renderTimeline(ex.history)),
    el('section', { 'aria-labelledby': 'signals-title' },
      el('h2', { id: 'signals-title' }, 'Unread signals'), renderUnreadSignals(ex.unread_signals)),
    executionActions(id, ex));
}

function executionSummary(ex) {
  const runLinks = [];
  if (ex.previous_run) runLinks.push(' · ', el('a', { href: route('executions', ex.previous_run) }, 'previous run'));
  if (ex.next_run) runLinks.push(' · ', el('a', { href: route('executions', ex.next_run) }, 'next run'));
  // The trace id is the second field of the W3C traceparent (version-trace-parent-flags).
  const traceparent = ex.start_trace && typeof ex.start_trace === 'object' ? ex.start_trace.traceparent : null;
  const traceId = typeof traceparent === 'string' ? (traceparent.split('-')[1] ?? null) : null;
  const traceHref = httpUrl(ex.trace_url);
  return el('section', { 'aria-labelledby': 'summary-title' },
    el('h2', { id: 'summary-title', class: 'visually-hidden' }, 'Summary'),
    el('dl', { id: 'execution-summary', class: 'summary' },
      summaryRow('Status', 'status', statusBadge(ex.status)),
      summaryRow('Workflow', 'workflow', data(ex.workflow)),
      summaryRow('Workflow id', 'workflow_id', data(ex.workflow_id, 'mono')),
      summaryRow('Run', 'run', `run ${ex.run ?? '?'} of ${ex.runs ?? '?'}`,
        ex.current_run === false ? ' (not the current run)' : '', ...runLinks),
      summaryRow('Attempt', 'attempt', data(ex.attempt)),
      summaryRow('Lease owner', 'lease_owner', data(ex.lease_owner, 'mono')),
      summaryRow('Lease expires at', 'lease_expires_at', data(ex.lease_expires_at)),
      summaryRow('Created at', 'created_at', data(ex.created_at)),
      summaryRow('Completed at', 'completed_at', data(ex.completed_at)),
      summaryRow('Start source', 'start_source', data(ex.start_source)),
      summaryRow('Coordinates', 'start_source_ref', data(ex.start_source_ref, 'mono')),
      summaryRow('Trace', 'trace', data(traceId ?? null, 'mono'),
        traceHref ? [' · ', el('a', { href: traceHref, rel: 'noopener noreferrer', target: '_blank', title: 'Opens in a new tab' }, 'open trace')] : null)));
}

// A <pre> with a Pretty/Raw toggle. The error is a string: "Pretty" prints it
// as indented JSON when it happens to be JSON, else as the text itself.
function jsonSection(title, id, value, isString) {
  const missing = value === null || value === undefined;
  const textFor = (pretty) => {
    if (missing) return '(none)';
    if (!isString) return jsonText(value, pretty);
    if (pretty) {
      try {
        const parsed = JSON.parse(value);
        if (parsed && typeof parsed === 'object') return jsonText(parsed, true);
      } catch { /* not JSON: shown as text */ }
    }
    return visible(value);
  };
  const pre = el('pre', { id, class: 'payload', dir: 'ltr', tabindex: '0' }, textFor(true));
  const prettyButton = el('button', { type: 'button', class: 'toggle', 'aria-pressed': 'true' }, 'Pretty');
  const rawButton = el('button', { type: 'button', class: 'toggle', 'aria-pressed': 'false' }, 'Raw');
  const choose = (pretty) => {
    pre.textContent = textFor(pretty);
    prettyButton.setAttribute('aria-pressed', String(pretty));
    rawButton.setAttribute('aria-pressed', String(!pretty));
  };
  on(prettyButton, 'click', () => choose(true));
  on(rawButton, 'click', () => choose(false));
  const titleId = `${id}-title`;
  return el('section', { 'aria-labelledby': titleId, class: 'json-section' },
    el('div', { class: 'section-head' },
      el('h2', { id: titleId }, title),
      el('div', { class: 'toggles', role: 'group', 'aria-label': `${title} format` }, prettyButton, rawButton)),
    pre);
}

const KIND_CLASSES = {
  WorkflowStarted: 'start',
  StepCompleted: 'step',
  SignalReceived: 'signal',
  TimerStarted: 'timer',
  TimerFired: 'timer',
  ChildStarted: 'child',
  CancelRequested: 'cancel',
  AttemptFailed: 'failure',
  Replayed: 'replay',
  WorkflowCompleted: 'end-ok',
  WorkflowFailed: 'end-bad',
  WorkflowTerminated: 'end-bad',
  WorkflowCancelled: 'end-cancel',
};

function renderTimeline(history) {
  const events = Array.isArray(history) ? history.filter((e) => e && typeof e === 'object') : [];
  if (events.every((e) => typeof e.id === 'number')) events.sort((a, b) => a.id - b.id);
  let previous = NaN;
  const items = events.map((ev) => {
    const kind = String(ev.kind ?? 'unknown');
    const at = parseIso(ev.recorded_at);
    const duration = kind === 'StepCompleted' && !Number.isNaN(previous) && !Number.isNaN(at)
      ? formatDuration(at - previous) : null;
    if (!Number.isNaN(at)) previous = at;
    const p = ev.payload;
    let signalInfo = null;
    if (kind === 'SignalReceived' && p && typeof p === 'object' && !Array.isArray(p)) {
      const parts = [];
      if (p.signal_id !== undefined && p.signal_id !== null) parts.push(`signal id ${p.signal_id}`);
      if (p.source !== undefined && p.source !== null) parts.push(`source ${typeof p.source === 'string' ? p.source : JSON.stringify(p.source)}`);
      if (parts.length) signalInfo = el('p', { class: 'event-detail' }, data(parts.join(' · ')));
    }
    return el('li', { 'data-kind': kind, class: `event kind-${KIND_CLASSES[kind] || 'other'}` },
      el('div', { class: 'event-head' },
        el('span', { class: 'kind', dir: 'ltr' }, visible(kind)),
        ev.name !== null && ev.name !== undefined ? data(ev.name, 'mono event-name') : null,
        ev.op_seq !== null && ev.op_seq !== undefined ? el('span', { class: 'muted' }, `op ${ev.op_seq}`) : null,
        el('span', { class: 'event-time', dir: 'ltr' }, ev.recorded_at ? visible(ev.recorded_at) : 'time unknown'),
        duration ? el('span', { class: 'duration' }, duration) : null),
      signalInfo,
      p === null || p === undefined ? null
        : el('details', null, el('summary', null, 'payload'),
          el('pre', { class: 'payload', dir: 'ltr', tabindex: '0' }, jsonText(p, true))));
  });
  return [
    el('ol', { id: 'timeline', class: 'timeline', 'aria-label': 'History, oldest first' }, items),
    items.length === 0 ? el('p', { class: 'empty' }, 'No history recorded.') : null,
  ];
}

function renderUnreadSignals(signals) {
  const list = Array.isArray(signals) ? signals : [];
  if (list.length === 0) return el('p', { class: 'empty' }, 'No unread signals');
  return dataTable({
    id: 'unread-signals',
    caption: 'Unread signals',
    columns: [{ label: 'Id', w: 15 }, { label: 'Name', w: 20 }, { label: 'Payload', w: 45 }, { label: 'Received at (UTC)', w: 20 }],
    rows: list.map((s) => el('tr', { 'data-signal-id': s.id },
      cell('id', s.id, { cls: 'mono' }),
      cell('name', s.name, { cls: 'mono' }),
      cell('payload', jsonText(s.payload, false), { cls: 'mono' }),
      timeCell('received_at', s.received_at))),
  });
}

function executionActions(id, ex) {
  const status = String(ex.status ?? '');
  const nameInput = el('input', { id: 'signal-name', name: 'signal-name', type: 'text', required: true, autocomplete: 'off' });
  const payloadInput = el('textarea', { id: 'signal-payload', name: 'signal-payload', class: 'code', 'aria-describedby': 'signal-error' });
  payloadInput.value = '{}';
  const signalError = el('p', { id: 'signal-error', class: 'field-error', hidden: true });
  const signalForm = el('form', { id: 'signal-form', class: 'action-form', 'aria-labelledby': 'signal-title' },
    el('h3', { id: 'signal-title' }, 'Send a signal'),
    field('signal-name', 'Signal name', nameInput),
    el('div', { class: 'field' }, el('label', { for: 'signal-payload' }, 'Payload (JSON)'), payloadInput, signalError),
    el('div', { class: 'buttons' }, el('button', { type: 'submit' }, 'Send signal')));
  on(signalForm, 'submit', (event) => {
    event.preventDefault();
    const name = nameInput.value.trim();
    let payload;
    const fail = (text, control) => {
      signalError.textContent = text;
      signalError.hidden = false;
      control.setAttribute('aria-invalid', 'true');
      control.focus();
    };
    nameInput.removeAttribute('aria-invalid');
    payloadInput.removeAttribute('aria-invalid');
    signalError.hidden = true;
    if (!name) return fail('Enter a signal name.', nameInput);
    try {
      payload = JSON.parse(payloadInput.value.trim() === '' ? 'null' : payloadInput.value);
    } catch (err) {
      return fail(`The payload is not valid JSON: ${err.message}`, payloadInput);
    }
    runAction(`Sending signal "${name}"…`,
      () => api(`/executions/${enc(id)}/signals/${enc(name)}`, { method: 'POST', body: { payload } }),
      (r) => `Signal "${name}" sent. ${describeResult(r)}`);
  });

  let stopMode = 'cancel';
  const stop = confirmDialog({
    id: 'stop-dialog', titleId: 'stop-title', title: 'Cancel run', text: '',
    confirmId: 'confirm-stop', confirmLabel: 'Cancel run', danger: true,
    extra: el('div', { class: 'field' },
      el('label', { for: 'stop-reason' }, 'Reason'),
      el('textarea', { id: 'stop-reason', name: 'reason', required: true }),
      el('p', { id: 'stop-error', class: 'field-error', hidden: true }, 'Enter a reason.')),
    onConfirm: (dialog) => {
      const reasonInput = dialog.querySelector('#stop-reason');
      const reason = reasonInput.value.trim();
      if (!reason) {
        dialog.querySelector('#stop-error').hidden = false;
        reasonInput.focus();
        return;
      }
      dialog.close();
      const verb = stopMode === 'terminate' ? 'Terminate' : 'Cancel';
      runAction(`${verb} run: sending…`,
        () => api(`/executions/${enc(id)}/${stopMode}`, { method: 'POST', body: { reason, requested_by: 'console' } }),
        (r) => `${verb} run: ${describeResult(r) || 'accepted'}`);
    },
  });
  const openStop = (mode) => {
    stopMode = mode;
    const label = mode === 'terminate' ? 'Terminate run' : 'Cancel run';
    stop.heading.textContent = label;
    stop.confirm.textContent = label;
    stop.description.textContent = mode === 'terminate'
      ? 'The run stops at once: no more workflow code runs, and nothing is cleaned up.'
      : 'The run is asked to cancel; it ends at its next durable operation and may clean up first.';
    stop.dialog.querySelector('#stop-error').hidden = true;
    openDialog(stop.dialog);
  };

  const buttons = el('div', { class: 'buttons' });
  if (ACTIVE_STATUSES.has(status)) {
    buttons.append(
      on(el('button', { type: 'button', id: 'cancel', class: 'secondary' }, 'Cancel run…'), 'click', () => openStop('cancel')),
      on(el('button', { type: 'button', id: 'terminate', class: 'danger' }, 'Terminate run…'), 'click', () => openStop('terminate')));
  }
  if (status === 'failed') {
    buttons.append(on(el('button', { type: 'button', id: 'replay-run' }, 'Replay'), 'click', () =>
      runAction('Replay: sending…',
        () => api(`/dead-letters/${enc(id)}/replay`, { method: 'POST', body: {} }),
        (r) => `Replay: ${describeResult(r) || 'accepted'}`)));
  }
  return el('section', { 'aria-labelledby': 'actions-title', class: 'actions' },
    el('h2', { id: 'actions-title' }, 'Actions'),
    actionStatus,
    buttons.childNodes.length ? buttons : null,
    signalForm,
    stop.dialog);
}

// ---------------------------------------------------------------------------
// Connector dead letters

function dlqFilters(params) {
  const p = (k) => params.get(k) || '';
  return filterForm('dlq-filters', [
    field('binding', 'Binding', textInput('binding', p('binding'))),
    field('stream', 'Stream', textInput('stream', p('stream'))),
    field('reason', 'Reason', textInput('reason', p('reason'))),
    field('since', 'Failed since', textInput('since', p('since'), { placeholder: ISO_PLACEHOLDER }), 'ISO 8601, UTC'),
    field('until', 'Failed until', textInput('until', p('until'), { placeholder: ISO_PLACEHOLDER }), 'ISO 8601, UTC'),
    field('limit', 'Rows', select('limit', ['25', '50', '100', '200', '500'].map((n) => [n, n]), p('limit') || '50')),
  ], { base: '#/connector-dead-letters', names: [...DLQ_FILTERS, 'limit'] });
}

function replayState(d) {
  if (d.replayed_at || d.replay_outcome) {
    return `${d.replay_outcome || 'replayed'}${d.replayed_at ? ' at ' + d.replayed_at : ''}`;
  }
  if (d.replay_requested_at) return `requested${d.replay_requested_by ? ' by ' + d.replay_requested_by : ''}`;
  return 'not replayed';
}

async function pageConnectorDeadLetters(ctx) {
  setTitle('Connector dead letters');
  const params = ctx.route.params;
  const filter = {};
  for (const k of DLQ_FILTERS) if (params.get(k)) filter[k] = params.get(k);
  const limit = params.get('limit') || '50';
  const heading = el('h1', null, 'Connector dead letters');
  const form = dlqFilters(params);
  let body;
  try {
    body = await api('/connector-dead-letters' + query(new URLSearchParams({ ...filter, limit })));
  } catch (err) {
    ctx.mount(heading, form, actionStatus, errorBox(err));
    return;
  }
  if (ctx.stale()) return;
  const items = Array.isArray(body.items) ? body.items : [];
  const rows = items.map((d) => el('tr', { 'data-id': d.id, 'data-coordinates': d.coordinates },
    cell('id', d.id, { cls: 'mono', content: el('a', { href: route('connector-dead-letters', d.id) }, visible(d.id ?? '')) }),
    cell('binding', d.binding),
    cell('stream', d.stream, { cls: 'mono' }),
    cell('coordinates', d.coordinates, { cls: 'mono' }),
    cell('reason', d.reason),
    cell('detail', d.detail),
    cell('attempts', d.attempts, { cls: 'num' }),
    cell('payload_bytes', d.payload_bytes, { cls: 'num' }),
    timeCell('failed_at', d.failed_at),
    cell('replay', replayState(d))));
  const hasFilter = Object.keys(filter).length > 0;
  ctx.mount(heading, form, actionStatus,
    hasFilter ? bulkControls(filter)
      : el('p', { class: 'muted' }, 'Set a filter to replay or purge the matching dead letters in bulk.'),
    el('p', { class: 'muted' }, `Showing ${plural(items.length, 'dead letter')}, newest first` +
      (items.length >= Number(limit) ? ` (the limit is ${limit}; more may match).` : '.')),
    dataTable({
      id: 'connector-dead-letters',
      caption: 'Connector dead letters',
      columns: [
        { label: 'Id', w: 9 }, { label: 'Binding', w: 9 }, { label: 'Stream', w: 10 },
        { label: 'Coordinates', w: 12 }, { label: 'Reason', w: 10 }, { label: 'Detail', w: 13 },
        { label: 'Attempts', cls: 'num', w: 8 }, { label: 'Size (bytes)', cls: 'num', w: 7 },
        { label: 'Failed at (UTC)', w: 14 }, { label: 'Replay', w: 8 },
      ],
      rows,
    }),
    items.length === 0 ? el('p', { class: 'empty' }, 'No connector dead letters match these filters.') : null);
}

function bulkControls(filter) {
  let mode = 'replay';
  let previewRun = 0;
  const preview = el('p', { id: 'bulk-preview' }, '');
  const filterText = Object.entries(filter).map(([k, v]) => `${k} = ${v}`).join(', ');
  const bulk = confirmDialog({
    id: 'bulk-dialog', titleId: 'bulk-title', title: 'Replay matching dead letters',
    text: '', confirmId: 'confirm-bulk', confirmLabel: 'Replay matching', danger: false,
    extra: [el('p', { class: 'muted' }, 'Filter: ', data(filterText)), preview],
    onConfirm: (dialog) => {
      dialog.close();
      if (mode === 'replay') {
        runAction('Requesting replay of the matching dead letters…',
          () => api('/connector-dead-letters/replay', { method: 'POST', body: { ...filter, requested_by: 'console' } }),
          (r) => `Replay requested for ${plural(Number(r.requested) || 0, 'dead letter')}; ` +
            `${Number(r.already_requested) || 0} already requested, ${Number(r.already_replayed) || 0} already replayed.`);
      } else {
        runAction('Purging the matching dead letters…',
          () => api('/connector-dead-letters/purge', { method: 'POST', body: { ...filter } }),
          (r) => `Purged ${plural(Number(r.purged) || 0, 'dead letter')}.`);
      }
    },
  });
  const open = async (which) => {
    mode = which;
    const replay = which === 'replay';
    bulk.heading.textContent = replay ? 'Replay matching dead letters' : 'Purge matching dead letters';
    bulk.description.textContent = replay
      ? 'Every dead letter that matches the filter is marked for replay; the connector sends it to its workflow again.'
      : 'Every dead letter that matches the filter is deleted for good, payload included.';
    bulk.confirm.textContent = replay ? 'Replay matching' : 'Purge matching';
    bulk.confirm.setAttribute('class', replay ? '' : 'danger');
    bulk.confirm.disabled = true;
    preview.textContent = 'Counting the matching dead letters…';
    openDialog(bulk.dialog);
    const run = ++previewRun;
    try {
      const body = await api('/connector-dead-letters' + query(new URLSearchParams({ ...filter, limit: '500' })));
      if (run !== previewRun) return;
      const n = Array.isArray(body.items) ? body.items.length : 0;
      preview.textContent = n >= 500 ? '500 or more match'
        : `${plural(n, 'dead letter')} ${n === 1 ? 'matches' : 'match'}`;
    } catch (err) {
      if (run !== previewRun) return;
      preview.textContent = `The count failed: ${visible(describeError(err))}`;
    }
    bulk.confirm.disabled = false;
  };
  return el('div', { class: 'buttons bulk' },
    on(el('button', { type: 'button', id: 'replay-filtered', class: 'secondary' }, 'Replay matching…'), 'click', () => open('replay')),
    on(el('button', { type: 'button', id: 'purge-filtered', class: 'danger' }, 'Purge matching…'), 'click', () => open('purge')),
    bulk.dialog);
}

async function pageConnectorDeadLetter(ctx) {
  const id = ctx.route.id;
  setTitle(`Connector dead letter ${short(id)}`);
  const back = el('p', null, el('a', { href: '#/connector-dead-letters' }, 'All connector dead letters'));
  if (purged.has(id)) {
    ctx.mount(idHeading('Connector dead letter', id), back, actionStatus,
      el('p', { class: 'empty' }, 'This dead letter has been purged.'));
    return;
  }
  let d;
  try {
    d = await api('/connector-dead-letters/' + enc(id));
  } catch (err) {
    ctx.mount(idHeading('Connector dead letter', id), back, actionStatus, errorBox(err));
    return;
  }
  if (ctx.stale()) return;
  ctx.mount(idHeading('Connector dead letter', id), back,
    el('section', { 'aria-labelledby': 'summary-title' },
      el('h2', { id: 'summary-title', class: 'visually-hidden' }, 'Summary'),
      el('dl', { id: 'dead-letter-summary', class: 'summary' },
        summaryRow('Binding', 'binding', data(d.binding)),
        summaryRow('Stream', 'stream', data(d.stream, 'mono')),
        summaryRow('Coordinates', 'coordinates', data(d.coordinates, 'mono')),
        summaryRow('Idempotency key', 'idempotency_key', data(d.idempotency_key, 'mono')),
        summaryRow('Reason', 'reason', data(d.reason)),
        summaryRow('Detail', 'detail', data(d.detail)),
        summaryRow('Attempts', 'attempts', data(d.attempts)),
        summaryRow('Failed at', 'failed_at', data(d.failed_at)),
        summaryRow('Payload size', 'payload_bytes', data(d.payload_bytes === undefined || d.payload_bytes === null ? null : `${d.payload_bytes} bytes`)),
        summaryRow('Replay requested at', 'replay_requested_at', data(d.replay_requested_at)),
        summaryRow('Replay requested by', 'replay_requested_by', data(d.replay_requested_by)),
        summaryRow('Replayed at', 'replayed_at', data(d.replayed_at)),
        summaryRow('Replay outcome', 'replay_outcome', data(d.replay_outcome)),
        summaryRow('Replay detail', 'replay_detail', data(d.replay_detail)),
        summaryRow('Replay execution', 'replay_execution_id', d.replay_execution_id
          ? el('a', { href: route('executions', d.replay_execution_id) }, data(d.replay_execution_id, 'mono'))
          : data(null)))),
    payloadViewer(d),
    messageMeta(d),
    deadLetterActions(id));
}

// The record key and headers the message carried: text when they are UTF-8,
// else their bytes in hex (both come from the broker and are shown as text).
function bytesText(text, b64) {
  if (typeof text === 'string') return visible(text);
  try {
    return Array.from(decodeBase64(b64), (b) => HEX[b]).join(' ');
  } catch {
    return '(could not be decoded)';
  }
}

function messageMeta(d) {
  const headers = Array.isArray(d.headers) ? d.headers : [];
  const key = d.key_base64 === null || d.key_base64 === undefined ? null : bytesText(d.key, d.key_base64);
  const rows = headers.map((h) => el('tr', { 'data-header-name': String(h.name ?? '') },
    cell('name', h.name, { cls: 'mono' }),
    cell('value', bytesText(h.value, h.value_base64), { cls: 'mono' }),
    cell('encoding', typeof h.value === 'string' ? 'text' : 'hex')));
  return el('section', { 'aria-labelledby': 'meta-title' },
    el('h2', { id: 'meta-title' }, 'Key and headers'),
    el('dl', { id: 'message-key', class: 'summary' }, summaryRow('Record key', 'key', data(key, 'mono'))),
    rows.length === 0
      ? el('p', { class: 'empty' }, 'No headers recorded.')
      : dataTable({
        id: 'message-headers',
        caption: 'Headers',
        columns: [{ label: 'Name', w: 20 }, { label: 'Value' }, { label: 'Shown as', w: 10 }],
        rows,
      }));
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

function decodeBase64(b64) {
  const binary = atob(String(b64 ?? ''));
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

// Classic "hexdump -C" lines: offset, 16 bytes in two groups of 8, printable
// ASCII. Stops after HEX_DUMP_LIMIT bytes and says how much was left out.
function hexDump(bytes) {
  if (bytes.length === 0) return '(empty payload)';
  const n = Math.min(bytes.length, HEX_DUMP_LIMIT);
  const lines = [];
  for (let off = 0; off < n; off += 16) {
    let hex = '';
    let ascii = '';
    for (let i = off; i < off + 16; i++) {
      if (i === off + 8) hex += ' ';
      if (i < n) {
        const b = bytes[i];
        hex += HEX[b] + ' ';
        ascii += b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.';
      } else {
        hex += '   ';
      }
    }
    lines.push(`${off.toString(16).padStart(8, '0')}  ${hex} |${ascii}|`);
  }
  if (bytes.length > n) {
    lines.push(`… ${bytes.length - n} more bytes not shown (the dump stops at 64 KiB of ${bytes.length} bytes).`);
  }
  return lines.join('\n');
}

function payloadViewer(d) {
  let bytes = null;
  let decodeError = null;
  try {
    bytes = decodeBase64(d.payload_base64);
  } catch (err) {
    decodeError = err;
  }
  const text = typeof d.payload === 'string' ? d.payload : null;
  let jsonView = '(not JSON)';
  if (text !== null) {
    try {
      jsonView = JSON.stringify(JSON.parse(text), null, 2);
    } catch { /* stays "(not JSON)" */ }
  }
  const views = {
    text: el('pre', { id: 'payload-text', class: 'payload', dir: 'ltr', tabindex: '0' },
      text === null ? '(not valid UTF-8 — see Hex)' : visible(text)),
    json: el('pre', { id: 'payload-json', class: 'payload', dir: 'ltr', tabindex: '0' }, jsonView),
    hex: el('pre', { id: 'payload-hex', class: 'payload hex', dir: 'ltr', tabindex: '0' },
      bytes ? hexDump(bytes) : `(the payload could not be decoded: ${describeError(decodeError)})`),
  };
  const labels = { text: 'Text', json: 'JSON', hex: 'Hex' };
  const buttons = {};
  const choose = (which) => {
    for (const key of Object.keys(views)) {
      views[key].hidden = key !== which;
      buttons[key].setAttribute('aria-pressed', String(key === which));
    }
  };
  for (const key of Object.keys(views)) {
    buttons[key] = on(el('button', { type: 'button', class: 'toggle', id: `payload-view-${key}`, 'aria-pressed': 'false', 'aria-controls': `payload-${key}` }, labels[key]),
      'click', () => choose(key));
  }
  choose(text === null ? 'hex' : 'text');
  const size = bytes ? bytes.length : Number(d.payload_bytes) || 0;
  const sizeNote = bytes && Number.isFinite(d.payload_bytes) && d.payload_bytes !== bytes.length
    ? ` (the record says ${d.payload_bytes} bytes)` : '';
  return el('section', { 'aria-labelledby': 'payload-title', class: 'payload-viewer' },
    el('div', { class: 'section-head' },
      el('h2', { id: 'payload-title' }, 'Payload'),
      el('div', { class: 'toggles', role: 'group', 'aria-label': 'Payload view' }, buttons.text, buttons.json, buttons.hex)),
    el('p', { id: 'payload-size' }, `Size: ${size} bytes${sizeNote}`),
    views.text, views.json, views.hex);
}

function deadLetterActions(id) {
  const replay = confirmDialog({
    id: 'replay-dialog', titleId: 'replay-title', title: 'Replay this dead letter',
    text: 'The dead letter is marked for replay; the connector sends its payload to the workflow again.',
    confirmId: 'confirm-replay', confirmLabel: 'Replay', danger: false,
    onConfirm: (dialog) => {
      dialog.close();
      runAction('Requesting replay…',
        () => api('/connector-dead-letters/replay', { method: 'POST', body: { id, requested_by: 'console' } }),
        (r) => (Number(r.requested) > 0 ? 'Replay requested. ' : 'No new replay requested. ') + describeResult(r));
    },
  });
  const purge = confirmDialog({
    id: 'purge-dialog', titleId: 'purge-title', title: 'Purge this dead letter',
    text: 'The dead letter and its payload are deleted for good.',
    confirmId: 'confirm-purge', confirmLabel: 'Purge', danger: true,
    onConfirm: (dialog) => {
      dialog.close();
      runAction('Purging…',
        async () => {
          const r = await api('/connector-dead-letters/purge', { method: 'POST', body: { id } });
          if (Number(r.purged) > 0) purged.add(id);
          return r;
        },
        (r) => `Purged ${plural(Number(r.purged) || 0, 'dead letter')}.`);
    },
  });
  return el('section', { 'aria-labelledby': 'actions-title', class: 'actions' },
    el('h2', { id: 'actions-title' }, 'Actions'),
    actionStatus,
    el('div', { class: 'buttons' },
      on(el('button', { type: 'button', id: 'replay' }, 'Replay…'), 'click', () => openDialog(replay.dialog)),
      on(el('button', { type: 'button', id: 'purge', class: 'danger' }, 'Purge…'), 'click', () => openDialog(purge.dialog))),
    replay.dialog, purge.dialog);
}

// ---------------------------------------------------------------------------
// Engine dead letters

async function pageDeadLetters(ctx) {
  setTitle('Engine dead letters');
  const heading = el('h1', null, 'Engine dead letters');
  const intro = el('p', { class: 'muted' }, 'Executions that failed for good, newest first (at most 100).');
  let body;
  try {
    body = await api('/dead-letters?limit=100');
  } catch (err) {
    ctx.mount(heading, intro, actionStatus, errorBox(err));
    return;
  }
  if (ctx.stale()) return;
  const items = Array.isArray(body.items) ? body.items : [];
  const rows = items.map((d) => {
    const id = String(d.execution_id ?? '');
    const button = el('button', { type: 'button', class: 'replay small', 'aria-label': `Replay execution ${id}` }, 'Replay');
    on(button, 'click', () => {
      button.disabled = true;
      runAction(`Replaying execution ${short(id)}…`,
        () => api(`/dead-letters/${enc(id)}/replay`, { method: 'POST', body: {} }),
        (r) => `Replay of execution ${short(id)}: ${describeResult(r) || 'accepted'}`);
    });
    return el('tr', { 'data-execution-id': d.execution_id },
      cell('execution_id', d.execution_id, { cls: 'mono', content: el('a', { href: route('executions', id) }, visible(id)) }),
      cell('workflow', d.workflow),
      cell('workflow_id', d.workflow_id, { cls: 'mono' }),
      cell('reason', d.reason),
      cell('error', d.error),
      cell('attempts', d.attempts, { cls: 'num' }),
      timeCell('failed_at', d.failed_at),
      el('td', { class: 'actions-cell' }, button));
  });
  ctx.mount(heading, intro, actionStatus,
    dataTable({
      id: 'dead-letters',
      caption: 'Engine dead letters',
      columns: [
        { label: 'Execution id', w: 15 }, { label: 'Workflow', w: 12 }, { label: 'Workflow id', w: 11 },
        { label: 'Reason', w: 11 }, { label: 'Error', w: 18 }, { label: 'Attempts', cls: 'num', w: 8 },
        { label: 'Failed at (UTC)', w: 15 }, { label: 'Action', w: 10 },
      ],
      rows,
    }),
    items.length === 0 ? el('p', { class: 'empty' }, 'There are no engine dead letters.') : null);
}

// ---------------------------------------------------------------------------
// Not found

async function pageNotFound(ctx) {
  setTitle('Not found');
  ctx.mount(el('h1', null, 'Page not found'),
    el('p', null, 'There is no console page at this address. ', el('a', { href: '#/overview' }, 'Go to the overview'), '.'));
}

// ---------------------------------------------------------------------------
// Start

on(dom.tokenButton, 'click', openTokenDialog);
on(dom.tokenCancel, 'click', () => dom.tokenDialog.close());
on(dom.tokenForm, 'submit', (event) => {
  event.preventDefault();
  setToken(dom.tokenInput.value.trim());
  dom.tokenInput.value = '';
  hideAuthError();
  dom.tokenDialog.close();
  render({ soft: false });
});
on(dom.skipLink, 'click', (event) => {
  // "#main" is not a route: move focus by hand instead of changing the hash.
  event.preventDefault();
  dom.main.focus();
});
window.addEventListener('hashchange', () => { render({ navigated: true }); });

if (location.hash === '' || location.hash === '#' || location.hash === '#/') {
  history.replaceState(null, '', '#/overview');
}
render();
