import { LEASE } from '../src/actors/worker-lease.js';
import { RingPlacement } from '../src/runtime/ring.js';
import {
  clusterView,
  cpuDelta,
  cpuSnapshot,
  metric,
  pidsNamed,
  scrapeMetrics,
  startBenchCluster,
  submitSpread,
  waitSettled,
  type BenchCluster,
} from './cluster-nodes.js';
import { walPosition } from './pg-sizes.js';
import { runNames } from './node-process.js';
import type { WorkerResult } from './protocol.js';
import { submitTasks } from './submit.js';
import { WorkerFleet } from './worker-process.js';
import { verifyAllSucceeded, workerTraffic, type RunContext, type RunFigures, type Workload } from './workload.js';

/**
 * W1: no-op tasks submitted in bulk and run by a separate worker process, end to end; first on
 * one node, then the same N on a cluster of 3 nodes (one Postgres schema, one Redis prefix).
 */
const TASK_TYPE = 'bench.w1';
/** Slots per worker process. */
export const W1_CONCURRENCY = 1000;
const CONCURRENCY = W1_CONCURRENCY;

/** W1's N (also BullMQ's, under `--peers`). */
export function w1Count(quick: boolean): number {
  return quick ? 5_000 : 50_000;
}
const CLUSTER_NODES = 3;
/** How long a fresh cluster may take until every partition is held by its ring owner. */
const SETTLE_LIMIT_MS = 60_000;

export const w1Throughput: Workload = {
  id: 'W1',
  title: 'throughput',
  definitions: [
    'W1: N = 50 000 (quick: 5 000) immediate no-op tasks submitted with POST /api/tasks/batch (1 000 a request, 4 in parallel) while the ' +
      `worker process (SDK, ${CONCURRENCY} slots per process) already polls. Wall time runs from the first submit request ` +
      'to the moment the worker saw the last result accepted by the node; processed/s = N / wall time, so it includes ' +
      'submission. Every task is then checked `succeeded` in Postgres.',
    `W1 on ${CLUSTER_NODES} nodes: the same N and the same definition, on a fresh cluster of ${CLUSTER_NODES} nodes (one schema, one ` +
      'Redis prefix, started in parallel, measured once every partition is held by its ring owner). Batch i goes to node ' +
      `i mod ${CLUSTER_NODES} (still 4 requests in flight in all); each worker process runs one SDK worker per node with ` +
      `${CONCURRENCY} / ${CLUSTER_NODES} slots and the same pollers each, and completes through the node it polled. ` +
      `Ratio = processed/s on ${CLUSTER_NODES} nodes / on 1 node, in the same run. The notes give CPU time per process ` +
      '(/proc utime + stime over the measured window) and, on 1 node, the WAL the server wrote over it per task (its insert ' +
      'position before and after), the node-to-node transport counters and how many leases live on another node than ' +
      'the one that claimed them.',
  ],
  metrics: [
    {
      key: 'rate',
      label: 'processed, submit → last completion',
      unit: '/s',
      digits: 0,
      bar: { op: '>=', value: 28_000, reference: 'BullMQ ≈ 19 000/s' },
    },
    { key: 'wallS', label: 'wall time', unit: 's', digits: 2 },
    { key: 'submitRate', label: 'submitted', unit: '/s', digits: 0 },
    { key: 'rssMiB', label: 'node max RSS', unit: 'MiB', digits: 0 },
    { key: 'walPerTask', label: 'Postgres WAL per task (1 node)', unit: 'B', digits: 0 },
    { key: 'rate3', label: `${CLUSTER_NODES} nodes: processed, submit → last completion`, unit: '/s', digits: 0 },
    { key: 'ratio3', label: `${CLUSTER_NODES} nodes / 1 node, processed/s`, unit: '×', digits: 2 },
    { key: 'submitRate3', label: `${CLUSTER_NODES} nodes: submitted`, unit: '/s', digits: 0 },
    { key: 'rss3MiB', label: `${CLUSTER_NODES} nodes: largest node max RSS`, unit: 'MiB', digits: 0 },
  ],
  async run(ctx: RunContext): Promise<RunFigures> {
    const count = w1Count(ctx.quick);
    const one = await onOneNode(ctx, count);
    const three = await onCluster(ctx, count);
    return {
      values: {
        ...one.values,
        rate3: three.rate,
        ratio3: three.rate / (one.values.rate as number),
        submitRate3: three.submitRate,
        rss3MiB: three.rssMiB,
      },
      notes: [...one.notes, ...three.notes],
      verified: one.verified && three.verified,
    };
  },
};

