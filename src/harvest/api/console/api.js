// harvest console: the API prefix and calls (api(), query()), the token (its
// storage and dialog), 401 and other errors (errorBox), and the actions'
// shared parts: #action-status, runAction() and confirmDialog().

import { el, on, enc, visible, dom } from './dom.js';
import { render } from './nav.js';

// ---------------------------------------------------------------------------
// Token, API calls and errors

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
// The token lives in sessionStorage: it survives a reload of this tab but not
// the closing of the tab, it is not shared with other tabs, and unlike a
// cookie the browser never attaches it to a request on its own (so there is no
// cross-site request forgery to defend against). localStorage would keep the
// secret on disk indefinitely.
const TOKEN_KEY = 'harvest.token';

let memoryToken = ''; // used only when sessionStorage is unavailable

function getToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return memoryToken;
  }
}

export function setToken(token) {
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    memoryToken = token;
  }
}

export function openDialog(dialog) {
  if (!dialog.isConnected || dialog.open) return;
  dialog.showModal();
}

export function openTokenDialog() {
  if (dom.tokenDialog.open) return;
  dom.tokenInput.value = getToken();
  openDialog(dom.tokenDialog);
}

function showAuthError(message) {
  dom.authError.textContent = '401 unauthorized — the API token is missing or wrong. ' + (message || '');
  dom.authError.hidden = false;
  openTokenDialog();
}

export function hideAuthError() {
  dom.authError.hidden = true;
  dom.authError.textContent = '';
}

export class ApiError extends Error {
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

export function describeError(err) {
  if (err instanceof ApiError) return err.describe();
  return `Error: ${err && err.message ? err.message : String(err)}`;
}

export async function api(path, { method = 'GET', body } = {}) {
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
export function query(params) {
  const parts = [];
  for (const [k, v] of params) parts.push(`${enc(k)}=${enc(v)}`);
  return parts.length ? '?' + parts.join('&') : '';
}

// An error inside main. A 401 is already explained by #auth-error, so the
// page only offers the token dialog again.
export function errorBox(err) {
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
export const actionStatus = el('p', { id: 'action-status', role: 'status', class: 'action-status', tabindex: '-1' });

export function setActionStatus(text, isError = false) {
  actionStatus.textContent = text ? visible(text) : '';
  actionStatus.classList.toggle('is-error', Boolean(text) && isError);
  actionStatus.classList.toggle('is-empty', !text);
}

// Runs a POST, re-renders the page and reports the outcome in #action-status.
export async function runAction(pending, request, describeOk) {
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
export function confirmDialog({ id, titleId, title, text, confirmId, confirmLabel, danger, extra, onConfirm }) {
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
