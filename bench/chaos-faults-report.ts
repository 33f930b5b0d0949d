/**
 * What `npm run chaos -- --faults` reads off a run (bench/chaos-faults.ts), its table, and its
 * section of docs/benchmarks.md (between the chaos-faults markers, with --write).
 */
import type { TaskRuns } from './chaos-analysis.js';
import { fmtS, replaceSection } from './chaos-report.js';
import { percentiles, spaced } from './stats.js';

/** A fault as it happened: from the moment it was started to the moment it was over. */
export interface FaultWindow {
  name: string;
  fromMs: number;
  toMs: number;
  detail: string;
}

export interface SubmitAnswer {
  atMs: number;
  /** 0: no answer (a connection error). */
  status: number;
  retryAfter: string | null;
}

/** A task the dropping worker took and never reported. */
export interface DroppedClaim {
  taskId: string;
  claimMs: number;
  attempt: number;
}

/** Tasks due further than this from any fault are held to the start-lag bar. */
export const AWAY_FROM_FAULT_MS = 6_000;
/** The bars of issue 11. */
export const BAR_AWAY_LAG_MS = 2_000;
export const BAR_HAND_ON_EXTRA_MS = 2_000;

export interface FaultRun {
  tasks: number;
  leaseMs: number;
  lost: number;
  /** Tasks an honest worker ran more than once. */
  ranTwice: number;
  dropped: number;
  /** Dropped claim → the task's next start, ms: the largest, and how many took longer than lease + 2 s. */
  handOnMaxMs: number;
  handOnOverBar: number;
  /** The same for the dropped leases that ran out more than 6 s from any fault. */
  handOnAway: number;
  handOnAwayMaxMs: number;
  /** Start − due of tasks due more than 6 s from any fault: how many, the largest. */
  away: number;
  awayMaxMs: number;
  lagP50Ms: number;
  lagP99Ms: number;
  lagMaxMs: number;
  /** Started more than 50 ms before their due time. */
  early: number;
  submits: { ok: number; unavailable: number; backlog: number; other: number };
  recovered: Record<string, number>;
  dutyFailures: Record<string, number>;
  notes: string[];
}

