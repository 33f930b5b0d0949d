/**
 * `npm run bench:limit-keys -- [--keys N] [--backlog B] [--timeout-minutes M]`: what many distinct limit keys
 * leave in a node's memory once they went idle (issue 28). The family `k:*` is declared with
 * concurrency 1 and N immediate no-op tasks each name their own key `k:<i>`, so every task
 * activates its own key's actor, runs once and leaves the key idle; the node's RSS is read
 * after the keys passivated (IDLE_WAIT_MS) and compared with the same run
 * without limits (same N, same waits) on a fresh node. Prints the figures; bounded by a hard
 * timeout that kills every child it started.
 *
 * `--backlog B` paces the producer: it submits the next 10 000 tasks once at most B of those
 * it submitted are not done yet. Without it all N are submitted at once, and every key is live
 * at once (each holds its admitted task until a worker claims it): the node's memory is then
 * that of N live keys, not of N keys that went idle one after another. With it, the keys live
 * at once are about B + 10 000 (those whose task is not done) and those that finished in the
 * last 2 s.
 */
import { parseArgs } from 'node:util';
import { killAllChildren } from './children.js';
import { cpuMs, metric, scrapeMetrics } from './cluster-nodes.js';
import { declareLimit } from './limits.js';
import { describeMachine } from './machine.js';
import { runNames, startBenchNode } from './node-process.js';
import { rssKiB } from './rss.js';
import { median, spaced } from './stats.js';
import { BenchStores } from './stores.js';
import { submitTasks } from './submit.js';
import { sleep } from './time.js';
import { WorkerFleet } from './worker-process.js';

const TASK_TYPE = 'bench.limitkeys';
const FAMILY = 'k:*';
/**
 * Long enough for every key to have left memory: a key that ran its task and holds nothing
 * leaves 2 s after it went idle (QUIET_PASSIVATION_MS, src/actors/limit-key.ts); one that
 * still holds something after the kind's idle time (`limitIdleSeconds`, 30 s); and a margin for
 * the release statements. Kept at 45 s so that figures compare with the earlier rounds.
 */
const IDLE_WAIT_MS = 30_000 + 15_000;
/** RSS is the median of this many samples, one a second, once idle. */
const RSS_SAMPLES = 5;
/** With `--backlog`: tasks submitted at a time. */
const PACED_CHUNK = 10_000;

const log = (line: string): void => {
  process.stdout.write(`[limit-keys ${new Date().toISOString().slice(11, 23)}] ${line}\n`);
};

interface Outcome {
  /** Median RSS after the keys passivated (and the same wait without limits), MiB. */
  idleMiB: number;
  peakMiB: number;
  heapUsedMiB: number;
  /** V8's committed heap, and memory outside it that V8 knows of (buffers), once idle, MiB. */
  heapTotalMiB: number;
  externalMiB: number;
  /** Most limit actors seen live at once, and how many were live when RSS was read. */
  peakLimitActors: number;
  limitActorsAtRead: number;
  /** Submit of the first task → last result, s. */
  processS: number;
  /** The node's CPU (utime + stime, /proc) over the same span, ms. */
  nodeCpuMs: number;
}

