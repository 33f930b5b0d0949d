/**
 * Task search: open one by id, or list them newest first through `GET /api/tasks` with its
 * filters, a page of 50 at a time (the list route bounds what a page walks; nothing here scans).
 */
import { api, query, type TaskPage } from './api.js';
import { badge, h, heading, link, relative, shortId, table, when } from './dom.js';
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

  const list = h('section', { class: 'list' });
  const pager = h('div', { class: 'pager' });
  el.append(heading('Tasks'), h('div', { class: 'toolbar' }, idForm, filters), list, pager);

  return async () => {
    const page = await api<TaskPage>(
      `/api/tasks${query({ status, task_type: taskType, limit: PAGE, next_token: token })}`,
    );
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
        ],
        page.tasks,
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
