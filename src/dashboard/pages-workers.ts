/**
 * The workers connected to the cluster (`GET /admin/workers`): each worker-channel socket and
 * each waiting long-poll, on which node, for which task types, its credits and the leases its
 * socket holds, and since when. Every live node lists its own; one that does not answer is named.
 */
import { api, type Workers } from './api.js';
import { badge, h, heading, relative, table, when } from './dom.js';
import type { Page } from './page.js';
import { stat } from './pages-cluster.js';

export const workersPage: Page = (el) => {
  const summary = h('div', { class: 'summary' });
  const missing = h('p', { class: 'notice bad', hidden: true });
  const list = h('section', { class: 'table-wrap' });
  el.append(heading('Workers', summary), missing, list);

  return async () => {
    const found = await api<Workers>('/admin/workers');
    const sockets = found.workers.filter((w) => w.transport === 'channel');
    summary.replaceChildren(
      stat('workers', new Set(found.workers.map((w) => w.worker_id)).size + found.more),
      stat('channel sockets', sockets.length),
      stat('waiting polls', found.workers.length - sockets.length),
      stat(
        'leases held',
        sockets.reduce((n, w) => n + (w.leases ?? 0), 0),
      ),
      stat('nodes', new Set(found.workers.map((w) => w.node_id)).size),
    );
    missing.hidden = found.unanswered.length === 0;
    missing.textContent = `Not answering, their workers not shown: ${found.unanswered.join(', ')}`;
    list.replaceChildren(
      table(
        [
          { title: 'worker', cell: (w) => h('code', { class: 'worker-id' }, w.worker_id) },
          { title: 'node', cell: (w) => h('span', { class: 'node-id' }, w.node_id) },
          { title: 'transport', cell: (w) => badge(w.transport === 'channel' ? 'channel' : 'http') },
          { title: 'task types', cell: (w) => h('span', { class: 'task-types' }, w.task_types.join(', ')) },
          { title: 'credits', num: true, cell: (w) => w.credits ?? '—' },
          { title: 'leases', num: true, cell: (w) => w.leases ?? '—' },
          {
            title: 'connected since',
            cell: (w) =>
              h(
                'span',
                {},
                when(w.connected_since),
                h('span', { class: 'muted' }, ` · ${relative(w.connected_since)}`),
              ),
          },
        ],
        found.workers,
        'No workers connected: none has a channel socket open or a long-poll waiting on any live node.',
      ),
      found.more > 0 ? h('p', { class: 'muted' }, `… and ${found.more} more not listed.`) : h('span', {}),
    );
  };
};
