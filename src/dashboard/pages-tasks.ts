/**
 * Task search: open one by id, or list them newest first through `GET /api/tasks` with its
 * filters, a page of 50 at a time (the list route bounds what a page walks; nothing here scans).
 * Without a status filter a page shows what an operator looks for first at its top (running,
 * failed, ready), and tasks due later (cron instances due in days) at its bottom. The selection
 * bar acts on every task the filter matches, through an operation (src/dashboard/operation.ts).
 */
import { api, query, whoAmI, type Task, type TaskPage } from './api.js';
import { badge, errorCell, h, heading, link, relative, shortId, table, when } from './dom.js';
import { OperationPanel } from './operation.js';
import { UUID, withParams, type Page } from './page.js';

const STATUSES = [
  '',
  'blocked',
  'pending',
  'ready',
  'running',
  'succeeded',
  'failed',
  'cancelled',
  'expired',
  'active',
  'paused',
  'waiting',
];
const PAGE = 50;

/** Where a task goes within an unfiltered page: lower first, then newest first. */
function rank(t: Task, nowMs: number): number {
  if (t.status === 'running') return 0;
  if (t.status === 'failed' || t.status === 'expired') return 1;
  if (t.status === 'ready') return 2;
  if (t.status === 'pending') return t.due_time !== null && Date.parse(t.due_time) <= nowMs ? 2 : 6;
  if (t.status === 'waiting' || t.status === 'blocked') return 3;
  if (t.status === 'active' || t.status === 'paused') return 5;
  return 4;
}

/** The actions an operation takes on tasks of the list's status (src/domain/operations.ts), and the filter that matches it. */
function operationsFor(status: string): {
  actions: ('cancel' | 'retry' | 'delete')[];
  filter: () => Record<string, string>;
} {
  const now = (): string => new Date().toISOString();
  switch (status) {
    case '':
      return { actions: ['cancel', 'retry', 'delete'], filter: () => ({}) };
    // `ready` and `pending` are pending tasks due by now, or later: the operation takes the due time.
    case 'ready':
      return { actions: ['cancel'], filter: () => ({ status: 'pending', due_before: now() }) };
    case 'pending':
      return { actions: ['cancel'], filter: () => ({ status: 'pending', due_after: now() }) };
    case 'blocked':
    case 'running':
    case 'waiting':
      return { actions: ['cancel'], filter: () => ({ status }) };
    case 'failed':
    case 'cancelled':
    case 'expired':
      return { actions: ['retry', 'delete'], filter: () => ({ status }) };
    case 'succeeded':
      return { actions: ['delete'], filter: () => ({ status }) };
    default:
      return { actions: [], filter: () => ({}) };
  }
}

/**
 * "Cancel all / Retry all / Delete all matching" for the list's filter: only the actions that
 * apply to its status, only those the viewer's key opens (`delete` needs admin: shown disabled,
 * saying so). A filter of nothing at all is not one an operation takes.
 */
async function selectionBar(bar: HTMLElement, panel: OperationPanel, status: string, taskType: string): Promise<void> {
  const me = await whoAmI();
  const can = (scope: string): boolean => me.scopes.includes(scope);
  const { actions, filter } = operationsFor(status);
  if (!(can('submit') || can('admin')) || actions.length === 0) return;
  if (status === '' && taskType === '') {
    bar.replaceChildren(
      h('span', { class: 'muted' }, 'Filter by status or task type to act on every task that matches.'),
    );
    return;
  }
  const label = { cancel: 'Cancel all matching', retry: 'Retry all matching', delete: 'Delete all matching' };
  bar.replaceChildren(
    h('span', { class: 'muted' }, 'Every task the filter matches, not only this page:'),
    ...actions.map((action) => {
      const allowed = action !== 'delete' || can('admin');
      const button = h(
        'button',
        {
          type: 'button',
          class: action === 'retry' ? 'secondary' : 'danger',
          'data-action': action,
          disabled: !allowed,
          title: allowed ? null : 'Deleting tasks needs a key with the admin scope.',
        },
        label[action],
      );
      button.addEventListener('click', () =>
        panel.ask(action, { ...filter(), ...(taskType === '' ? {} : { task_type: taskType }) }),
      );
      return button;
    }),
  );
}

