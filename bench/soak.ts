/**
 * `npm run soak -- [--minutes 30] [--rate 2000] [--retention-seconds 300] [--warmup-minutes 5]
 * [--trace FILE] [--write]`: one node
 * on Postgres + Redis under a steady mixed load for a bounded time — immediate, delayed, cron
 * and DAG work at `rate` tasks a second in all — with a short retention, sampling every minute
 * the node's RSS, the start lag p99 of that minute and the Postgres table sizes. The bars:
 * after warm-up, RSS and table sizes stay within 10 % of their values at minute 10, and each
 * minute's p99 within 2× of the first minute's. Self-stopping: a hard limit of warm-up +
 * minutes + 15 kills everything. `--write` puts the figures and docs/benchmarks/soak.svg into
 * docs/benchmarks.md.
 *
 * Minute 1 comes after a warm-up (`--warmup-minutes`, the retention window by default): the
 * load runs, sampled and listed, until the first tasks have passed retention, so the minutes
 * judged — minute 1 included, which the p99 bar compares with — all carry retention's deletes
 * and VACUUM's work on a table of its steady size.
 *
 * Retention deletes rows; only VACUUM makes their space reusable. Where the server runs without
 * autovacuum (the test machine's does), the soak runs a plain VACUUM of its schema's tables every
 * `--vacuum-seconds` (60; 0 = never), with autovacuum's own cost-based pacing, and says so.
 *
 * From minute 1 the load is the steady one: the delayed tasks a run of the producer would have
 * pending by then (due over the next 5 minutes, fewer the further out) are submitted before the
 * clock starts, so minute 1 — what the p99 bar compares with — has its full share of delayed
 * tasks falling due instead of a tenth of it. The RSS of a minute is the median of samples
 * taken every 5 seconds through it (a single sample lands anywhere on the GC's sawtooth); the
 * largest sample of the minute is reported beside it.
 */
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Pool } from 'undici';
import { authHeaders } from './auth.js';
import { replaceSection } from './chaos-report.js';
import { killAllChildren } from './children.js';
import { describeMachine } from './machine.js';
import { currentMiB, runNames, startBenchNode, type BenchNode } from './node-process.js';
import { cpuMs } from './cluster-nodes.js';
import { tableSizes, walPosition } from './pg-sizes.js';
import { startRedisProcess, type RedisProcess } from './redis-process.js';
import { soakSvg, type SoakSample } from './soak-plot.js';
import { median, percentiles, takeWindow, type Timed } from './stats.js';
import { BenchStores } from './stores.js';
import { submitTasks } from './submit.js';
import { sleep } from './time.js';
import { WorkerFleet } from './worker-process.js';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '30' },
    rate: { type: 'string', default: '2000' },
    'retention-seconds': { type: 'string', default: '300' },
    write: { type: 'boolean', default: false },
    'node-flags': { type: 'string', default: '' },
    'vacuum-seconds': { type: 'string', default: '60' },
    trace: { type: 'string' },
    'warmup-minutes': { type: 'string' },
  },
});
const MINUTES = positive('minutes', values.minutes);
const RATE = positive('rate', values.rate);
const RETENTION_S = positive('retention-seconds', values['retention-seconds']);
const VACUUM_S = values['vacuum-seconds'] === '0' ? 0 : positive('vacuum-seconds', values['vacuum-seconds']);
/**
 * Minutes the load runs before minute 1, sampled and listed but not judged: by default the
 * retention window, so that from minute 1 retention removes tasks as fast as they finish and
 * VACUUM has their dead rows to clear — the steady state, which an empty table reaches only
 * once the first tasks pass retention.
 */
const WARMUP_MINUTES =
  values['warmup-minutes'] === undefined
    ? Math.ceil(RETENTION_S / 60)
    : values['warmup-minutes'] === '0'
      ? 0
      : positive('warmup-minutes', values['warmup-minutes']);
