import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Pool, request } from 'undici';
import { alive, startBenchNode, type BenchNode } from './node-process.js';
import { BATCH_SIZE, type SubmitOutcome } from './submit.js';
import { sleep } from './time.js';
import { authHeaders } from './auth.js';

/**
 * Several `wheelhouse node` processes forming one cluster on one Postgres schema and one
 * Redis prefix (each its own id and port), for the workloads that measure the cluster:
 * W1 on 3 nodes and `npm run chaos`. Also what those need around it: the cluster status,
 * submission spread over the nodes, metrics scraping and per-process CPU time.
 */

/** One node of a bench cluster. */
export interface ClusterNode extends BenchNode {
  readonly nodeId: string;
}

export interface BenchCluster {
  readonly nodes: readonly ClusterNode[];
  readonly schema: string;
  readonly redisPrefix: string;
  /** Stops every node still running (SIGTERM, then SIGKILL after 15 s), in parallel. */
  stop(): Promise<void>;
}

export interface ClusterOptions {
  /** Membership heartbeat, seconds. @default 1 */
  heartbeatSeconds?: number;
  /** A node silent this long is out of the ring, seconds. @default 5 (the node's default) */
  failureTimeoutSeconds?: number;
  /** More `wheelhouse node` flags, for every node. */
  extraFlags?: readonly string[];
}

/**
 * Starts `count` nodes (`n1` … `n<count>`) of one cluster in parallel and resolves once each
 * answers /readyz. If one fails to start, the others are stopped and the error is thrown.
 */
export async function startBenchCluster(
  names: { schema: string; redisPrefix: string },
  count: number,
  { heartbeatSeconds = 1, failureTimeoutSeconds = 5, extraFlags = [] }: ClusterOptions = {},
): Promise<BenchCluster> {
  const secret = randomBytes(24).toString('hex');
  const ids = Array.from({ length: count }, (_, i) => `n${i + 1}`);
  const settled = await Promise.allSettled(
    ids.map(async (nodeId): Promise<ClusterNode> => {
      const flags = [
        '--node-id',
        nodeId,
        '--cluster-secret',
        secret,
        '--heartbeat-seconds',
        String(heartbeatSeconds),
        '--failure-timeout-seconds',
        String(failureTimeoutSeconds),
        ...extraFlags,
      ];
      const node = await startBenchNode(names, flags);
      return Object.assign(node, { nodeId });
    }),
  );
  const nodes = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const stop = async (): Promise<void> => {
    await Promise.all(nodes.map((n) => n.stop()));
  };
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) {
    await stop();
    throw failed.reason;
  }
  return { nodes, schema: names.schema, redisPrefix: names.redisPrefix, stop };
}

/** `GET /admin/cluster`, the parts the harness reads. */
export interface ClusterView {
  node_id: string;
  nodes: { node_id: string; url: string; state: string; live: boolean }[];
  ring: { nodes: string[]; partitions_per_node: Record<string, number>; spread: string };
  partitions: { partition: number; owner: string; held_by: string | null; epoch: number | null }[];
}