/** What W1L changes in W1 on one node: a limit every task names, declared before submitting. */
export interface OneNodeVariant {
  limits: string[];
  declare(url: string): Promise<void>;
}

/**
 * W1 on one node: `rate`, `wallS`, `submitRate`, `rssMiB`, `walPerTask` (WAL bytes a task) and
 * `nodeCpuMsPer1k` (the node's CPU ms per 1 000 tasks over the window) (also run by `--peers`
 * and by W1L with a variant).
 */
export async function onOneNode(ctx: RunContext, count: number, variant?: OneNodeVariant): Promise<RunFigures> {
  const node = await ctx.startNode();
  if (variant) await variant.declare(node.url);
  const task = variant ? { task_type: TASK_TYPE, limits: variant.limits } : { task_type: TASK_TYPE };
  const fleet = await WorkerFleet.start(ctx.workers, {
    url: node.url,
    taskType: TASK_TYPE,
    concurrency: CONCURRENCY,
    pollers: ctx.pollers,
  });
  try {
    node.rss.reset();
    const walBefore = await walPosition(ctx.stores.pg);
    const cpu = new CpuWindow([
      ['node', [node.pid]],
      ['worker', fleet.pids],
    ]);
    const submitted = await submitTasks(node.url, count, () => task);
    await fleet.until((f) => f.reported >= count, 60_000 + count, `${count} W1 results`);
    const cpuNote = cpu.note(count);
    // Every statement's WAL in the window (the server's insert position moves with any session's).
    const walPerTask = Number((await walPosition(ctx.stores.pg)) - walBefore) / count;
    const nodeCpuMs = cpu.usedMs('node');
    const results = await fleet.stop();
    const lastMs = Math.max(...results.map((r) => r.lastReportedMs));
    const wallMs = lastMs - submitted.firstSubmitMs;
    const check = await verifyAllSucceeded(ctx, node, TASK_TYPE, count);
    // Stopped now, not with the run's others: W1L starts five nodes in a row, and each left
    // idle took ~3 % of a core (its duties, its statements) from the runs after it.
    await node.stop();
    const notes = [
      ...check.notes,
      workerTraffic(results),
      `1 node: ${cpuNote}; WAL ${Math.round(walPerTask)} B a task`,
    ];
    if (submitted.retried > 0) notes.push(`${submitted.retried} submit requests were answered 429/503 and sent again`);
    return {
      values: {
        rate: (count / wallMs) * 1000,
        wallS: wallMs / 1000,
        submitRate: (count / (submitted.lastAnsweredMs - submitted.firstSubmitMs)) * 1000,
        rssMiB: node.rss.maxMiB,
        nodeCpuMsPer1k: (nodeCpuMs / count) * 1000,
        walPerTask,
      },
      notes,
      verified: check.verified,
    };
  } catch (error) {
    fleet.kill();
    throw error;
  }
}

interface ClusterFigures {
  rate: number;
  submitRate: number;
  rssMiB: number;
  notes: string[];
  verified: boolean;
}

/**
 * The same N on a fresh cluster. Its schema and prefix are not the context's (a context starts
 * one node per name pair), so this removes them itself; a hard-timeout abort kills the node
 * processes (they are tracked children) but leaves the schema behind.
 */
