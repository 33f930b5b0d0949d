/**
 * `npm run bench:herd-failover -- --store postgres|redis [--count 200000] [--nodes 1]
 * [--kill-after-ms 3000]`: a store's primary killed while a W2 herd drains (issue 29, items 1
 * and 2). The store that fails over runs highly available, the other one is the local single
 * server (bench/herd-failover-stores.ts); N node processes on them, one worker process (the
 * SDK, 1 000 slots, as W2) that records every handler start. `count` delayed no-op tasks all
 * due at T are submitted in batches before T, as W2 submits them (T from a measured
 * submission rate, bench/w2-herd.ts), each with an idempotency key and re-sent on 429/503;
 * `kill-after-ms` after T the primary is killed with SIGKILL. Then it waits until every
 * acknowledged task succeeded (or `--settle-seconds`), and prints one summary: acknowledged,
 * lost, handed out twice and why (pg-failover's classification), kill → writable / replica
 * promoted, kill → first claim after it, the herd's start lag, and on Redis the affected
 * partitions' gap. Exits 1 on a lost task. Run it under `flock /tmp/wh-bench.lock`.
 * HERD_FAILOVER_DUMP=<file> also writes T, the kill and every handler start there (JSON).
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { killAllChildren } from './children.js';
import { metric, scrapeMetrics, startBenchCluster, submitSpread, type BenchCluster } from './cluster-nodes.js';
import {
  countSucceeded,
  describeGaps,
  flattenStarts,
  handouts,
  partitionGaps,
  readOutcome,
} from './herd-failover-figures.js';
import { startHerdStores, type Failover, type HerdStore, type HerdStores } from './herd-failover-stores.js';
import { spaced } from './stats.js';
import { sleep } from './time.js';
import { chooseDueMs } from './w2-herd.js';
import { WorkerFleet } from './worker-process.js';

const USAGE = `npm run bench:herd-failover -- --store postgres|redis [--count N] [--nodes N] [--kill-after-ms MS]
  --store postgres|redis  which store fails over (the other is the local single server)
  --count N               tasks in the herd (default 200000)
  --nodes N               node processes (default 1)
  --kill-after-ms MS      the primary is killed this long after T (default 3000)
  --lease-seconds S       the tasks' timeout_seconds: their lease (default 10)
  --settle-seconds S      how long to wait after the kill for every task to succeed (default 240)`;

const TASK_TYPE = 'bench.herd-failover';
/** Wheel partitions, set on the nodes so that the harness computes the same `partitionOf`. */
const PARTITIONS = 64;
/** W2's worker: one process of 1 000 slots. */
const CONCURRENCY = 1_000;

interface Args {
  store: HerdStore;
  count: number;
  nodes: number;
  killAfterMs: number;
  leaseSeconds: number;
  settleMs: number;
}

