// harvest console: the executions list with its filters (filterForm() is
// shared with the connector dead letters), and one execution's page: summary,
// input/output/error, timeline, unread signals and actions.

import {
  EXECUTION_STATUSES, ACTIVE_STATUSES, START_SOURCES, EXECUTION_FILTERS, ISO_PLACEHOLDER, el, on, httpUrl,
  enc, route, withQuery, visible, data, cell, statusBadge, dataTable, pagingButtons, field, textInput, select,
  plural, short, setTitle, parseIso, timeCell, formatDuration, jsonText, describeResult,
} from './dom.js';
import { openDialog, api, query, errorBox, actionStatus, runAction, confirmDialog } from './api.js';
import { navigate } from './nav.js';

// ---------------------------------------------------------------------------
// Executions

export function filterForm(id, fields, onSubmit) {
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

export async function pageExecutions(ctx) {
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
  const paging = pagingButtons('#/executions', filters, cursor, body.next_cursor);
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

export function summaryRow(label, fieldName, ...content) {
  return [el('dt', null, label), el('dd', { 'data-field': fieldName }, ...content)];
}

export function idHeading(prefix, id) {
  return el('h1', { class: 'clamp', title: id }, prefix, ' ', el('span', { class: 'data mono', dir: 'ltr' }, visible(id)));
}

export async function pageExecution(ctx) {
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
