/**
 * Activity: what happened to tasks over a time range, for one task type or all: totals per
 * outcome and charts of throughput, start lag (p99) and failure rate. Read from the history the
 * nodes keep (`GET /admin/stats`, per-minute rows flushed every 10 s; docs/api.md, "Task
 * activity"), so the charts cover the whole range whenever the page is opened, not only what
 * it sampled while open.
 */
import { api, query } from './api.js';
import { duration, h, heading, s } from './dom.js';
import { withParams, type Page } from './page.js';
import { stat } from './pages-cluster.js';

/** One step of `GET /admin/stats` (and its totals, without `at`). */
interface StatsStep {
  at: string;
  submitted: number;
  started: number;
  succeeded: number;
  failed: number;
  retried: number;
  cancelled: number;
  expired: number;
  failure_rate: number | null;
  start_lag_p50_ms: number | null;
  start_lag_p99_ms: number | null;
}

interface Stats {
  step_seconds: number;
  totals: Omit<StatsStep, 'at'>;
  series: StatsStep[];
  now: { ready: number; running: number; running_capped: boolean };
  task_types: string[];
}

/** The ranges offered, each with the step its charts are drawn in (about 60 points or fewer). */
interface Range {
  value: string;
  label: string;
  ms: number;
  stepS: number;
}
/** The range shown when the URL names none. */
const LAST_HOUR: Range = { value: '1h', label: 'last hour', ms: 3_600_000, stepS: 60 };
const RANGES: Range[] = [
  { value: '15m', label: 'last 15 minutes', ms: 15 * 60_000, stepS: 60 },
  LAST_HOUR,
  { value: '6h', label: 'last 6 hours', ms: 6 * 3_600_000, stepS: 300 },
  { value: '24h', label: 'last 24 hours', ms: 86_400_000, stepS: 1_800 },
  { value: '7d', label: 'last 7 days', ms: 7 * 86_400_000, stepS: 3 * 3_600 },
];

const TASK_TYPE = /^[A-Za-z0-9_.:-]{1,128}$/;

const W = 360;
const H = 120;
const PAD = { left: 4, right: 4, top: 14, bottom: 16 };