async function measure(
  stores: BenchStores,
  keys: number,
  withLimits: boolean,
  backlog: number | null,
): Promise<Outcome> {
  const names = runNames();
  const node = await startBenchNode(names);
  let fleet: WorkerFleet | undefined;
  try {
    if (withLimits) await declareLimit(node.url, FAMILY, { concurrency: 1 });
    fleet = await WorkerFleet.start(1, { url: node.url, taskType: TASK_TYPE, concurrency: 1000, pollers: 1 });
    node.rss.reset();
    let peakLimitActors = 0;
    const watch = setInterval(() => {
      scrapeMetrics(node.url)
        .then((m) => {
          peakLimitActors = Math.max(peakLimitActors, metric(m, 'wheelhouse_actors_live', 'kind="limit"'));
        })
        .catch(() => undefined);
    }, 1_000);
    const startedMs = Date.now();
    const cpuBefore = cpuMs(node.pid);
    const f = fleet;
    const taskAt = (i: number) => ({ task_type: TASK_TYPE, ...(withLimits ? { limits: [`k:${i}`] } : {}) });
    const chunk = backlog === null ? keys : PACED_CHUNK;
    for (let from = 0; from < keys; from += chunk) {
      if (backlog !== null) await f.until(() => from - f.reported <= backlog, 60 * 60_000, `a backlog of ${backlog}`);
      await submitTasks(node.url, Math.min(chunk, keys - from), (i) => taskAt(from + i));
    }
    await f.until(() => f.reported >= keys, 60 * 60_000, `${keys} results`);
    const processS = (Date.now() - startedMs) / 1000;
    const nodeCpuMs = cpuMs(node.pid) - cpuBefore;
    log(
      `${withLimits ? 'limits' : 'plain'}: ${spaced(keys)} tasks ran in ${processS.toFixed(1)} s; waiting ${IDLE_WAIT_MS / 1000} s`,
    );
    await f.stop();
    fleet = undefined;
    await sleep(IDLE_WAIT_MS);
    clearInterval(watch);
    const samples: number[] = [];
    for (let i = 0; i < RSS_SAMPLES; i++) {
      samples.push((rssKiB(node.pid) ?? Number.NaN) / 1024);
      await sleep(1_000);
    }
    const m = await scrapeMetrics(node.url);
    const counts = await stores.countByStatus(node.schema, TASK_TYPE);
    if (counts.succeeded !== keys)
      throw new Error(`expected ${keys} succeeded, Postgres has ${JSON.stringify(counts)}`);
    return {
      idleMiB: median(samples),
      peakMiB: node.rss.maxMiB,
      heapUsedMiB: metric(m, 'wheelhouse_nodejs_heap_size_used_bytes') / 2 ** 20,
      heapTotalMiB: metric(m, 'wheelhouse_nodejs_heap_size_total_bytes') / 2 ** 20,
      externalMiB: metric(m, 'wheelhouse_nodejs_external_memory_bytes') / 2 ** 20,
      peakLimitActors,
      limitActorsAtRead: metric(m, 'wheelhouse_actors_live', 'kind="limit"'),
      processS,
      nodeCpuMs,
    };
  } finally {
    fleet?.kill();
    await node.stop();
    await stores.removeRun(names.schema, names.redisPrefix).catch(() => undefined);
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: {
      keys: { type: 'string', default: '1000000' },
      backlog: { type: 'string' },
      'timeout-minutes': { type: 'string', default: '60' },
    },
  });
  const keys = Number(values.keys);
  const timeoutMinutes = Number(values['timeout-minutes']);
  const backlog = values.backlog === undefined ? null : Number(values.backlog);
  if (!Number.isInteger(keys) || keys <= 0 || !(timeoutMinutes > 0) || (backlog !== null && !(backlog >= 0))) {
    process.stderr.write('usage: npm run bench:limit-keys -- [--keys N] [--backlog B] [--timeout-minutes M]\n');
    return 2;
  }
  const hard = setTimeout(() => {
    log(`ABORT: hard timeout of ${timeoutMinutes} min; killing child processes`);
    killAllChildren();
    process.exit(1);
  }, timeoutMinutes * 60_000);
  const machine = describeMachine();
  log(
    `${machine.cpuModel}, ${machine.cores} cores, Node ${machine.node}, load ${machine.loadAvg1m}; ${spaced(keys)} keys` +
      (backlog === null ? ', submitted at once' : `, 10 000 more once at most ${spaced(backlog)} are not done`),
  );
  const stores = new BenchStores();
  try {
    const limited = await measure(stores, keys, true, backlog);
    const plain = await measure(stores, keys, false, backlog);
    clearTimeout(hard);
    const diffMiB = limited.idleMiB - plain.idleMiB;
    const rows: [string, string, string][] = [
      ['RSS once idle (MiB)', limited.idleMiB.toFixed(0), plain.idleMiB.toFixed(0)],
      ['peak RSS (MiB)', limited.peakMiB.toFixed(0), plain.peakMiB.toFixed(0)],
      ['heap used once idle (MiB)', limited.heapUsedMiB.toFixed(0), plain.heapUsedMiB.toFixed(0)],
      ['heap committed once idle (MiB)', limited.heapTotalMiB.toFixed(0), plain.heapTotalMiB.toFixed(0)],
      ['external memory once idle (MiB)', limited.externalMiB.toFixed(0), plain.externalMiB.toFixed(0)],
      ['limit actors live: peak / at the read', `${limited.peakLimitActors} / ${limited.limitActorsAtRead}`, '—'],
      ['tasks run in (s)', limited.processS.toFixed(1), plain.processS.toFixed(1)],
      ['tasks (keys) per s', (keys / limited.processS).toFixed(0), (keys / plain.processS).toFixed(0)],
      [
        'node CPU per 1 000 tasks (ms)',
        ((limited.nodeCpuMs * 1000) / keys).toFixed(0),
        ((plain.nodeCpuMs * 1000) / keys).toFixed(0),
      ],
    ];
    process.stdout.write(
      `\n| ${spaced(keys)} tasks | own key each (k:*, concurrency 1) | no limits |\n|---|---|---|\n`,
    );
    for (const [label, a, b] of rows) process.stdout.write(`| ${label} | ${a} | ${b} |\n`);
    process.stdout.write(
      `\nRSS once idle, with − without: ${diffMiB.toFixed(0)} MiB (${((diffMiB * 2 ** 20) / keys).toFixed(0)} bytes per key); ` +
        // Not scaled to 1 000 000: the RSS follows the keys live at once (the backlog), not N.
        `bar ≤ 256 MiB for 1 000 000 keys: ${keys === 1_000_000 ? (diffMiB <= 256 ? 'met' : 'NOT met') : 'run with --keys 1000000 to judge'}\n`,
    );
    return 0;
  } finally {
    await stores.close();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`limit-keys: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    killAllChildren();
    process.exit(1);
  },
);