export function analyseFaultRun(input: {
  created: { taskId: string; dueMs: number }[];
  answers: SubmitAnswer[];
  windows: FaultWindow[];
  dropped: DroppedClaim[];
  runs: Map<string, TaskRuns>;
  statuses: Map<string, { status: string; attempts: number }>;
  metrics: string;
  leaseMs: number;
  startedMs: number;
}): FaultRun {
  const { created, windows, runs, statuses, leaseMs } = input;
  const lostTasks = created.filter((t) => statuses.get(t.taskId)?.status !== 'succeeded');
  const twice = [...runs.values()].filter((r) => r.runs > 1);
  const droppedFirst = new Map<string, DroppedClaim>();
  for (const d of input.dropped) if (!droppedFirst.has(d.taskId)) droppedFirst.set(d.taskId, d);
  const handOn = [...droppedFirst.values()].map((d) => ({
    d,
    ms: (runs.get(d.taskId)?.firstMs ?? Number.POSITIVE_INFINITY) - d.claimMs,
  }));
  const overBar = handOn.filter((h) => h.ms > leaseMs + BAR_HAND_ON_EXTRA_MS);
  const handOnAway = handOn.filter((h) =>
    windows.every((w) => distance(h.d.claimMs + leaseMs, w) > AWAY_FROM_FAULT_MS),
  );
  const nearest = (atMs: number): string => {
    const w = [...windows].sort((a, b) => distance(atMs, a) - distance(atMs, b))[0];
    return w === undefined ? 'no fault' : `${w.name} ${signedS(atMs - w.fromMs)} from its start`;
  };

  const lags: number[] = [];
  const awayLags: { taskId: string; lag: number; dueMs: number }[] = [];
  let nearMaxMs = Number.NEGATIVE_INFINITY;
  let early = 0;
  for (const t of created) {
    const run = runs.get(t.taskId);
    if (run === undefined || droppedFirst.has(t.taskId)) continue;
    const lag = run.firstMs - t.dueMs;
    lags.push(lag);
    if (lag < -50) early++;
    if (windows.every((w) => distance(t.dueMs, w) > AWAY_FROM_FAULT_MS))
      awayLags.push({ taskId: t.taskId, lag, dueMs: t.dueMs });
    else nearMaxMs = Math.max(nearMaxMs, lag);
  }
  const [p50, p99, max] = percentiles(lags, [50, 99, 100]) as [number, number, number];
  const worstAway = awayLags.reduce<(typeof awayLags)[number] | undefined>(
    (w, x) => (w === undefined || x.lag > w.lag ? x : w),
    undefined,
  );

  const submits = { ok: 0, unavailable: 0, backlog: 0, other: 0 };
  for (const a of input.answers) {
    if (a.status === 200 || a.status === 201) submits.ok++;
    else if (a.status === 503 && a.retryAfter !== null) submits.unavailable++;
    else if (a.status === 429 && a.retryAfter !== null) submits.backlog++;
    else submits.other++;
  }

  const rel = (ms: number): string => `+${((ms - input.startedMs) / 1000).toFixed(1)} s`;
  const notes = [
    `faults: ${windows.map((w) => `${w.name} at ${rel(w.fromMs)} (${w.detail})`).join('; ')}`,
    `clock: the node's own clock ran 3 s ahead; it read the database's with an offset of ${metricSum(input.metrics, 'wheelhouse_clock_offset_seconds').toFixed(3)} s`,
    `wheel partitions rebuilt in full from Postgres: ${metricSum(input.metrics, 'wheelhouse_partition_rebuilds_total')} (the first start rebuilds every partition once); tasks requeued ${metricSum(input.metrics, 'wheelhouse_tasks_requeued_total')}`,
  ];
  if (lostTasks.length > 0)
    notes.push(
      `LOST: ${lostTasks
        .slice(0, 10)
        .map((t) => `${t.taskId} ${statuses.get(t.taskId)?.status ?? 'absent'}`)
        .join(', ')}`,
    );
  if (twice.length > 0)
    notes.push(
      `RAN TWICE on honest workers: ${twice
        .slice(0, 10)
        .map((r) => `${r.taskId} attempts ${r.attempts.join(',')}`)
        .join('; ')}`,
    );
  for (const h of overBar.slice(0, 10))
    notes.push(
      `dropped lease handed on after ${fmtS(h.ms)} (claimed at ${rel(h.d.claimMs)}, nearest fault: ${nearest(h.d.claimMs + leaseMs)})`,
    );
  if (worstAway !== undefined)
    notes.push(
      `worst start lag away from faults: ${fmtS(worstAway.lag)}, due at ${rel(worstAway.dueMs)} (nearest fault: ${nearest(worstAway.dueMs)})`,
    );
  notes.push(`start lag of tasks due within ${AWAY_FROM_FAULT_MS / 1000} s of a fault: max ${fmtS(nearMaxMs)}`);
  return {
    tasks: created.length,
    leaseMs,
    lost: lostTasks.length,
    ranTwice: twice.length,
    dropped: droppedFirst.size,
    handOnMaxMs: Math.max(...handOn.map((h) => h.ms), Number.NEGATIVE_INFINITY),
    handOnOverBar: overBar.length,
    handOnAway: handOnAway.length,
    handOnAwayMaxMs: Math.max(...handOnAway.map((h) => h.ms), Number.NEGATIVE_INFINITY),
    away: awayLags.length,
    awayMaxMs: worstAway?.lag ?? Number.NaN,
    lagP50Ms: p50,
    lagP99Ms: p99,
    lagMaxMs: max,
    early,
    submits,
    recovered: byLabel(input.metrics, 'wheelhouse_safety_net_recovered_total', 'kind'),
    dutyFailures: byLabel(input.metrics, 'wheelhouse_duty_failures_total', 'duty'),
    notes,
  };
}

function distance(atMs: number, w: FaultWindow): number {
  if (atMs < w.fromMs) return w.fromMs - atMs;
  if (atMs > w.toMs) return atMs - w.toMs;
  return 0;
}

function signedS(ms: number): string {
  return `${ms < 0 ? '−' : '+'}${fmtS(Math.abs(ms))}`;
}

/** The sum of a metric's series in Prometheus text. */
function metricSum(text: string, name: string): number {
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})?\\s+(\\S+)$`, 'gm'))) sum += Number(m[1]);
  return sum;
}

/** A metric's series by one label's value. */
function byLabel(text: string, name: string, label: string): Record<string, number> {
  const out: Record<string, number> = {};
  const re = new RegExp(`^${name}\\{[^}]*${label}="([^"]*)"[^}]*\\}\\s+(\\S+)$`, 'gm');
  for (const m of text.matchAll(re)) out[m[1]!] = (out[m[1]!] ?? 0) + Number(m[2]);
  return out;
}

export const FAULT_HEADERS = [
  'run',
  'tasks',
  'lost',
  'run twice (honest)',
  'dropped leases: handed on after, max (all; expiring ≥ 6 s from a fault)',
  'due ≥ 6 s from a fault: start lag max',
  'start lag p50 / p99 / max',
  'submits: 2xx / 503+RA / other',
  'safety nets',
];

