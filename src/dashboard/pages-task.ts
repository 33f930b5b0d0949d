/**
 * One task: its status, where it is and what it waits for (`GET /api/tasks/{id}/explain`), its
 * progress and result, its executions, and the buttons that act on it (cancel, retry, pause and
 * resume a schedule). A node without the explain route says so in its place.
 */
import { ApiError, api, type Execution, type Explain, type Task } from './api.js';
import { badge, confirmButton, duration, h, heading, json, link, relative, shortId, table, when } from './dom.js';
import { idFromHash, type Page } from './page.js';

const OPEN_STATUSES = new Set(['blocked', 'pending', 'ready', 'running', 'active', 'paused']);

/** The explanation, or why there is none: it never stops the rest of the page. */
async function explain(id: string): Promise<Explain | string> {
  try {
    return await api<Explain>(`/api/tasks/${id}/explain`);
  } catch (error) {
    if (error instanceof ApiError && error.code === 'route_not_found')
      return 'explain unavailable (this node has no explain route)';
    if (error instanceof ApiError) return `explain unavailable: ${error.message}`;
    throw error;
  }
}

export const taskPage: Page = (el, route) => {
  const hashId = route.parts[1] ?? '';
  const title = heading('Task');
  const actions = title.querySelector('.actions') as HTMLElement;
  const sentence = h('p', { class: 'explain', id: 'explain' });
  const facts = h('section', { class: 'facts' });
  const outputs = h('section', { class: 'outputs' });
  const history = h('section', {});
  const message = h('p', { class: 'notice', role: 'status', hidden: true });
  el.append(title, message, sentence, facts, outputs, history);

  let shownButtons = '';
  const act = (label: string, method: string, path: string, kind?: string) =>
    confirmButton(
      label,
      async () => {
        try {
          await api(path, method);
          message.hidden = false;
          message.className = 'notice';
          message.textContent = `${label}: done.`;
        } catch (error) {
          message.hidden = false;
          message.className = 'notice bad';
          message.textContent = error instanceof ApiError ? `${label}: ${error.code}: ${error.message}` : String(error);
        }
      },
      kind,
    );

  return async () => {
    const id = idFromHash(hashId, 'task');
    const [task, runs, why] = await Promise.all([
      api<Task>(`/api/tasks/${id}`),
      api<{ executions: Execution[] }>(`/api/tasks/${id}/history?limit=20`),
      explain(id),
    ]);
    const h1 = title.querySelector('h1') as HTMLElement;
    h1.replaceChildren('Task ', h('code', {}, task.task_id), ' ', badge(task.status));

    // The buttons are rebuilt only when what applies changes, so one armed for a second click stays armed.
    const isSchedule = task.schedule_type === 'cron' && (task.status === 'active' || task.status === 'paused');
    const buttons = [
      isSchedule && task.status === 'active' ? 'pause' : '',
      isSchedule && task.status === 'paused' ? 'resume' : '',
      task.status === 'failed' || task.status === 'cancelled' || task.status === 'expired' ? 'retry' : '',
      OPEN_STATUSES.has(task.status) && !task.cancel_requested ? 'cancel' : '',
    ].filter(Boolean);
    if (buttons.join() !== shownButtons) {
      shownButtons = buttons.join();
      actions.replaceChildren(
        ...buttons.map((b) =>
          b === 'cancel'
            ? act(isSchedule ? 'Delete schedule' : 'Cancel', 'DELETE', `/api/tasks/${id}`)
            : act(
                b === 'pause' ? 'Pause' : b === 'resume' ? 'Resume' : 'Retry',
                'POST',
                `/api/tasks/${id}/${b}`,
                'secondary',
              ),
        ),
      );
    }

    if (typeof why === 'string') {
      sentence.className = 'explain muted';
      sentence.textContent = why;
    } else {
      sentence.className = `explain st-${why.state}`;
      sentence.replaceChildren(h('strong', {}, why.state.replace('_', ' ')), ' · ', why.sentence);
    }

    const row = (label: string, value: Node | string | number | null | undefined): HTMLElement[] => [
      h('dt', {}, label),
      h('dd', {}, value ?? '—'),
    ];
    facts.replaceChildren(
      h(
        'dl',
        {},
        ...row('type', h('code', {}, task.task_type)),
        ...row(
          'schedule',
          task.cron_expression
            ? `${task.schedule_type} · ${task.cron_expression} (${task.timezone ?? 'UTC'})`
            : task.schedule_type,
        ),
        ...row(
          'due',
          h('span', {}, when(task.due_time), h('span', { class: 'muted' }, ` · ${relative(task.due_time)}`)),
        ),
        ...(task.next_due_time !== undefined ? row('next fire', when(task.next_due_time)) : []),
        ...(task.last_fired_at !== undefined ? row('last fired', when(task.last_fired_at)) : []),
        ...row('created', when(task.created_at)),
        ...row('started', when(task.started_at)),
        ...row('completed', when(task.completed_at)),
        ...row('attempts', `${task.attempts} of ${task.max_retries + 1}`),
        ...row('priority', task.priority),
        ...row('timeout', duration(task.timeout_seconds * 1000)),
        ...(task.cancel_requested ? row('cancel', 'requested: the worker is told on its next heartbeat') : []),
        ...(task.dag_id
          ? row('graph', link(`#/dags/${task.dag_id}`, shortId(task.dag_id), ` · ${task.ref ?? ''}`))
          : []),
        ...(task.schedule_id ? row('schedule', link(`#/tasks/${task.schedule_id}`, shortId(task.schedule_id))) : []),
        ...(task.dependencies.length > 0
          ? row(
              `dependencies (${task.dependencies_satisfied ?? 0}/${task.dependencies.length} done)`,
              h('span', {}, ...task.dependencies.flatMap((d) => [link(`#/tasks/${d}`, shortId(d)), ' '])),
            )
          : []),
        ...(task.last_error ? row('last error', h('span', { class: 'error-text' }, task.last_error)) : []),
      ),
    );
    outputs.replaceChildren(
      h(
        'div',
        {},
        h(
          'h2',
          {},
          'Progress',
          h('span', { class: 'muted' }, task.progress_at ? ` · ${relative(task.progress_at)}` : ''),
        ),
        json(task.progress),
      ),
      h('div', {}, h('h2', {}, 'Result'), json(task.result)),
      h('div', {}, h('h2', {}, 'Payload'), json(task.payload)),
    );
    history.replaceChildren(
      h('h2', {}, 'History'),
      table(
        [
          { title: 'attempt', num: true, cell: (e) => e.attempt },
          { title: 'status', cell: (e) => badge(e.status) },
          { title: 'worker', cell: (e) => e.worker_id ?? '—' },
          { title: 'started', cell: (e) => when(e.started_at) },
          {
            title: 'took',
            num: true,
            cell: (e) =>
              e.started_at && e.completed_at ? duration(Date.parse(e.completed_at) - Date.parse(e.started_at)) : '—',
          },
          { title: 'error', cell: (e) => (e.error ? h('span', { class: 'error-text' }, e.error) : '—') },
        ],
        runs.executions,
        'No executions yet.',
      ),
    );
  };
};
