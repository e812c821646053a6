// harvest console: the engine dead letters page (dead-lettered runs, each
// with a Replay button).

import {
  el, on, enc, route, visible, cell, dataTable, pagingButtons, short, setTitle, timeCell, describeResult,
} from './dom.js';
import { api, query, errorBox, actionStatus, runAction } from './api.js';

// ---------------------------------------------------------------------------
// Engine dead letters

export async function pageDeadLetters(ctx) {
  setTitle('Engine dead letters');
  const heading = el('h1', null, 'Engine dead letters');
  const cursor = ctx.route.params.get('cursor') || '';
  const intro = el('p', { class: 'muted' },
    `Dead-lettered runs (out of attempts, or crashing their workers), newest first, 100 a page${cursor ? ' (older page)' : ''}.`);
  let body;
  try {
    body = await api('/dead-letters' + query(new URLSearchParams({ limit: '100', ...(cursor ? { cursor } : {}) })));
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
    items.length === 0 ? el('p', { class: 'empty' }, 'There are no engine dead letters.') : null,
    pagingButtons('#/dead-letters', new URLSearchParams(), cursor, body.next_cursor));
}