/** A line per series over the steps, scaled to the largest value (or `max`); null values leave a gap. */
function chart(
  name: string,
  title: string,
  steps: StatsStep[],
  series: { key: string; label: string; value: (x: StatsStep) => number | null }[],
  format: (v: number) => string,
  max?: number,
): HTMLElement {
  const values = series.flatMap((line) => steps.map(line.value)).filter((v): v is number => v !== null);
  const top = max ?? Math.max(1, ...values);
  const span = Math.max(1, steps.length - 1);
  const x = (i: number) => PAD.left + (i / span) * (W - PAD.left - PAD.right);
  const y = (v: number) => H - PAD.bottom - (Math.min(v, top) / top) * (H - PAD.top - PAD.bottom);
  const lines = series.map((line) => {
    // Runs of points with a value, each its own polyline: a gap is no data, not zero.
    const runs: [number, number][][] = [[]];
    steps.forEach((step, i) => {
      const v = line.value(step);
      if (v === null) runs.push([]);
      else runs[runs.length - 1]?.push([x(i), y(v)]);
    });
    return s(
      'g',
      { class: `line ${line.key}`, 'data-series': line.key },
      ...runs.map((run) => {
        const [only] = run;
        if (run.length === 1 && only) return s('circle', { cx: only[0].toFixed(1), cy: only[1].toFixed(1), r: 2 });
        if (run.length === 0) return null;
        return s('polyline', { points: run.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(' ') });
      }),
    );
  });
  const first = steps[0]?.at;
  const last = steps[steps.length - 1]?.at;
  const svg = s(
    'svg',
    { class: 'chart', viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': title, 'data-points': values.length },
    s('line', { class: 'axis', x1: PAD.left, x2: W - PAD.right, y1: H - PAD.bottom, y2: H - PAD.bottom }),
    s('line', { class: 'grid', x1: PAD.left, x2: W - PAD.right, y1: PAD.top, y2: PAD.top }),
    s('text', { class: 'tick', x: PAD.left, y: PAD.top - 3 }, format(top)),
    s('text', { class: 'tick', x: PAD.left, y: H - 3 }, first ? first.slice(11, 16) : ''),
    s('text', { class: 'tick', x: W - PAD.right, y: H - 3, 'text-anchor': 'end' }, last ? last.slice(11, 16) : ''),
    ...lines,
  );
  const legend = h(
    'div',
    { class: 'legend' },
    ...series.map((line) => h('span', { class: `key ${line.key}` }, line.label)),
  );
  return h('figure', { class: 'chart-box', 'data-chart': name }, h('figcaption', {}, title, legend), svg);
}

const percent = (v: number) => `${(v * 100).toFixed(v >= 0.1 || v === 0 ? 0 : 1)} %`;
const perMin = (v: number) => `${v >= 10 ? Math.round(v) : v.toFixed(1)}/min`;

export const activityPage: Page = (el, route) => {
  const range = RANGES.find((r) => r.value === route.params.get('range')) ?? LAST_HOUR;
  const wanted = route.params.get('task_type') ?? '';
  const taskType = TASK_TYPE.test(wanted) ? wanted : '';

  const now = h('div', { class: 'summary' });
  const typeSelect = h('select', { name: 'task_type', id: 'activity-task-type' }, h('option', { value: '' }, 'all'));
  const rangeSelect = h(
    'select',
    { name: 'range', id: 'activity-range' },
    ...RANGES.map((r) => h('option', { value: r.value, selected: r === range }, r.label)),
  );
  const go = (): void => {
    location.hash = withParams(route, { task_type: typeSelect.value, range: rangeSelect.value });
  };
  typeSelect.addEventListener('change', go);
  rangeSelect.addEventListener('change', go);
  const form = h(
    'form',
    { class: 'inline', id: 'activity-filter' },
    h('label', { class: 'field' }, 'task type ', typeSelect),
    h('label', { class: 'field' }, 'range ', rangeSelect),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    go();
  });
  const totals = h('div', { class: 'summary totals', id: 'activity-totals' });
  const charts = h('div', { class: 'charts' });
  el.append(
    heading('Activity', now),
    h(
      'p',
      { class: 'muted' },
      'What happened to tasks over the range, from the per-minute history every node keeps (flushed every 10 s). Retries are attempts that failed and ran again; failure rate is failed ÷ (succeeded + failed).',
    ),
    form,
    totals,
    charts,
  );

  let typesShown = '';
  return async () => {
    const toMs = Date.now();
    const stats = await api<Stats>(
      `/admin/stats${query({
        task_type: taskType,
        from: new Date(toMs - range.ms).toISOString(),
        to: new Date(toMs).toISOString(),
        step: range.stepS,
      })}`,
    );
    // The selector keeps the type asked for even when the range has no activity of it.
    const types = [...new Set([...stats.task_types, ...(taskType ? [taskType] : [])])].sort();
    if (types.join('\n') !== typesShown) {
      typesShown = types.join('\n');
      typeSelect.replaceChildren(
        h('option', { value: '' }, 'all'),
        ...types.map((t) => h('option', { value: t, selected: t === taskType }, t)),
      );
    }
    now.replaceChildren(
      stat('ready now', stats.now.ready.toLocaleString('en')),
      stat('running now', `${stats.now.running.toLocaleString('en')}${stats.now.running_capped ? '+' : ''}`),
    );
    const t = stats.totals;
    const total = (key: string, label: string, value: string | number) => {
      const card = stat(label, typeof value === 'number' ? value.toLocaleString('en') : value);
      card.dataset.total = key;
      return card;
    };
    totals.replaceChildren(
      total('submitted', 'submitted', t.submitted),
      total('started', 'started', t.started),
      total('succeeded', 'succeeded', t.succeeded),
      total('failed', 'failed', t.failed),
      total('retried', 'retried', t.retried),
      total('cancelled', 'cancelled', t.cancelled),
      total('expired', 'expired', t.expired),
      total('failure_rate', 'failure rate', t.failure_rate === null ? '—' : percent(t.failure_rate)),
      total('start_lag_p50_ms', 'start lag p50', duration(t.start_lag_p50_ms)),
      total('start_lag_p99_ms', 'start lag p99', duration(t.start_lag_p99_ms)),
    );
    const minutes = stats.step_seconds / 60;
    const steps = stats.series;
    charts.replaceChildren(
      chart(
        'throughput',
        'Throughput',
        steps,
        [
          { key: 'started', label: 'started', value: (x) => x.started / minutes },
          { key: 'succeeded', label: 'succeeded', value: (x) => x.succeeded / minutes },
          { key: 'failed', label: 'failed', value: (x) => x.failed / minutes },
        ],
        perMin,
      ),
      chart(
        'start-lag',
        'Start lag (due → start)',
        steps,
        [
          { key: 'p99', label: 'p99', value: (x) => x.start_lag_p99_ms },
          { key: 'p50', label: 'p50', value: (x) => x.start_lag_p50_ms },
        ],
        (v) => duration(v),
      ),
      chart(
        'failure-rate',
        'Failure rate',
        steps,
        [{ key: 'failed', label: 'failed ÷ ended', value: (x) => x.failure_rate }],
        percent,
        Math.max(0.05, ...steps.map((x) => x.failure_rate ?? 0)),
      ),
    );
  };
};