function parse(): Args {
  const { values } = parseArgs({
    options: {
      store: { type: 'string' },
      count: { type: 'string', default: '200000' },
      nodes: { type: 'string', default: '1' },
      'kill-after-ms': { type: 'string', default: '3000' },
      'lease-seconds': { type: 'string', default: '10' },
      'settle-seconds': { type: 'string', default: '240' },
    },
  });
  const positive = (name: string, text: string | undefined): number => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a whole number ≥ 0, not ${text}\n${USAGE}`);
    return n;
  };
  if (values.store !== 'postgres' && values.store !== 'redis')
    throw new Error(`--store must be postgres or redis\n${USAGE}`);
  return {
    store: values.store,
    count: positive('count', values.count),
    nodes: Math.max(1, positive('nodes', values.nodes)),
    killAfterMs: positive('kill-after-ms', values['kill-after-ms']),
    leaseSeconds: Math.max(1, positive('lease-seconds', values['lease-seconds'])),
    settleMs: positive('settle-seconds', values['settle-seconds']) * 1000,
  };
}

const log = (line: string): void => console.log(`${new Date().toISOString().slice(11, 23)} ${line}`);
const load = (): string =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

async function main(): Promise<number> {
  const args = parse();
  const id = randomBytes(4).toString('hex');
  const names = { schema: `hfo_${id}`, redisPrefix: `hfo${id}` };
  let stores: HerdStores | undefined;
  let cluster: BenchCluster | undefined;
  let fleet: WorkerFleet | undefined;
  try {
    stores = await startHerdStores(args.store, { ...names, taskType: TASK_TYPE, partitions: PARTITIONS }, log);
    log(`herd-failover: ${stores.description}`);
    cluster = await startBenchCluster(names, args.nodes, {
      extraFlags: [...stores.nodeFlags, '--partitions', String(PARTITIONS)],
    });
    const urls = cluster.nodes.map((n) => n.url);
    fleet = await WorkerFleet.start(1, {
      url: urls[0]!,
      ...(urls.length > 1 ? { urls } : {}),
      taskType: TASK_TYPE,
      concurrency: CONCURRENCY,
      pollers: 1,
      recordStarts: true,
    });
    const loadBefore = load();
    log(`herd-failover: ${args.nodes} node(s), one worker process; load average ${loadBefore}`);

    // T as W2 chooses it, from the rate of submits that carry an idempotency key as the herd's do.
    const marginMs = args.count >= 100_000 ? 15_000 : 5_000;
    const { dueMs, submitPerMs } = await chooseDueMs(urls[0]!, TASK_TYPE, args.count, marginMs, (i) => ({
      idempotency_key: `${names.schema}-calibration-${i}`,
    }));
    const dueTime = new Date(dueMs).toISOString();
    log(
      `herd-failover: submitting ${spaced(args.count)} tasks due at ${dueTime} (${Math.round(submitPerMs * 1000)}/s)`,
    );
    const acknowledged = new Array<string>(args.count);
    const submitted = await submitSpread(
      urls,
      args.count,
      (i) => ({
        task_type: TASK_TYPE,
        payload: { due_ms: dueMs },
        schedule: { type: 'delayed', due_time: dueTime },
        timeout_seconds: args.leaseSeconds,
        idempotency_key: `${names.schema}-${i}`,
      }),
      {
        onCreated: (from, ids) => {
          for (const [k, taskId] of ids.entries()) acknowledged[from + k] = taskId;
        },
      },
    );
    const marginLeftMs = dueMs - submitted.lastAnsweredMs;
    log(`herd-failover: submitted; T in ${(marginLeftMs / 1000).toFixed(1)} s; ${submitted.retried} batches re-sent`);
    if (marginLeftMs < 1_000) log('herd-failover: !!! submission ended less than 1 s before T');

    // Scraped before T: at T the node is busy firing the herd, and the kill must not wait on it.
    const rebuildsBefore = await rebuilds(urls);
    await sleep(Math.max(0, dueMs + args.killAfterMs - Date.now()));
    const failover = await stores.killPrimary();
    log(`herd-failover: ${failover.what}`);

    const settledAfterMs = await waitForSucceeded(stores, names.schema, args.count, failover, args.settleMs);
    const rebuiltAfterKill = (await rebuilds(urls)) - rebuildsBefore;
    const results = await fleet.stop();
    fleet = undefined;
    const outcome = await readOutcome(
      await stores.postgresUrl(),
      names.schema,
      TASK_TYPE,
      acknowledged,
      failover.killedMs,
    );
    const starts = flattenStarts(results.map((r) => r.starts));
    const h = handouts(starts, dueMs, failover.killedMs);
    if (process.env.HERD_FAILOVER_DUMP)
      writeFileSync(process.env.HERD_FAILOVER_DUMP, JSON.stringify({ dueMs, failover, starts }));
    const lines = [
      `store ${args.store}; nodes ${args.nodes}; count ${spaced(args.count)}; kill ${args.killAfterMs} ms after T; lease ${args.leaseSeconds} s`,
      `load average before ${loadBefore}, after ${load()}`,
      `submission: ${Math.round(submitPerMs * 1000)} tasks/s calibrated; last answer ${(marginLeftMs / 1000).toFixed(1)} s before T; ${submitted.retried} batches answered 429/503 and re-sent`,
      `acknowledged ${spaced(acknowledged.filter(Boolean).length)}; lost ${outcome.lost.length}; rows by status ${JSON.stringify(outcome.byStatus)}`,
      `tasks started before the kill ${spaced(h.started - h.startedAfterKill)}, first started after it ${spaced(h.startedAfterKill)}`,
      `handed out more than once ${h.duplicates.length} ${JSON.stringify(h.why)}`,
      `${failover.what}; the kill at T + ${((failover.killedMs - dueMs) / 1000).toFixed(2)} s`,
      `kill -> ${args.store === 'postgres' ? 'a server takes writes' : 'replica promoted'} ${failover.takeOverMs} ms; ` +
        `kill -> first claim after it ${outcome.firstClaimAfterKillMs ?? 'none'} ms; ` +
        `last completion ${outcome.lastCompletedMs === null ? 'none' : `T + ${((outcome.lastCompletedMs - dueMs) / 1000).toFixed(2)} s (kill + ${((outcome.lastCompletedMs - failover.killedMs) / 1000).toFixed(2)} s)`}` +
        (settledAfterMs === null ? `; NOT every task succeeded within ${args.settleMs / 1000} s of the kill` : ''),
      `start lag p50 ${(h.lagMs.p50 / 1000).toFixed(3)} s, p99 ${(h.lagMs.p99 / 1000).toFixed(3)} s, max ${(h.lagMs.max / 1000).toFixed(3)} s (first start − T, ${spaced(h.started)} tasks)`,
      `wheel partitions rebuilt from Postgres after the kill ${rebuiltAfterKill}`,
      ...gapLines(starts, failover),
    ];
    if (outcome.lost.length > 0)
      lines.push(
        `LOST (first 20): ${outcome.lost
          .slice(0, 20)
          .map((l) => `${l.taskId} ${l.status} attempts ${l.attempts ?? '-'}`)
          .join('; ')}`,
      );
    if (h.duplicates.length > 0)
      lines.push(
        `handed out twice (first 10): ${h.duplicates
          .slice(0, 10)
          .map((d) => `${d.taskId} attempts ${d.attempts.join(',')} (${d.why})`)
          .join('; ')}`,
      );
    console.log(lines.join('\n'));
    return outcome.lost.length > 0 ? 1 : 0;
  } finally {
    fleet?.kill();
    await cluster?.stop().catch((error: unknown) => log(`herd-failover: stopping the nodes: ${String(error)}`));
    await stores?.stop().catch((error: unknown) => log(`herd-failover: stopping the stores: ${String(error)}`));
  }
}

/**
 * Waits until `count` tasks of the run succeeded, or `settleMs` after the kill; answers how long
 * after the kill they all had (null: not all did).
 */
async function waitForSucceeded(
  stores: HerdStores,
  schema: string,
  count: number,
  failover: Failover,
  settleMs: number,
): Promise<number | null> {
  let lastLogged = 0;
  for (;;) {
    const now = Date.now();
    const succeeded = await stores
      .postgresUrl()
      .then((url) => countSucceeded(url, schema, TASK_TYPE))
      .catch(() => -1);
    if (succeeded >= count) return Date.now() - failover.killedMs;
    if (now - failover.killedMs > settleMs) return null;
    if (now - lastLogged > 10_000) {
      log(`herd-failover: ${spaced(succeeded)} of ${spaced(count)} succeeded`);
      lastLogged = now;
    }
    await sleep(1_000);
  }
}

/** Partition rebuilds so far, over the nodes (`wheelhouse_partition_rebuilds_total`); NaN if one does not answer. */
async function rebuilds(urls: readonly string[]): Promise<number> {
  const scrapes = await Promise.all(urls.map((url) => scrapeMetrics(url).catch(() => null)));
  return scrapes.reduce((n, s) => n + (s === null ? Number.NaN : metric(s, 'wheelhouse_partition_rebuilds_total')), 0);
}

/**
 * Each wheel partition's gap: on Redis those on the killed primary, and the others for
 * comparison; on Postgres every partition (all claims stop).
 */
function gapLines(starts: ReturnType<typeof flattenStarts>, failover: Failover): string[] {
  const affected = failover.affectedPartitions ?? Array.from({ length: PARTITIONS }, (_, p) => p);
  const gaps = partitionGaps(starts, PARTITIONS, failover.killedMs);
  const mine = describeGaps(gaps.filter((g) => affected.includes(g.partition)));
  const others = describeGaps(gaps.filter((g) => !affected.includes(g.partition)));
  const s = (v: number | null): string => (v === null ? '-' : `${v.toFixed(2)} s`);
  return [
    `affected partitions (${affected.length}): longest time without a delivery from the kill, min ${s(mine.minS)}, median ${s(mine.medianS)}, max ${s(mine.maxS)}`,
    `  ${mine.line}`,
    ...(affected.length < PARTITIONS
      ? [
          `other partitions (${PARTITIONS - affected.length}): min ${s(others.minS)}, median ${s(others.medianS)}, max ${s(others.maxS)}`,
        ]
      : []),
  ];
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    killAllChildren();
    process.exit(1);
  },
);