async function onCluster(ctx: RunContext, count: number): Promise<ClusterFigures> {
  const names = runNames();
  let cluster: BenchCluster | undefined;
  let fleet: WorkerFleet | undefined;
  try {
    cluster = await startBenchCluster(names, CLUSTER_NODES);
    const { settledMs } = await waitSettled(cluster, SETTLE_LIMIT_MS);
    const nodes = cluster.nodes;
    const urls = nodes.map((n) => n.url);
    const { spread } = (await clusterView(urls[0] as string)).ring;
    fleet = await WorkerFleet.start(ctx.workers, {
      url: urls[0] as string,
      urls,
      taskType: TASK_TYPE,
      concurrency: CONCURRENCY,
      pollers: ctx.pollers,
      recordStarts: true,
    });
    for (const n of nodes) n.rss.reset();
    const before = await Promise.all(urls.map((u) => scrapeMetrics(u)));
    const cpu = new CpuWindow([...nodes.map((n): [string, number[]] => [n.nodeId, [n.pid]]), ['worker', fleet.pids]]);
    const submitted = await submitSpread(urls, count, () => ({ task_type: TASK_TYPE }));
    const f = fleet;
    await f.until(() => f.reported >= count, 60_000 + count, `${count} W1 results on ${CLUSTER_NODES} nodes`);
    const cpuNote = cpu.note(count);
    const after = await Promise.all(urls.map((u) => scrapeMetrics(u)));
    const results = await f.stop();
    fleet = undefined;
    const wallMs = Math.max(...results.map((r) => r.lastReportedMs)) - submitted.firstSubmitMs;
    const counts = await ctx.stores.countByStatus(names.schema, TASK_TYPE);
    const verified = counts.succeeded === count && Object.keys(counts).length === 1;
    const notes: string[] = [];
    if (!verified) {
      const message = `MISMATCH on ${CLUSTER_NODES} nodes: expected ${count} succeeded ${TASK_TYPE} tasks, Postgres has ${JSON.stringify(counts)}`;
      ctx.log(`!!! ${message}`);
      notes.push(message);
    }
    notes.push(
      `${CLUSTER_NODES} nodes: settled ${(settledMs / 1000).toFixed(1)} s after all were ready; wheel partitions ${spread}; ` +
        `${workerTraffic(results)}`,
    );
    notes.push(`${CLUSTER_NODES} nodes: ${cpuNote}`);
    notes.push(
      `${CLUSTER_NODES} nodes: ${transportNote(
        nodes.map((n) => n.nodeId),
        before,
        after,
        results,
        count,
      )}`,
    );
    if (submitted.retried > 0)
      notes.push(`${CLUSTER_NODES} nodes: ${submitted.retried} submit requests were answered 429/503 and sent again`);
    return {
      rate: (count / wallMs) * 1000,
      submitRate: (count / (submitted.lastAnsweredMs - submitted.firstSubmitMs)) * 1000,
      rssMiB: Math.max(...nodes.map((n) => n.rss.maxMiB)),
      notes,
      verified,
    };
  } catch (error) {
    fleet?.kill();
    if (cluster) for (const n of cluster.nodes) ctx.log(`${n.nodeId} output (last lines):\n${n.output()}`);
    throw error;
  } finally {
    await cluster?.stop();
    await ctx.stores
      .removeRun(names.schema, names.redisPrefix)
      .catch((e: unknown) => ctx.log(`cleanup of ${names.schema} failed: ${String(e)}`));
  }
}

/**
 * Where the messages went: the transport counters each node added over the window, and claims
 * per node. A lease lives on the node that claimed its task (`placement: 'holder'`), where the
 * worker also reports, so a claim sends no envelope; the note counts the claims whose lease the
 * ring would have put on another node, two envelopes each (`granted`, `released`) before leases
 * were held where claimed.
 */
