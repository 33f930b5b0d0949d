/**
 * The ready queues: depth and oldest age per task type and priority, now and over the last
 * minutes. The node keeps no history of them: the page samples `GET /admin/queues` on each poll
 * (kept while the tab is open, across pages) and draws each queue's depth and oldest age.
 */
import { api, type QueueRow } from './api.js';
import { duration, h, heading, link, s, table } from './dom.js';
import type { Page } from './page.js';
import { stat } from './pages-cluster.js';

const WINDOW_MS = 5 * 60_000;

interface Sample {
  atMs: number;
  depth: number;
  ageMs: number;
}

/** Samples by queue (`type|priority`), oldest first, within WINDOW_MS. */
const samples = new Map<string, Sample[]>();

function record(rows: QueueRow[], atMs: number): void {
  const seen = new Set<string>();
  for (const row of rows) {
    const key = `${row.task_type}|${row.priority}`;
    seen.add(key);
    const list = samples.get(key) ?? [];
    list.push({ atMs, depth: row.depth, ageMs: row.oldest_ready_age_ms ?? 0 });
    samples.set(key, list);
  }
  // A queue that emptied is not listed: it is at zero now.
  for (const [key, list] of samples) if (!seen.has(key)) list.push({ atMs, depth: 0, ageMs: 0 });
  for (const [key, list] of samples) {
    while (list.length > 0 && (list[0] as Sample).atMs < atMs - WINDOW_MS) list.shift();
    if (list.every((x) => x.depth === 0)) samples.delete(key);
  }
}

/**
 * A small line of a queue's samples, scaled to its own maximum, over the window (or over the
 * time since the first sample while the page has been open for less).
 */
function sparkline(list: Sample[], pick: (x: Sample) => number, nowMs: number): SVGSVGElement {
  const w = 120;
  const hgt = 24;
  const max = Math.max(1, ...list.map(pick));
  const spanMs = Math.max(1, Math.min(WINDOW_MS, nowMs - (list[0]?.atMs ?? nowMs)));
  const points = list
    .map((x) => {
      const px = w - ((nowMs - x.atMs) / spanMs) * w;
      const py = hgt - 2 - (pick(x) / max) * (hgt - 4);
      return `${px.toFixed(1)},${py.toFixed(1)}`;
    })
    .join(' ');
  return s(
    'svg',
    { class: 'spark', width: w, height: hgt, viewBox: `0 0 ${w} ${hgt}`, 'aria-hidden': 'true' },
    s('polyline', { points, fill: 'none' }),
  );
}

/** Change of depth per minute over the samples (positive: the queue grows faster than it drains). */
function trend(list: Sample[]): string {
  const first = list[0];
  const last = list[list.length - 1];
  if (!first || !last || last.atMs - first.atMs < 5000) return '—';
  const perMin = ((last.depth - first.depth) / (last.atMs - first.atMs)) * 60_000;
  return `${perMin > 0 ? '+' : ''}${perMin.toFixed(perMin === 0 || Math.abs(perMin) >= 10 ? 0 : 1)}/min`;
}

export const queuesPage: Page = (el) => {
  const summary = h('div', { class: 'summary' });
  const body = h('section', {});
  el.append(
    heading('Queues', summary),
    h(
      'p',
      { class: 'muted' },
      'Ready tasks waiting for a worker, by task type and priority. The lines show up to the last 5 minutes, sampled by this page while it is open.',
    ),
    body,
  );
  return async () => {
    const { queues } = await api<{ queues: QueueRow[] }>('/admin/queues');
    const nowMs = Date.now();
    record(queues, nowMs);
    const total = queues.reduce((n, q) => n + q.depth, 0);
    const oldest = Math.max(0, ...queues.map((q) => q.oldest_ready_age_ms ?? 0));
    summary.replaceChildren(
      stat('ready tasks', total),
      stat('queues', queues.length),
      stat('oldest wait', duration(oldest)),
    );
    const rows = [...queues].sort((a, b) => a.task_type.localeCompare(b.task_type) || a.priority - b.priority);
    const history = (q: QueueRow): Sample[] => samples.get(`${q.task_type}|${q.priority}`) ?? [];
    body.replaceChildren(
      table(
        [
          {
            title: 'task type',
            cell: (q) => link(`#/tasks?task_type=${encodeURIComponent(q.task_type)}`, q.task_type),
          },
          { title: 'priority', num: true, cell: (q) => q.priority },
          { title: 'depth', num: true, cell: (q) => q.depth.toLocaleString('en') },
          { title: 'depth over time', cell: (q) => sparkline(history(q), (x) => x.depth, nowMs) },
          { title: 'trend', num: true, cell: (q) => trend(history(q)) },
          { title: 'oldest wait', num: true, cell: (q) => duration(q.oldest_ready_age_ms) },
          { title: 'oldest wait over time', cell: (q) => sparkline(history(q), (x) => x.ageMs, nowMs) },
        ],
        rows,
        'No ready tasks: every due task has a worker.',
      ),
    );
  };
};