export const tasksPage: Page = (el, route) => {
  const status = route.params.get('status') ?? '';
  const taskType = route.params.get('task_type') ?? '';
  const token = route.params.get('page') ?? '';

  const idInput = h('input', { name: 'task_id', placeholder: 'task id (a UUID)', size: 38, spellcheck: 'false' });
  const idForm = h('form', { class: 'inline', id: 'find-task' }, idInput, h('button', { type: 'submit' }, 'Open'));
  const idProblem = h('span', { class: 'problem-inline', hidden: true }, 'That is not a task id.');
  idForm.append(idProblem);
  idForm.addEventListener('submit', (event) => {
    event.preventDefault();
    const id = idInput.value.trim().toLowerCase();
    idProblem.hidden = UUID.test(id);
    if (UUID.test(id)) location.hash = `#/tasks/${id}`;
  });

  const statusSelect = h(
    'select',
    { name: 'status' },
    ...STATUSES.map((st) => h('option', { value: st, selected: st === status }, st || 'any status')),
  );
  const typeInput = h('input', { name: 'task_type', placeholder: 'task type', value: taskType, spellcheck: 'false' });
  const filters = h(
    'form',
    { class: 'inline', id: 'filter-tasks' },
    statusSelect,
    typeInput,
    h('button', { type: 'submit' }, 'Filter'),
  );
  filters.addEventListener('submit', (event) => {
    event.preventDefault();
    location.hash = withParams(route, { status: statusSelect.value, task_type: typeInput.value.trim() });
  });

  const list = h('section', { class: 'list table-wrap' });
  const pager = h('div', { class: 'pager' });
  const bar = h('div', { class: 'selection-bar', id: 'selection-bar' });
  const panel = new OperationPanel();
  el.append(heading('Tasks'), h('div', { class: 'toolbar' }, idForm, filters), bar, panel.el, list, pager);
  let barShown = false;

  return async () => {
    if (!barShown) {
      await selectionBar(bar, panel, status, taskType);
      barShown = true;
    }
    const page = await api<TaskPage>(
      `/api/tasks${query({ status, task_type: taskType, limit: PAGE, next_token: token })}`,
    );
    const nowMs = Date.now();
    const tasks =
      status === ''
        ? page.tasks
            .map((t, i) => ({ t, i }))
            .sort((a, b) => rank(a.t, nowMs) - rank(b.t, nowMs) || a.i - b.i)
            .map((x) => x.t)
        : page.tasks;
    list.replaceChildren(
      table(
        [
          { title: 'task', cell: (t) => link(`#/tasks/${t.task_id}`, shortId(t.task_id)) },
          { title: 'type', cell: (t) => t.task_type },
          { title: 'status', cell: (t) => badge(t.status) },
          { title: 'schedule', cell: (t) => t.schedule_type },
          { title: 'due', cell: (t) => h('span', { title: t.due_time ?? '' }, relative(t.due_time)) },
          { title: 'created', cell: (t) => when(t.created_at) },
          { title: 'attempts', num: true, cell: (t) => `${t.attempts}/${t.max_retries + 1}` },
          { title: 'priority', num: true, cell: (t) => t.priority },
          { title: 'last error', cell: (t) => errorCell(t.last_error) },
        ],
        tasks,
        status || taskType ? 'No tasks match on this page.' : 'No tasks yet.',
      ),
    );
    pager.replaceChildren(
      token ? link(withParams(route, { status, task_type: taskType }), '« first page') : h('span', {}),
      page.next_token
        ? link(withParams(route, { status, task_type: taskType, page: page.next_token }), 'next page »')
        : h('span', { class: 'muted' }, page.tasks.length > 0 ? 'last page' : ''),
    );
  };
};