// The flatness bars are measured from minute 10 (from the middle of a run shorter than 20 minutes).
const REFERENCE_MINUTE = Math.min(10, Math.ceil(MINUTES / 2));
const TICK_MS = 250;
/** Delayed tasks are due 1 s … 5 min after they are submitted. */
const DELAY_MIN_MS = 1_000;
const DELAY_SPAN_MS = 299_000;
/** RSS samples a minute: every 5 s. */
const RSS_SAMPLE_MS = 5_000;
/** What autovacuum paces itself with (Postgres 15's defaults); a manual VACUUM has no pacing. */
const AUTOVACUUM_PACING = ["SET vacuum_cost_delay = '2ms'", 'SET vacuum_cost_limit = 200'];
/** Shares of the rate: immediate, delayed (1 s … 5 min out), DAG tasks (diamonds of 4), cron fires. */
const MIX = { immediate: 0.5, delayed: 0.3, dag: 0.1, cron: 0.1 };
/** The worker fleets, one per task type, in the order they are started. */
const FLEET_LABELS = ['immediate', 'delayed', 'dag', 'cron'] as const;
/** The labels of a `--trace` line: the fleets', then the producer's requests. */
const TRACE_LABELS = [...FLEET_LABELS, 'submit'];
const DOC_BEGIN = '<!-- soak:begin (npm run soak -- --write) -->';
const DOC_END = '<!-- soak:end -->';
const SVG_PATH = resolve(import.meta.dirname, '../../docs/benchmarks/soak.svg');

function positive(name: string, raw: string): number {
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) {
    process.stderr.write(`--${name} must be a positive number, got "${raw}"\n`);
    process.exit(2);
  }
  return n;
}

/**
 * `--trace FILE`: a line of JSON a second of the run — each task type's start-lag count, p50,
 * p99 and max among the handlers that started in that second — and one for each VACUUM's start
 * and end and each Postgres checkpoint, to find what the slow seconds have in common.
 */
const TRACE = values.trace === undefined ? undefined : resolve(values.trace);
const trace = (entry: Record<string, unknown>): void => {
  if (TRACE !== undefined) appendFileSync(TRACE, `${JSON.stringify(entry)}\n`);
};

/** With `--trace`: when each of the producer's requests was sent and how long its answer took, ms. */
let submits: Timed = { startMs: [], lagMs: [] };

