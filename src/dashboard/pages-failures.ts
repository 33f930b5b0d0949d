/**
 * The failed view (the dead-letter view): failed tasks grouped by task type and last error
 * (`GET /admin/failures`), each group with its count, its newest failure and a sample task, and
 * "Retry all" for the group: an operation with the filter {status: failed, task_type,
 * error_equals: the group's error}. `error_equals` compares the error as the groups are keyed
 * (its first 1 000 characters, exactly), so the retry takes that group and no other — not the
 * group of a longer error that contains this one, as `error_contains` would.
 */
import { api, query, whoAmI, type FailureGroup, type Failures } from './api.js';
import { errorCell, h, heading, link, shortId, table, when } from './dom.js';
import { OperationPanel } from './operation.js';
import { withParams, type Page } from './page.js';
import { stat } from './pages-cluster.js';

const DAY = { value: '24h', title: 'last 24 hours', ms: 86_400_000 };
const SINCE: { value: string; title: string; ms: number | null }[] = [
  { value: '1h', title: 'last hour', ms: 3_600_000 },
  DAY,
  { value: '7d', title: 'last 7 days', ms: 7 * 86_400_000 },
  { value: 'all', title: 'any time', ms: null },
];

export const failuresPage: Page = (el, route) => {
  const since = SINCE.find((s) => s.value === route.params.get('since')) ?? DAY;
  const summary = h('div', { class: 'summary' });
  const select = h(
    'select',
    { name: 'since', id: 'failures-since' },
    ...SINCE.map((s) => h('option', { value: s.value, selected: s === since }, s.title)),
  );
  select.addEventListener('change', () => {
    location.hash = withParams(route, { since: select.value });
  });
  const panel = new OperationPanel();
  const list = h('section', { class: 'table-wrap' });
  el.append(
    heading('Failed', summary),
    h('div', { class: 'toolbar' }, h('label', {}, 'Failed in the ', select)),
    panel.el,
    list,
  );

  return async () => {
    const sinceIso = since.ms === null ? null : new Date(Date.now() - since.ms).toISOString();
    const [found, me] = await Promise.all([
      api<Failures>(`/admin/failures${query({ since: sinceIso, limit: 200 })}`),
      whoAmI(),
    ]);
    const canRetry = me.scopes.includes('submit') || me.scopes.includes('admin');
    const total = found.groups.reduce((n, g) => n + g.count, 0);
    summary.replaceChildren(
      stat('failed tasks', found.scanned === found.scan_limit ? `${total}+` : total),
      stat('groups', found.group_count),
    );
    const retry = (g: FailureGroup): HTMLElement | string => {
      if (!canRetry) return '';
      const button = h('button', { type: 'button', class: 'secondary small', 'data-action': 'retry' }, 'Retry all');
      // An exact match: the group of tasks that failed without an error ('') is one like any other.
      button.addEventListener('click', () =>
        panel.ask('retry', { status: 'failed', task_type: g.task_type, error_equals: g.error }),
      );
      return button;
    };
    list.replaceChildren(
      table(
        [
          { title: 'task type', cell: (g) => h('code', {}, g.task_type) },
          { title: 'error', cell: (g) => errorCell(g.error) },
          { title: 'tasks', num: true, cell: (g) => h('span', { class: 'count' }, g.count) },
          { title: 'newest failure', cell: (g) => when(g.newest_failure) },
          { title: 'sample', cell: (g) => link(`#/tasks/${g.sample_task_id}`, shortId(g.sample_task_id)) },
          {
            title: '',
            cell: (g) =>
              h(
                'span',
                { class: 'row-actions' },
                link(
                  withParams(
                    { parts: ['tasks'], params: new URLSearchParams() },
                    { status: 'failed', task_type: g.task_type },
                  ),
                  'list',
                ),
                ' ',
                retry(g),
              ),
          },
        ],
        found.groups,
        since.ms === null ? 'No failed tasks.' : `No tasks failed in the ${since.title}.`,
      ),
    );
    for (const [i, row] of [...list.querySelectorAll('tbody tr')].entries()) {
      const g = found.groups[i];
      if (g === undefined) continue;
      row.setAttribute('data-task-type', g.task_type);
      row.setAttribute('data-error', g.error);
    }
  };
};