function transportNote(
  nodeIds: string[],
  before: Map<string, number>[],
  after: Map<string, number>[],
  results: WorkerResult[],
  count: number,
): string {
  const delta = (name: string, labels?: string): number[] =>
    after.map((a, i) => metric(a, name, labels) - metric(before[i] as Map<string, number>, name, labels));
  const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
  const requests = delta('wheelhouse_transport_requests_total');
  const envelopes = delta('wheelhouse_transport_envelopes_total');
  const retries = sum(delta('wheelhouse_transport_retries_total'));
  const failed = sum(delta('wheelhouse_transport_envelopes_failed_total'));
  const claimed = delta('wheelhouse_tasks_claimed_total');
  const ring = new RingPlacement(nodeIds);
  let starts = 0;
  let remoteLeases = 0;
  for (const r of results) {
    const s = r.starts;
    if (!s) continue;
    for (let i = 0; i < s.taskIds.length; i++) {
      starts++;
      if (ring.ownerOf(LEASE.name, s.taskIds[i] as string) !== nodeIds[s.via[i] as number]) remoteLeases++;
    }
  }
  const env = sum(envelopes);
  const req = sum(requests);
  return (
    `transport: ${req} requests carrying ${env} envelopes (${(env / Math.max(1, req)).toFixed(1)} each, ${(env / count).toFixed(2)} per task; ` +
    `per node ${nodeIds.map((id, i) => `${id} ${envelopes[i]}/${requests[i]}`).join(', ')}), ${retries} retries, ${failed} failed; ` +
    `claims per node ${nodeIds.map((id, i) => `${id} ${claimed[i]}`).join(', ')}; ` +
    `leases held where claimed: ${remoteLeases} of ${starts} claims (${((remoteLeases / Math.max(1, starts)) * 100).toFixed(1)} %) ` +
    `would have had theirs on another node by the ring (${2 * remoteLeases} envelopes saved); the ${env} sent are wheel placements and the rest`
  );
}

/** CPU time per process over a window: named groups of pids, plus Postgres, Redis and the harness. */
export class CpuWindow {
  private readonly startedMs = Date.now();
  private readonly harness = process.cpuUsage();
  private readonly stores = { postgres: pidsNamed('postgres'), redis: pidsNamed('redis-server') };
  private readonly before: Map<string, Map<number, number>>;

  constructor(private readonly groups: [string, number[]][]) {
    this.before = new Map([
      ...groups.map(([name, pids]): [string, Map<number, number>] => [name, cpuSnapshot(pids)]),
      ['postgres', cpuSnapshot(this.stores.postgres)],
      ['redis', cpuSnapshot(this.stores.redis)],
    ]);
  }

  /** CPU ms one named group used since the window began. */
  usedMs(name: string): number {
    const group = this.groups.find(([n]) => n === name);
    return group ? cpuDelta(this.before.get(name) ?? new Map(), cpuSnapshot(group[1])) : Number.NaN;
  }

  /** "CPU s over the window (ms per 1 000 tasks)" for every group, measured now. */
  note(tasks: number): string {
    const wallS = (Date.now() - this.startedMs) / 1000;
    // Backends started during the window (a pool growing) count from 0.
    const postgresNow = [...new Set([...this.stores.postgres, ...pidsNamed('postgres')])];
    const used: [string, number][] = [
      ...this.groups.map(([name, pids]): [string, number] => [
        name,
        cpuDelta(this.before.get(name) ?? new Map(), cpuSnapshot(pids)),
      ]),
      ['postgres', cpuDelta(this.before.get('postgres') ?? new Map(), cpuSnapshot(postgresNow))],
      ['redis', cpuDelta(this.before.get('redis') ?? new Map(), cpuSnapshot(this.stores.redis))],
      [
        'harness',
        (() => {
          const u = process.cpuUsage(this.harness);
          return (u.user + u.system) / 1000;
        })(),
      ],
    ];
    const total = used.reduce((n, [, ms]) => n + ms, 0);
    return (
      `CPU over ${wallS.toFixed(2)} s (s, ms per 1 000 tasks): ` +
      used.map(([name, ms]) => `${name} ${(ms / 1000).toFixed(2)} (${((ms / tasks) * 1000).toFixed(0)})`).join(', ') +
      `; all ${(total / 1000).toFixed(2)} s = ${(total / 1000 / wallS).toFixed(2)} cores busy`
    );
  }
}
