// harvest console: the connector dead letters (dead-lettered broker messages):
// the filtered list with its bulk replay and purge, and one dead letter's page
// (summary, payload viewer with hex dump, key and headers, replay and purge).

import {
  HEX_DUMP_LIMIT, DLQ_FILTERS, ISO_PLACEHOLDER, el, on, enc, route, visible, data, cell, dataTable, pagingButtons,
  field, textInput, select, plural, short, setTitle, timeCell, describeResult,
} from './dom.js';
import {
  openDialog, describeError, api, query, errorBox, actionStatus, runAction, confirmDialog,
} from './api.js';
import { filterForm, summaryRow, idHeading } from './executions.js';

// ---------------------------------------------------------------------------
// Connector dead letters

export const purged = new Set(); // connector dead letters purged from their own page

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

export async function pageConnectorDeadLetters(ctx) {
  setTitle('Connector dead letters');
  const params = ctx.route.params;
  const filter = {};
  for (const k of DLQ_FILTERS) if (params.get(k)) filter[k] = params.get(k);
  const limit = params.get('limit') || '50';
  const cursor = params.get('cursor') || '';
  const heading = el('h1', null, 'Connector dead letters');
  const form = dlqFilters(params);
  let body;
  try {
    body = await api('/connector-dead-letters' +
      query(new URLSearchParams({ ...filter, limit, ...(cursor ? { cursor } : {}) })));
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
  // The paging keeps the filters, and the row count when one was chosen.
  const kept = new URLSearchParams({ ...filter, ...(params.get('limit') ? { limit } : {}) });
  ctx.mount(heading, form, actionStatus,
    hasFilter ? bulkControls(filter)
      : el('p', { class: 'muted' }, 'Set a filter to replay or purge the matching dead letters in bulk.'),
    el('p', { class: 'muted' }, `Dead-lettered broker messages, newest first: ${items.length} shown` +
      (cursor ? ' (older page)' : '') + (body.next_cursor ? '; older ones follow.' : '.')),
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
    items.length === 0 ? el('p', { class: 'empty' }, 'No connector dead letters match these filters.') : null,
    pagingButtons('#/connector-dead-letters', kept, cursor, body.next_cursor));
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

export async function pageConnectorDeadLetter(ctx) {
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

// One action on a dead letter's page: its button ("Replay…", #replay) and the
// confirmation dialog it opens (#replay-dialog, #replay-title,
// #confirm-replay), which on confirm runs the request through runAction().
function confirmedAction(name, { label, title, text, danger, pending, request, describeOk }) {
  const confirmation = confirmDialog({
    id: `${name}-dialog`, titleId: `${name}-title`, title, text,
    confirmId: `confirm-${name}`, confirmLabel: label, danger,
    onConfirm: (dialog) => {
      dialog.close();
      runAction(pending, request, describeOk);
    },
  });
  const button = on(el('button', { type: 'button', id: name, class: danger ? 'danger' : null }, `${label}…`),
    'click', () => openDialog(confirmation.dialog));
  return { button, dialog: confirmation.dialog };
}

function deadLetterActions(id) {
  const replay = confirmedAction('replay', {
    label: 'Replay', title: 'Replay this dead letter', danger: false,
    text: 'The dead letter is marked for replay; the connector sends its payload to the workflow again.',
    pending: 'Requesting replay…',
    request: () => api('/connector-dead-letters/replay', { method: 'POST', body: { id, requested_by: 'console' } }),
    describeOk: (r) => (Number(r.requested) > 0 ? 'Replay requested. ' : 'No new replay requested. ') + describeResult(r),
  });
  const purge = confirmedAction('purge', {
    label: 'Purge', title: 'Purge this dead letter', danger: true,
    text: 'The dead letter and its payload are deleted for good.',
    pending: 'Purging…',
    request: async () => {
      const r = await api('/connector-dead-letters/purge', { method: 'POST', body: { id } });
      if (Number(r.purged) > 0) purged.add(id);
      return r;
    },
    describeOk: (r) => `Purged ${plural(Number(r.purged) || 0, 'dead letter')}.`,
  });
  return el('section', { 'aria-labelledby': 'actions-title', class: 'actions' },
    el('h2', { id: 'actions-title' }, 'Actions'),
    actionStatus,
    el('div', { class: 'buttons' }, replay.button, purge.button),
    replay.dialog, purge.dialog);
}