export function faultRows(runs: (FaultRun | { error: string })[]): string[][] {
  return runs.map((r, i) => {
    if ('error' in r) return [`faults ${i + 1}`, 'FAILED', '', '', '', '', '', '', r.error.slice(0, 80)];
    const nets =
      Object.entries(r.recovered)
        .map(([k, n]) => `${k} ${n}`)
        .join(', ') || 'all 0';
    return [
      `faults ${i + 1}`,
      spaced(r.tasks),
      String(r.lost),
      String(r.ranTwice),
      `${fmtS(r.handOnMaxMs)} over ${r.dropped} (${r.handOnOverBar} past lease + 2 s); ${fmtS(r.handOnAwayMaxMs)} over ${r.handOnAway} ${r.handOnAwayMaxMs <= r.leaseMs + BAR_HAND_ON_EXTRA_MS ? 'meets' : 'MISSES'} ≤ lease + 2 s`,
      `${fmtS(r.awayMaxMs)} over ${spaced(r.away)} ${r.awayMaxMs <= BAR_AWAY_LAG_MS ? 'meets' : 'MISSES'} ≤ 2 s`,
      `${fmtS(r.lagP50Ms)} / ${fmtS(r.lagP99Ms)} / ${fmtS(r.lagMaxMs)}${r.early > 0 ? `; ${r.early} EARLY` : ''}`,
      `${spaced(r.submits.ok)} / ${r.submits.unavailable} / ${r.submits.other + r.submits.backlog}`,
      nets,
    ];
  });
}

export function faultTable(runs: (FaultRun | { error: string })[]): string {
  const body = faultRows(runs);
  const widths = FAULT_HEADERS.map((h, i) => Math.max(h.length, ...body.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string =>
    cells
      .map((c, i) => c.padEnd(widths[i] as number))
      .join('  ')
      .trimEnd();
  return [line(FAULT_HEADERS), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

/** How the figures of the section are defined (written with them). */
const MEASURED = [
  "One `wheelhouse node` on this machine's Postgres and Redis, started with `--test-clock-offset-seconds 3` (its own clock 3 s ahead) and `--retry-base-seconds 0.2`; a fresh schema and key prefix per run.",
  'Load: for 130 s (of a 150 s window), a batch of 24 tasks every 500 ms, each due between its submit and 20 s later (a fifth at once), `timeout_seconds` 5, an idempotency key each; a 429/503 is sent again after its Retry-After. Four honest worker processes (SDK, 50 slots each); a dropping worker that takes 2 tasks every 3 s and never heartbeats or reports.',
  "Faults, at +19.5, +40.5, +60, +79.5, +100.5 and +120 s: `pg_ctlcluster … restart -m fast`; `pg_terminate_backend` of the node's connections (`application_name`); `CLIENT KILL` of its Redis connections; `CLIENT PAUSE 4000 ALL`; Redis `SHUTDOWN NOSAVE` and started again with its own settings (empty); Postgres restarted again. A fault lasts from its start until its command returned (the pause: 4 s more).",
  "Lost: tasks created (a 2xx answer) that are not `succeeded` in Postgres once nothing changed for 30 s after the last was due. Run twice: tasks an honest worker's handler started more than once. Dropped leases: a task the dropping worker took, from its claim to its next start by an honest worker; the bar (lease + 2 s) is held to those whose lease ran out more than 6 s from any fault. Start lag: first start − due time, over tasks the dropper never took; the bar (≤ 2 s) is held to tasks due more than 6 s from any fault.",
];

export const FAULTS_BEGIN = '<!-- chaos-faults:begin (npm run chaos -- --faults --write) -->';
export const FAULTS_END = '<!-- chaos-faults:end -->';

/** Replaces the section between the chaos-faults markers of docs/benchmarks.md, or appends one. */
export function writeFaultsDoc(
  runs: (FaultRun | { error: string })[],
  notes: string[],
  meta: { command: string; machine: string; date: string; durationS: number },
): void {
  const section = [
    FAULTS_BEGIN,
    '## Chaos: store faults under load',
    '',
    `Written by \`${meta.command}\` (bench/chaos-faults.ts) on ${meta.date}, ${meta.durationS.toFixed(0)} s in all. ${meta.machine}.`,
    '',
    `| ${FAULT_HEADERS.join(' | ')} |`,
    `|${FAULT_HEADERS.map(() => '---').join('|')}|`,
    ...faultRows(runs).map((r) => `| ${r.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`),
    '',
    ...MEASURED.map((line) => `- ${line}`),
    '',
    'Notes:',
    '',
    ...notes.map((n) => `- ${n}`),
    FAULTS_END,
  ].join('\n');
  replaceSection(FAULTS_BEGIN, FAULTS_END, section);
}