const log = (line: string): void => {
  process.stdout.write(`[soak ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
};

/** Sends the load, tick by tick, until `untilMs`, counting the tasks it submitted in `count`. */
async function produce(
  node: BenchNode,
  types: Record<keyof typeof MIX, string>,
  untilMs: number,
  count: { submitted: number },
): Promise<void> {
  const pool = new Pool(node.url, { connections: 8, pipelining: 1 });
  const headers = { 'content-type': 'application/json', ...authHeaders() };
  const post = async (path: string, body: unknown): Promise<void> => {
    const t0 = Date.now();
    const res = await pool.request({ path, method: 'POST', headers, body: JSON.stringify(body) });
    const text = await res.body.text();
    if (TRACE !== undefined) {
      submits.startMs.push(t0);
      submits.lagMs.push(Date.now() - t0);
    }
    if (res.statusCode !== 201 && res.statusCode !== 200 && res.statusCode !== 429 && res.statusCode !== 503)
      throw new Error(`POST ${path} answered ${res.statusCode}: ${text.slice(0, 300)}`);
  };
  const perTick = (share: number): number => (RATE * share * TICK_MS) / 1000;
  let carry = { immediate: 0, delayed: 0, dag: 0 };
  let tick = Date.now();
  try {
    while (Date.now() < untilMs) {
      carry = {
        immediate: carry.immediate + perTick(MIX.immediate),
        delayed: carry.delayed + perTick(MIX.delayed),
        dag: carry.dag + perTick(MIX.dag) / 4,
      };
      const nowMs = Date.now();
      const tasks: Record<string, unknown>[] = [];
      for (; carry.immediate >= 1; carry.immediate--)
        tasks.push({ task_type: types.immediate, payload: { due_ms: nowMs } });
      for (; carry.delayed >= 1; carry.delayed--)
        tasks.push(delayedTask(types.delayed, nowMs + DELAY_MIN_MS + Math.floor(Math.random() * DELAY_SPAN_MS)));
      const requests: Promise<void>[] = [];
      for (let i = 0; i < tasks.length; i += 1000)
        requests.push(post('/api/tasks/batch', { tasks: tasks.slice(i, i + 1000) }));
      for (; carry.dag >= 1; carry.dag--) {
        requests.push(
          post('/api/dags', {
            tasks: [
              { ref: 'a', task_type: types.dag },
              { ref: 'b', task_type: types.dag, depends_on: ['a'] },
              { ref: 'c', task_type: types.dag, depends_on: ['a'] },
              { ref: 'd', task_type: types.dag, depends_on: ['b', 'c'] },
            ],
          }),
        );
        count.submitted += 4;
      }
      count.submitted += tasks.length;
      await Promise.all(requests);
      tick += TICK_MS;
      await sleep(Math.max(0, tick - Date.now()));
    }
  } finally {
    await pool.close();
  }
}

function delayedTask(taskType: string, dueMs: number): Record<string, unknown> {
  return {
    task_type: taskType,
    payload: { due_ms: dueMs },
    schedule: { type: 'delayed', due_time: new Date(dueMs).toISOString() },
  };
}

/**
 * The delayed tasks the producer would have pending had it run for the 5 minutes before now:
 * due from 1 s to 5 min out, the density falling linearly to none at 5 min (a task submitted s
 * seconds ago is due within the 5 min after it, so fewer are pending the further out). Answers
 * how many it submitted.
 */
async function submitDelayedBacklog(node: BenchNode, taskType: string): Promise<number> {
  const count = Math.round((RATE * MIX.delayed * DELAY_SPAN_MS) / 1000 / 2);
  const nowMs = Date.now();
  await submitTasks(node.url, count, () =>
    delayedTask(taskType, nowMs + DELAY_MIN_MS + Math.floor(DELAY_SPAN_MS * (1 - Math.sqrt(Math.random())))),
  );
  return count;
}

/**
 * The p99 of the start lags (handler start − due time, at the worker) of the immediate and
 * delayed tasks whose handlers started in [fromMs, toMs): the workers stream them as they
 * run, so measuring costs the node and Postgres nothing. (A query of Postgres for it read the
 * whole `tasks` table each minute, more as the table grew, and its scan showed up in the
 * next seconds' lags.)
 */
function startLagP99(fleets: readonly WorkerFleet[], fromMs: number, toMs: number): { p99: number; n: number } {
  const taken = fleets.map((fleet) => fleet.takeLags(fromMs, toMs));
  if (TRACE !== undefined) {
    // The producer's requests of the minute, under the label `submit`.
    const split = takeWindow(submits, fromMs, toMs);
    submits = split.kept;
    traceSeconds([...taken, split.taken], fromMs, toMs);
  }
  const lags = taken.flatMap((t) => t.lagMs);
  return { p99: percentiles(lags, [99])[0] as number, n: lags.length };
}

/** The `--trace` lines of the seconds in [fromMs, toMs): per fleet (task type), count, p50, p99, max. */
function traceSeconds(taken: readonly Timed[], fromMs: number, toMs: number): void {
  const seconds = Math.ceil((toMs - fromMs) / 1000);
  // Each series' durations by the second they began in.
  const bySecond = taken.map((t) => {
    const buckets: number[][] = Array.from({ length: seconds }, () => []);
    t.startMs.forEach((at, i) => buckets[Math.floor((at - fromMs) / 1000)]?.push(t.lagMs[i] as number));
    return buckets;
  });
  for (let s = 0; s < seconds; s++) {
    const entry: Record<string, unknown> = { at: new Date(fromMs + s * 1000).toISOString() };
    bySecond.forEach((buckets, f) => {
      const lags = buckets[s] ?? [];
      if (lags.length === 0) return;
      const [p50, p99, max] = percentiles(lags, [50, 99, 100]);
      entry[TRACE_LABELS[f] ?? String(f)] = { n: lags.length, p50, p99, max };
    });
    trace(entry);
  }
}

/** With `--trace`: a line for each checkpoint Postgres starts, polled every second until `untilMs`. */
async function traceCheckpoints(stores: BenchStores, untilMs: number): Promise<void> {
  if (TRACE === undefined) return;
  let last: number | undefined;
  while (Date.now() < untilMs) {
    const { rows } = await stores.pg.query<{ n: string }>(
      'SELECT checkpoints_timed + checkpoints_req AS n FROM pg_stat_bgwriter',
    );
    const n = Number(rows[0]?.n);
    if (last !== undefined && n > last) trace({ at: new Date().toISOString(), event: 'checkpoint' });
    last = n;
    await sleep(1_000);
  }
}

/**
 * Stands in for autovacuum when the server has it off: a plain VACUUM (no lock that blocks
 * reads or writes) of the run's tables every `VACUUM_S` seconds until `untilMs`. Answers the
 * vacuums' durations, ms; nothing when autovacuum is on or `--vacuum-seconds 0`.
 */
async function vacuumLoop(stores: BenchStores, schema: string, untilMs: number): Promise<number[]> {
  const { rows } = await stores.pg.query<{ autovacuum: string }>('SHOW autovacuum');
  if (VACUUM_S === 0 || rows[0]?.autovacuum === 'on') return [];
  log(`the server runs with autovacuum off: VACUUM of the run's tables every ${VACUUM_S} s stands in for it`);
  const tables = await stores.pg.query<{ name: string }>(
    "SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'",
    [schema],
  );
  const list = tables.rows.map((t) => `"${schema}"."${t.name}"`).join(', ');
  const took: number[] = [];
  const client = await stores.pg.connect();
  try {
    for (const set of AUTOVACUUM_PACING) await client.query(set);
    for (let at = Date.now() + VACUUM_S * 1000; at < untilMs; at += VACUUM_S * 1000) {
      await sleep(Math.max(0, at - Date.now()));
      const t0 = Date.now();
      trace({ at: new Date(t0).toISOString(), event: 'vacuum-start' });
      await client.query(`VACUUM ${list}`);
      trace({ at: new Date().toISOString(), event: 'vacuum-end' });
      took.push(Date.now() - t0);
    }
  } finally {
    client.release();
  }
  return took;
}

async function main(): Promise<number> {
  const hard = setTimeout(
    () => {
      log(`ABORT: hard limit of ${WARMUP_MINUTES + MINUTES + 15} min reached`);
      killAllChildren();
      process.exit(1);
    },
    (WARMUP_MINUTES + MINUTES + 15) * 60_000,
  );
  const stores = new BenchStores();
  const names = runNames();
  // Interrupted (Ctrl-C, or a SIGTERM from whatever ran it): the node, its workers and the
  // private redis-server go too, and the run's schema — a killed harness left them running.
  const interrupted = (signal: string): void => {
    log(`ABORT: ${signal}`);
    clearTimeout(hard);
    killAllChildren();
    void Promise.race([stores.removeRun(names.schema, names.redisPrefix).catch(() => undefined), sleep(5_000)]).finally(
      () => process.exit(1),
    );
  };
  process.once('SIGINT', () => interrupted('interrupted'));
  process.once('SIGTERM', () => interrupted('terminated'));
  const run = randomBytes(3).toString('hex');
  const types = {
    immediate: `soak.now.${run}`,
    delayed: `soak.later.${run}`,
    dag: `soak.dag.${run}`,
    cron: `soak.cron.${run}`,
  };
  const machine = describeMachine();
  log(
    `${machine.cpuModel}, ${machine.cores} cores, load ${machine.loadAvg1m}; ${WARMUP_MINUTES} min of warm-up, then ${MINUTES} min at ${RATE}/s, retention ${RETENTION_S} s`,
  );
  // A private redis-server: its CPU and memory are the run's own.
  const redis = await startRedisProcess();
  const nodeId = `soak-${run}`;
  const node = await startBenchNode(names, [
    '--node-id',
    nodeId,
    '--redis-url',
    redis.url,
    '--retention-seconds',
    String(RETENTION_S),
    ...values['node-flags'].split(' ').filter(Boolean),
  ]);
  const fleets: WorkerFleet[] = [];
  const samples: SoakSample[] = [];
  /** The warm-up's minutes (numbered 1 - WARMUP_MINUTES … 0): listed, not judged. */
  const warmup: SoakSample[] = [];
  let perTask: string[] = [];
  let vacuumLine: string | undefined;
  try {
    for (const taskType of FLEET_LABELS.map((label) => types[label]))
      fleets.push(
        await WorkerFleet.start(1, { url: node.url, taskType, concurrency: 500, pollers: 2, streamLags: true }),
      );
    // Cron: per-second schedules, as many as the cron share of the rate.
    const schedules = Math.max(1, Math.round(RATE * MIX.cron));
    await submitTasks(node.url, schedules, () => ({
      task_type: types.cron,
      schedule: { type: 'cron', cron_expression: '* * * * * *' },
    }));
    const backlog = await submitDelayedBacklog(node, types.delayed);
    log(`submitted the steady state's ${backlog} pending delayed tasks`);
    // Minute 1 starts after the warm-up; minutes before it count from 1 - WARMUP_MINUTES.
    const startedMs = Date.now() + WARMUP_MINUTES * 60_000;
    const untilMs = startedMs + MINUTES * 60_000;
    const backends = await stores.backendPids(nodeId);
    let before = await costs(stores, node, redis, backends);
    const count = { submitted: 0 };
    let submittedBefore = 0;
    const producing = produce(node, types, untilMs, count);
    const vacuuming = vacuumLoop(stores, names.schema, untilMs);
    const tracing = traceCheckpoints(stores, untilMs);
    // A producer, VACUUM or trace that fails ends the run at once, not after its minutes.
    const failed = Promise.all([producing, vacuuming, tracing]).then(() => new Promise<never>(() => undefined));
    for (let minute = 1 - WARMUP_MINUTES; minute <= MINUTES; minute++) {
      if (minute === 1) {
        // The costs per task are of the judged minutes only.
        before = await costs(stores, node, redis, backends);
        submittedBefore = count.submitted;
      }
      const sampleAt = startedMs + minute * 60_000;
      const rss: number[] = [];
      for (let at = sampleAt - 60_000 + RSS_SAMPLE_MS; at <= sampleAt; at += RSS_SAMPLE_MS) {
        await Promise.race([sleep(Math.max(0, at - Date.now())), failed]);
        rss.push(currentMiB(node));
      }
      const lag = startLagP99(fleets, sampleAt - 60_000, sampleAt);
      const sizes = await tableSizes(stores.pg, names.schema);
      const tablesMiB = Object.fromEntries(
        sizes.filter((s) => s.totalBytes > 1024 * 1024).map((s) => [s.table, s.totalBytes / 1024 / 1024]),
      );
      const sample: SoakSample = {
        minute,
        rssMiB: median(rss),
        rssMaxMiB: Math.max(...rss),
        p99Ms: lag.p99,
        tablesMiB,
        started: lag.n,
      };
      (minute >= 1 ? samples : warmup).push(sample);
      log(
        `${minute >= 1 ? 'minute' : 'warm-up minute'} ${minute}: RSS ${sample.rssMiB.toFixed(0)} MiB (max ${sample.rssMaxMiB.toFixed(0)}), p99 ${sample.p99Ms.toFixed(0)} ms over ${lag.n} starts, ` +
          Object.entries(tablesMiB)
            .map(([t, m]) => `${t} ${m.toFixed(1)}`)
            .join(', '),
      );
    }
    await producing;
    const submitted = count.submitted - submittedBefore;
    const vacuums = await vacuuming;
    if (vacuums.length > 0) {
      const sorted = [...vacuums].sort((a, b) => a - b);
      vacuumLine = `VACUUM of the run's tables every ${VACUUM_S} s (autovacuum is off on this server): ${vacuums.length} runs, median ${sorted[Math.floor(sorted.length / 2)]} ms, longest ${sorted[sorted.length - 1]} ms`;
    }
    const after = await costs(stores, node, redis, backends);
    const tasks = submitted + schedules * MINUTES * 60;
    perTask = [
      `per task over minutes 1 – ${MINUTES} (${tasks} tasks: ${submitted} submitted + the cron fires): node CPU ${(((after.nodeCpuMs - before.nodeCpuMs) * 1000) / tasks).toFixed(0)} µs, ` +
        `its Postgres backends' CPU ${(((after.pgCpuMs - before.pgCpuMs) * 1000) / tasks).toFixed(0)} µs (the ${backends.length} open at the start), ` +
        `Redis CPU ${(((after.redisCpuMs - before.redisCpuMs) * 1000) / tasks).toFixed(0)} µs, WAL ${(Number(after.wal - before.wal) / tasks).toFixed(0)} bytes ` +
        `(the machine's whole WAL: anything else writing to this Postgres counts too); Redis used_memory at the end ${(after.redisBytes / 1024 / 1024).toFixed(1)} MiB`,
    ];
  } finally {
    for (const fleet of fleets) fleet.kill();
    await node.stop();
    await stores.removeRun(names.schema, names.redisPrefix).catch(() => undefined);
    await redis.stop();
    await stores.close();
    clearTimeout(hard);
  }
  const verdict = judge(samples);
  if (warmup.length > 0)
    verdict.lines.push(
      `warm-up, ${WARMUP_MINUTES} min before minute 1 (not judged): p99 ${warmup.map((s) => s.p99Ms.toFixed(0)).join(', ')} ms; ` +
        `RSS ${warmup.map((s) => s.rssMiB.toFixed(0)).join(', ')} MiB; tasks ${warmup.map((s) => (s.tablesMiB.tasks ?? 0).toFixed(0)).join(', ')} MiB`,
    );
  verdict.lines.push(...perTask);
  if (vacuumLine !== undefined) verdict.lines.push(vacuumLine);
  for (const line of verdict.lines) log(line);
  if (values.write) write(samples, verdict, machine);
  return verdict.flat ? 0 : 1;
}

/** Counters read before and after the load, for per-task costs. */
async function costs(
  stores: BenchStores,
  node: BenchNode,
  redis: RedisProcess,
  backends: readonly number[],
): Promise<{ nodeCpuMs: number; pgCpuMs: number; redisCpuMs: number; wal: bigint; redisBytes: number }> {
  const info = await redis.client.info('cpu');
  const field = (name: string): number => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return {
    nodeCpuMs: cpuMs(node.pid),
    pgCpuMs: backends.reduce((sum, pid) => sum + (Number.isFinite(cpuMs(pid)) ? cpuMs(pid) : 0), 0),
    redisCpuMs: (field('used_cpu_sys') + field('used_cpu_user')) * 1000,
    wal: await walPosition(stores.pg),
    redisBytes: await redis.usedMemory(),
  };
}

interface Verdict {
  flat: boolean;
  lines: string[];
}

/** The bars: after the reference minute, RSS and table sizes within 10 % of their reference values; p99 within 2× of minute 1's. */
function judge(samples: readonly SoakSample[]): Verdict {
  const reference = samples.find((s) => s.minute === REFERENCE_MINUTE);
  const first = samples[0];
  if (reference === undefined || first === undefined) return { flat: false, lines: ['too few samples to judge'] };
  const after = samples.filter((s) => s.minute >= REFERENCE_MINUTE);
  const spread = (pick: (s: SoakSample) => number): number =>
    Math.max(...after.map((s) => Math.abs(pick(s) / pick(reference) - 1)));
  const rss = spread((s) => s.rssMiB);
  const tables = Object.keys(reference.tablesMiB).map((t) => ({ t, d: spread((s) => s.tablesMiB[t] ?? 0) }));
  const p99Ratio = Math.max(...samples.map((s) => s.p99Ms)) / first.p99Ms;
  const lines = [
    `RSS (a minute's median) after minute ${REFERENCE_MINUTE}: within ${(rss * 100).toFixed(1)} % of ${reference.rssMiB.toFixed(0)} MiB (bar 10 %)`,
    ...tables.map(
      ({ t, d }) =>
        `${t}: within ${(d * 100).toFixed(1)} % of ${(reference.tablesMiB[t] ?? 0).toFixed(1)} MiB (bar 10 %)`,
    ),
    `p99: largest minute ${p99Ratio.toFixed(2)}× minute 1's ${first.p99Ms.toFixed(0)} ms (bar 2×)`,
  ];
  const flat = rss <= 0.1 && tables.every(({ d }) => d <= 0.1) && p99Ratio <= 2;
  return { flat, lines: [...lines, flat ? 'FLAT: every bar held' : 'NOT FLAT: a bar failed'] };
}

function write(samples: readonly SoakSample[], verdict: Verdict, machine: ReturnType<typeof describeMachine>): void {
  mkdirSync(resolve(SVG_PATH, '..'), { recursive: true });
  writeFileSync(
    SVG_PATH,
    soakSvg(samples, `soak: ${RATE}/s mixed for ${MINUTES} min, retention ${RETENTION_S} s`, REFERENCE_MINUTE),
  );
  const tables = [...new Set(samples.flatMap((s) => Object.keys(s.tablesMiB)))];
  const section = [
    DOC_BEGIN,
    `## Soak: ${RATE} tasks/s of mixed work for ${MINUTES} minutes, retention ${RETENTION_S / 60} minutes`,
    '',
    `\`npm run soak -- ${process.argv.slice(2).join(' ')}\` on ${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}, ` +
      `${new Date().toISOString().slice(0, 10)}. One node on the machine's Postgres and Redis; a worker process per task type ` +
      `(500 slots). The load: ${MIX.immediate * 100} % immediate, ${MIX.delayed * 100} % delayed 1 s – 5 min, ${MIX.dag * 100} % DAG tasks ` +
      `(diamonds of four, POST /api/dags), ${MIX.cron * 100} % cron fires (per-second schedules). Start lag is handler start − due time ` +
      'of the immediate and delayed tasks whose handlers started in the minute, measured by the workers (the due time the producer ' +
      'put in the payload: for an immediate task its submission). The run starts with the delayed tasks ' +
      `5 minutes of the producer would have pending, and the load runs ${WARMUP_MINUTES} minutes of warm-up before minute 1 ` +
      (WARMUP_MINUTES * 60 >= RETENTION_S
        ? '(the retention window: from minute 1 retention removes tasks as fast as they finish and VACUUM clears their rows; '
        : '(shorter than the retention window: retention starts deleting after minute 1; ') +
      "the warm-up's minutes are listed below the table, not judged); RSS is the median of the minute's " +
      "5-second samples (the largest beside it); the VACUUM that stands in for autovacuum uses autovacuum's pacing (2 ms every 200 cost units).",
    '',
    '![soak](benchmarks/soak.svg)',
    '',
    `| minute | RSS (MiB) | RSS max (MiB) | p99 (ms) | starts | ${tables.join(' (MiB) | ')} (MiB) |`,
    `|---:|---:|---:|---:|---:|${tables.map(() => '---:').join('|')}|`,
    ...samples.map(
      (s) =>
        `| ${s.minute} | ${s.rssMiB.toFixed(0)} | ${s.rssMaxMiB.toFixed(0)} | ${s.p99Ms.toFixed(0)} | ${s.started} | ${tables.map((t) => (s.tablesMiB[t] ?? 0).toFixed(1)).join(' | ')} |`,
    ),
    '',
    ...verdict.lines.map((l) => `- ${l}`),
    DOC_END,
  ].join('\n');
  replaceSection(DOC_BEGIN, DOC_END, section);
  log('wrote the soak section of docs/benchmarks.md and docs/benchmarks/soak.svg');
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`soak: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    killAllChildren();
    process.exit(1);
  },
);
