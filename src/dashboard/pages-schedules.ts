/**
 * Cron schedules: the active and the paused ones (`GET /api/tasks?status=…`, a page each), their
 * next fire times and last fires, and pause / resume.
 */
import { ApiError, api, type Task, type TaskPage } from './api.js';
import { badge, h, heading, link, relative, shortId, table, when } from './dom.js';
import type { Page } from './page.js';
import { stat } from './pages-cluster.js';

const LIMIT = 100;

export const schedulesPage: Page = (el) => {
  const summary = h('div', { class: 'summary' });
  const notice = h('p', { class: 'notice bad', role: 'alert', hidden: true });
  const body = h('section', {});
  el.append(heading('Schedules', summary), notice, body);

  const toggle = (t: Task): HTMLButtonElement => {
    const verb = t.status === 'paused' ? 'resume' : 'pause';
    const button = h(
      'button',
      { type: 'button', class: 'secondary small', 'data-action': verb },
      verb === 'pause' ? 'Pause' : 'Resume',
    );
    button.addEventListener('click', () => {
      button.disabled = true;
      api(`/api/tasks/${t.task_id}/${verb}`, 'POST').then(
        () => {
          notice.hidden = true;
          button.textContent = verb === 'pause' ? 'Paused' : 'Resumed';
        },
        (error: unknown) => {
          button.disabled = false;
          notice.hidden = false;
          notice.textContent = error instanceof ApiError ? `${verb}: ${error.code}: ${error.message}` : String(error);
        },
      );
    });
    return button;
  };

  return async () => {
    const [active, paused] = await Promise.all([
      api<TaskPage>(`/api/tasks?status=active&limit=${LIMIT}`),
      api<TaskPage>(`/api/tasks?status=paused&limit=${LIMIT}`),
    ]);
    const rows = [...active.tasks, ...paused.tasks].sort(
      (a, b) => (a.next_due_time ?? '9').localeCompare(b.next_due_time ?? '9') || a.task_id.localeCompare(b.task_id),
    );
    const more = active.next_token !== null || paused.next_token !== null;
    summary.replaceChildren(stat('active', active.tasks.length), stat('paused', paused.tasks.length));
    body.replaceChildren(
      table(
        [
          { title: 'schedule', cell: (t) => link(`#/tasks/${t.task_id}`, shortId(t.task_id)) },
          { title: 'type', cell: (t) => t.task_type },
          { title: 'status', cell: (t) => badge(t.status) },
          { title: 'cron', cell: (t) => h('code', {}, t.cron_expression ?? '') },
          { title: 'zone', cell: (t) => t.timezone ?? 'UTC' },
          { title: 'next fire', cell: (t) => (t.status === 'paused' ? '—' : when(t.next_due_time)) },
          { title: 'in', num: true, cell: (t) => (t.status === 'paused' ? '—' : relative(t.next_due_time)) },
          { title: 'last fired', cell: (t) => when(t.last_fired_at) },
          { title: '', cell: (t) => toggle(t) },
        ],
        rows,
        'No cron schedules among the newest tasks.',
      ),
    );
    if (more)
      body.append(
        h(
          'p',
          { class: 'muted' },
          `Showing the first ${LIMIT} active and ${LIMIT} paused schedules found; the task list has the rest.`,
        ),
      );
  };
};
