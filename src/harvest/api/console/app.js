// harvest console: the browser front end served by harvest at /ui/.
//
// Plain JavaScript as ES modules: this one, the entry point index.html loads,
// holds the router and the start-up wiring and imports the rest (dom.js, api.js,
// nav.js and one module per page). No framework and no build step. The page is
// served with `Content-Security-Policy: default-src 'self'; frame-ancestors
// 'none'`, so there is no inline script, no inline style and no eval here:
// styling happens through classes in the stylesheets (base.css and the
// three index.html links after it) and events through addEventListener.
//
// The inert-text rule: everything the server sends (payloads, ids, workflow
// names, reasons, error texts) may have been chosen by whoever produced a
// message on a broker. It is therefore only ever put into the page as text
// (text nodes, textContent) or into a fixed set of harmless attributes through
// setAttribute. Nothing here hands a string to the HTML parser (no markup
// property, no document writing; tests/api checks the served scripts), and
// the only links built from data are "#/..." routes with encodeURIComponent'd
// segments and a trace URL that parses as http(s).

import { REFRESH_MS, el, appendChildren, on, setTitle, dom } from './dom.js';
import { setToken, openTokenDialog, hideAuthError, errorBox, setActionStatus } from './api.js';
import { setRenderer } from './nav.js';
import { pageOverview } from './overview.js';
import { pageExecutions, pageExecution } from './executions.js';
import { purged, pageConnectorDeadLetters, pageConnectorDeadLetter } from './connector_dead_letters.js';
import { pageDeadLetters } from './dead_letters.js';

// ---------------------------------------------------------------------------
// Routing

let generation = 0;
let refreshTimer = null;
let lastHash = null;

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

function loading() {
  return el('p', { class: 'muted' }, 'Loading…');
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

setRenderer(render); // page code re-renders and navigates through nav.js

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
