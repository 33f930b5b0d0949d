import type { Machine } from './machine.js';
import { median } from './stats.js';
import type { Bar, MetricSpec, RunFigures, Workload } from './workload.js';

/** The benchmark's results as a console table and as docs/benchmarks.md. */

export type RunOutcome = RunFigures | { error: string };

export interface WorkloadReport {
  workload: Workload;
  runs: RunOutcome[];
}

export interface ReportMeta {
  machine: Machine;
  stores: { postgres: string; redis: string };
  command: string;
  quick: boolean;
  workers: number;
  pollers: number;
  durationS: number;
}

const HEADERS = ['workload', 'metric', 'bar', 'median', 'runs', 'meets bar'];

export function rows(reports: WorkloadReport[]): string[][] {
  const out: string[][] = [];
  for (const { workload, runs } of reports) {
    for (const metric of workload.metrics) {
      const values = runs.map((r) => ('values' in r ? (r.values[metric.key] ?? Number.NaN) : Number.NaN));
      const mid = median(values);
      out.push([
        `${workload.id} ${workload.title}`,
        `${metric.label} (${metric.unit})`,
        metric.bar ? barText(metric.bar, metric) : '',
        fmt(mid, metric.digits),
        values.map((v) => fmt(v, metric.digits)).join(' / '),
        metric.bar ? (meets(mid, metric.bar) ? 'yes' : 'NO') : '',
      ]);
    }
    const verified = runs.map((r) => ('values' in r ? (r.verified ? 'ok' : 'MISMATCH') : 'error'));
    out.push([`${workload.id} ${workload.title}`, 'all tasks succeeded (Postgres)', '', '', verified.join(' / '), '']);
  }
  return out;
}

export function consoleTable(reports: WorkloadReport[]): string {
  const body = rows(reports);
  const widths = HEADERS.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => c.padEnd(widths[i] as number))
      .join('  ')
      .trimEnd();
  return [line(HEADERS), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

export function notesText(reports: WorkloadReport[]): string[] {
  const out: string[] = [];
  for (const { workload, runs } of reports) {
    runs.forEach((r, i) => {
      const notes = 'error' in r ? [`FAILED: ${r.error}`] : r.notes;
      for (const n of notes) out.push(`${workload.id} run ${i + 1}: ${n}`);
    });
  }
  return out;
}

export function markdown(reports: WorkloadReport[], meta: ReportMeta): string {
  const m = meta.machine;
  const table = [
    `| ${HEADERS.join(' | ')} |`,
    `|${HEADERS.map(() => '---').join('|')}|`,
    ...rows(reports).map((r) => `| ${r.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`),
  ];
  const notes = notesText(reports);
  return [
    '# Benchmarks',
    '',
    `Written by \`npm run bench\` (bench/run.ts) on ${m.date}${meta.quick ? ' — **quick mode: smoke-test counts, not the real figures**' : ''}.`,
    'Run it again with `npm run bench` (Postgres and Redis on 127.0.0.1; see `npm run bench -- --help`).',
    'Where the time goes, with profiles: `docs/performance.md` (written by hand, not by the bench).',
    '',
    '## Machine',
    '',
    `- CPU: ${m.cpuModel}, ${m.cores} cores`,
    `- Memory: ${m.memoryGiB} GiB`,
    `- OS: ${m.os}`,
    `- Load average (1 min) when the run started: ${m.loadAvg1m}${m.loadAvg1m > m.cores * 0.5 ? ` — **the machine was busy with other work (${m.cores} cores); the figures are pessimistic**` : ''}`,
    `- Node ${m.node}, PostgreSQL ${meta.stores.postgres}, Redis ${meta.stores.redis}`,
    `- Everything on this one machine: one Wheelhouse node (\`wheelhouse node\`, Postgres + Redis backend, built-in executors off), ` +
      `${meta.workers} worker process(es) using the TypeScript SDK over HTTP (${meta.pollers} poller(s) each), the harness, Postgres and Redis.`,
    `- Command: \`${meta.command}\` (${meta.durationS.toFixed(0)} s in all)`,
    '',
    '## Results',
    '',
    'Median of the runs, then each run\'s figure. "Meets bar" compares the median with the bar.',
    '',
    ...table,
    '',
    ...(notes.length > 0 ? ['### Notes', '', ...notes.map((n) => `- ${n}`), ''] : []),
    '## What is measured',
    '',
    '- Each run of each workload starts a fresh node process with its own Postgres schema and Redis key prefix, removed afterwards.',
    "- Node max RSS: the node process's resident memory sampled every 200 ms during the workload, the largest sample.",
    ...reports.flatMap((r) => r.workload.definitions.map((d) => `- ${d}`)),
    '',
  ].join('\n');
}

function barText(bar: Bar, metric: MetricSpec): string {
  const value = `${bar.op === '>=' ? '≥' : '≤'} ${fmt(bar.value, metric.digits === 0 ? 0 : 1)}${metric.unit === '/s' ? '/s' : ` ${metric.unit}`}`;
  return bar.reference ? `${value} (${bar.reference})` : value;
}

function meets(value: number, bar: Bar): boolean {
  if (!Number.isFinite(value)) return false;
  return bar.op === '>=' ? value >= bar.value : value <= bar.value;
}

function fmt(value: number, digits: number): string {
  if (!Number.isFinite(value)) return '—';
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}
