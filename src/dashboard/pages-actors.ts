/**
 * The actor browser: live actors by kind and node (`GET /admin/actors`, paged by `next_token`
 * where the node pages them), and one actor with its state (`GET /admin/actors/{kind}/{key}`).
 */
import { api, query, type ActorInfo, type ActorPage } from './api.js';
import { h, heading, json, link, table, when } from './dom.js';
import { withParams, type Page } from './page.js';

const LIMIT = 100;

function actorHash(a: { kind: string; key: string }): string {
  return `#/actors/${encodeURIComponent(a.kind)}/${encodeURIComponent(a.key)}`;
}

export const actorsPage: Page = (el, route) => {
  const kind = route.params.get('kind') ?? '';
  const node = route.params.get('node') ?? '';
  const token = route.params.get('page') ?? '';
  const kindInput = h('input', { name: 'kind', placeholder: 'kind (wheel, dag, …)', value: kind, spellcheck: 'false' });
  const nodeInput = h('input', { name: 'node', placeholder: 'node id', value: node, spellcheck: 'false' });
  const form = h('form', { class: 'inline' }, kindInput, nodeInput, h('button', { type: 'submit' }, 'Filter'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    location.hash = withParams(route, { kind: kindInput.value.trim(), node: nodeInput.value.trim() });
  });
  const answered = h('div', { class: 'summary' });
  const list = h('section', {});
  const pager = h('div', { class: 'pager' });
  el.append(heading('Actors', answered), h('div', { class: 'toolbar' }, form), list, pager);

  return async () => {
    const page = await api<ActorPage>(`/admin/actors${query({ kind, node, limit: LIMIT, next_token: token })}`);
    answered.replaceChildren(
      ...(page.nodes ?? []).map((n) =>
        h(
          'span',
          { class: `badge ${n.ok ? 's-live' : 's-silent'}`, title: n.ok ? 'answered' : 'did not answer' },
          n.node_id,
        ),
      ),
    );
    list.replaceChildren(
      table<ActorInfo>(
        [
          { title: 'node', cell: (a) => a.node },
          { title: 'kind', cell: (a) => a.kind },
          { title: 'key', cell: (a) => link(actorHash(a), h('code', {}, a.key)) },
          { title: 'mailbox', num: true, cell: (a) => a.mailbox_depth },
          { title: 'epoch', num: true, cell: (a) => a.epoch },
          { title: 'snapshot', num: true, cell: (a) => a.snapshot_version ?? '—' },
          { title: 'activated', cell: (a) => when(a.activated_at) },
          { title: 'last message', cell: (a) => when(a.last_message_at) },
        ],
        page.actors,
        kind || node ? 'No live actors match.' : 'No live actors.',
      ),
    );
    pager.replaceChildren(
      token ? link(withParams(route, { kind, node }), '« first page') : h('span', {}),
      page.next_token ? link(withParams(route, { kind, node, page: page.next_token }), 'next page »') : h('span', {}),
    );
  };
};

export const actorPage: Page = (el, route) => {
  const kind = route.parts[1] ?? '';
  const key = route.parts.slice(2).join('/');
  const info = h('section', { class: 'facts' });
  const state = h('section', {});
  el.append(
    heading(`Actor ${kind} / ${key}`, link(`#/actors?kind=${encodeURIComponent(kind)}`, `all ${kind} actors`)),
    info,
    state,
  );
  return async () => {
    const a = await api<ActorInfo>(`/admin/actors/${encodeURIComponent(kind)}/${encodeURIComponent(key)}`);
    const row = (label: string, value: Node | string | number): HTMLElement[] => [
      h('dt', {}, label),
      h('dd', {}, value),
    ];
    info.replaceChildren(
      h(
        'dl',
        {},
        ...row('node', a.node),
        ...row('mailbox depth', a.mailbox_depth),
        ...row('epoch', a.epoch),
        ...row('snapshot version', a.snapshot_version ?? '—'),
        ...row('activated', when(a.activated_at)),
        ...row('last message', when(a.last_message_at)),
      ),
    );
    state.replaceChildren(h('h2', {}, 'State'), json(a.state));
  };
};