export async function clusterView(url: string, timeoutMs = 2_000): Promise<ClusterView> {
  const res = await request(`${url}/admin/cluster`, {
    headers: authHeaders(),
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
  if (res.statusCode !== 200)
    throw new Error(`GET ${url}/admin/cluster answered ${res.statusCode}: ${(await res.body.text()).slice(0, 300)}`);
  return (await res.body.json()) as ClusterView;
}

/**
 * Waits until every node routes by a ring of all the cluster's nodes and every partition's
 * fencing row is held by its ring owner, as each node sees it. Answers how long that took, ms,
 * and the first unsettled state seen (empty when settled at once); throws after `limitMs`
 * with the last view that was not settled.
 */
export async function waitSettled(
  cluster: BenchCluster,
  limitMs = 60_000,
): Promise<{ settledMs: number; firstUnsettled: string }> {
  const started = Date.now();
  const all = cluster.nodes
    .map((n) => n.nodeId)
    .sort()
    .join(',');
  let first = '';
  let last = '';
  while (Date.now() - started < limitMs) {
    const views = await Promise.all(cluster.nodes.map((n) => clusterView(n.url).catch((e: unknown) => String(e))));
    const unsettled = views.flatMap((v) => {
      if (typeof v === 'string') return [v];
      if ([...v.ring.nodes].sort().join(',') !== all) return [`${v.node_id} routes by ring ${v.ring.nodes.join(',')}`];
      const off = v.partitions.filter((p) => p.held_by !== p.owner);
      return off.length === 0
        ? []
        : [
            `${v.node_id} sees ${off.length} partitions held by a node other than their owner (${off
              .slice(0, 4)
              .map((p) => `${p.partition} owner ${p.owner} held by ${p.held_by} epoch ${p.epoch}`)
              .join('; ')})`,
          ];
    });
    if (unsettled.length === 0) return { settledMs: Date.now() - started, firstUnsettled: first };
    last = unsettled.join(' | ');
    if (first === '') first = `${last} (at ${Date.now() - started} ms)`;
    await sleep(200);
  }
  throw new Error(`the cluster did not settle within ${limitMs} ms: ${last}`);
}

/** SIGKILLs one node and resolves once its process is gone. Returns Date.now() at the kill. */
export async function killNode(node: ClusterNode): Promise<number> {
  const killedMs = Date.now();
  process.kill(node.pid, 'SIGKILL');
  node.rss.stop();
  while (alive(node)) await sleep(5);
  return killedMs;
}

/**
 * Like `submitTasks`, but batch i goes to `urls[i % urls.length]` (round robin), still
 * `parallel` requests in flight in all, so one node and several nodes are offered the same
 * load. 429 and 503 are waited out per `Retry-After` (counted); any other failure throws.
 */
export async function submitSpread(
  urls: readonly string[],
  count: number,
  taskAt: (i: number) => Record<string, unknown>,
  { parallel = 4, onCreated }: { parallel?: number; onCreated?(from: number, ids: string[], via: number): void } = {},
): Promise<SubmitOutcome> {
  const pools = urls.map((url) => new Pool(url, { connections: parallel, pipelining: 1 }));
  let nextBatch = 0;
  let retried = 0;
  const batches = Math.ceil(count / BATCH_SIZE);
  const firstSubmitMs = Date.now();
  const lane = async (): Promise<void> => {
    while (nextBatch < batches) {
      const batch = nextBatch++;
      const via = batch % pools.length;
      const from = batch * BATCH_SIZE;
      const to = Math.min(count, from + BATCH_SIZE);
      const tasks = [];
      for (let i = from; i < to; i++) tasks.push(taskAt(i));
      const body = JSON.stringify({ tasks });
      for (let attempt = 0; ; attempt++) {
        const res = await (pools[via] as Pool).request({
          path: '/api/tasks/batch',
          method: 'POST',
          headers: { 'content-type': 'application/json', ...authHeaders() },
          body,
        });
        const text = await res.body.text();
        if ((res.statusCode === 429 || res.statusCode === 503) && attempt < 50) {
          retried++;
          const after = Number(res.headers['retry-after']);
          await sleep(Number.isFinite(after) ? after * 1000 : 500);
          continue;
        }
        if (res.statusCode !== 201 && res.statusCode !== 200)
          throw new Error(`POST ${urls[via]}/api/tasks/batch answered ${res.statusCode}: ${text.slice(0, 500)}`);
        onCreated?.(
          from,
          (JSON.parse(text) as { tasks: { task_id: string }[] }).tasks.map((t) => t.task_id),
          via,
        );
        break;
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(parallel, batches) }, lane));
  } finally {
    await Promise.all(pools.map((p) => p.close()));
  }
  return { firstSubmitMs, lastAnsweredMs: Date.now(), retried };
}

/** A node's /metrics as `name{labels}` → value (label order as the node writes it). */
export async function scrapeMetrics(url: string, timeoutMs = 5_000): Promise<Map<string, number>> {
  const res = await request(`${url}/metrics`, {
    headers: authHeaders(),
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
  const text = await res.body.text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    out.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return out;
}

/** A metric's value from a scrape, 0 when absent. `labels` as the node renders them, e.g. `counter="envelopes"`. */
export function metric(scrape: Map<string, number>, name: string, labels?: string): number {
  return scrape.get(labels === undefined ? name : `${name}{${labels}}`) ?? 0;
}

let ticksPerSecond: number | null = null;

/** CPU time (user + system) a process has used so far, ms, from /proc/<pid>/stat; NaN when it is gone. */
export function cpuMs(pid: number): number {
  ticksPerSecond ??= clockTicks();
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces; the fields after its ')' are space-separated.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    return ((Number(fields[11]) + Number(fields[12])) / ticksPerSecond) * 1000;
  } catch {
    return Number.NaN;
  }
}

function clockTicks(): number {
  try {
    const n = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    return Number.isFinite(n) && n > 0 ? n : 100;
  } catch {
    return 100;
  }
}

/** The pids of processes whose command name is `name` (e.g. `postgres`, `redis-server`), from /proc. */
export function pidsNamed(name: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === name) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** CPU time of each of `pids` now, ms (processes that are gone are left out). */
export function cpuSnapshot(pids: readonly number[]): Map<number, number> {
  const out = new Map<number, number>();
  for (const pid of pids) {
    const ms = cpuMs(pid);
    if (Number.isFinite(ms)) out.set(pid, ms);
  }
  return out;
}

/** CPU used between two snapshots, ms, summed; a process only in `after` counts from 0. */
export function cpuDelta(before: ReadonlyMap<number, number>, after: ReadonlyMap<number, number>): number {
  let sum = 0;
  for (const [pid, ms] of after) sum += ms - (before.get(pid) ?? 0);
  return sum;
}
