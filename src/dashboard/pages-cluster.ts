/** The cluster: its nodes and their liveness, the ring's spread, and each wheel partition's owner and epoch. */
import { api, type ClusterStatus } from './api.js';
import { badge, duration, h, heading, table, when } from './dom.js';
import type { Page } from './page.js';

/** A node's colour in the partition map: its place among the ring's nodes, sorted. */
function nodeColour(ids: string[], id: string | null): string {
  if (id === null) return 'none';
  const i = ids.indexOf(id);
  return i < 0 ? 'none' : String(i % 8);
}

export const clusterPage: Page = (el) => {
  const summary = h('div', { class: 'summary' });
  const nodes = h('section', {});
  const partitions = h('section', {});
  el.append(heading('Cluster', summary), nodes, partitions);

  return async () => {
    const status = await api<ClusterStatus>('/admin/cluster');
    const liveCount = status.nodes.filter((n) => n.live).length;
    const ids = [...status.nodes.map((n) => n.node_id)].sort();
    summary.replaceChildren(
      stat('nodes live', `${liveCount} / ${status.nodes.length}`),
      stat('partitions', status.partitions.length),
      stat('ring spread', status.ring.spread),
      stat('ring changes', status.ring_changes),
      stat('answered by', status.node_id),
    );
    nodes.replaceChildren(
      h('h2', {}, 'Nodes'),
      table(
        [
          { title: 'node', cell: (n) => h('span', { class: `dot c${nodeColour(ids, n.node_id)}` }, n.node_id) },
          // Live but cut off from Redis: out of the ring while another node reaches it.
          {
            title: 'state',
            cell: (n) =>
              badge(
                n.live ? (n.redis_reachable === false ? 'no-redis' : 'live') : n.state === 'live' ? 'silent' : n.state,
              ),
          },
          { title: 'url', cell: (n) => h('code', {}, n.url) },
          { title: 'partitions', num: true, cell: (n) => status.ring.partitions_per_node[n.node_id] ?? 0 },
          { title: 'heartbeat age', num: true, cell: (n) => duration(n.heartbeat_age_ms) },
          { title: 'started', cell: (n) => when(n.started_at) },
          { title: '', cell: (n) => (n.self ? h('span', { class: 'muted' }, 'this node') : null) },
        ],
        status.nodes,
        'No nodes: the membership table is empty.',
      ),
    );
    const moving = status.partitions.filter((p) => p.held_by !== p.owner).length;
    partitions.replaceChildren(
      h(
        'h2',
        {},
        'Wheel partitions',
        moving > 0 ? h('span', { class: 'muted' }, ` · ${moving} moving to their owner`) : null,
      ),
      status.partitions.length === 0
        ? h('p', { class: 'empty' }, 'No partitions.')
        : h(
            'ol',
            { class: 'partitions' },
            ...status.partitions.map((p) =>
              h(
                'li',
                {
                  class: `partition c${nodeColour(ids, p.owner)}${p.held_by !== p.owner ? ' moving' : ''}`,
                  title: `partition ${p.partition}: owner ${p.owner}, held by ${p.held_by ?? 'nobody'}, epoch ${p.epoch ?? '—'}`,
                },
                h('span', { class: 'pnum' }, p.partition),
                h('span', { class: 'powner' }, p.owner),
                h('span', { class: 'pepoch' }, `e${p.epoch ?? '—'}`),
              ),
            ),
          ),
    );
  };
};

export function stat(label: string, value: string | number): HTMLElement {
  return h('div', { class: 'stat' }, h('span', { class: 'value' }, value), h('span', { class: 'label' }, label));
}
