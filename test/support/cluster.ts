/**
 * A cluster of real node processes (the built CLI, `wheelhouse node`) on one fresh Postgres
 * schema and Redis key prefix, for the tests that kill, pause, stop and add nodes
 * (test/e2e/cluster*.test.ts). The worker that counts executions is in cluster-worker.ts.
 */
import { randomBytes } from 'node:crypto';
import { partitionOf } from '../../src/lib/ids.js';
import { RingPlacement } from '../../src/runtime/ring.js';
import { killGroup } from './children.js';
import { TEST_POSTGRES_URL, TEST_REDIS_URL } from './nodes.js';
import { eventually } from './waits.js';
import { dropTestStores, requireBuiltCli, startCliProcess, type CliProcess } from './processes.js';

/** `GET /admin/cluster`, as the node answers it. */
export interface ClusterStatusJson {
  node_id: string;
  heartbeat_ms: number | null;
  failure_timeout_ms: number | null;
  ring_changes: number;
  nodes: {
    node_id: string;
    url: string;
    state: 'live' | 'leaving' | 'left';
    live: boolean;
    self: boolean;
    started_at: string | null;
    heartbeat_at: string | null;
    heartbeat_age_ms: number | null;
    redis_reachable: boolean | null;
  }[];
  ring: { nodes: string[]; vnodes_per_node: number; partitions_per_node: Record<string, number>; spread: string };
  partitions: { partition: number; owner: string; held_by: string | null; epoch: number | null }[];
}

/** One node process of the cluster. */
export interface ClusterNode {
  readonly id: string;
  readonly url: string;
  readonly proc: CliProcess;
  /** False once it was killed or has exited. */
  alive: boolean;
  /** True between `stop` (SIGSTOP) and `cont` (SIGCONT). */
  paused: boolean;
}

export interface ClusterOptions {
  /** Nodes started at once, ids `n1`…. @default 3 */
  nodes?: number;
  /** Wheel partitions. @default 16 */
  partitions?: number;
  /** @default 0.5 */
  heartbeatSeconds?: number;
  /** @default 2 */
  failureTimeoutSeconds?: number;
  /** More CLI flags for every node, e.g. `['--cron-advance-spread-seconds', '0']`. */
  extraArgs?: string[];
  /** More CLI flags for one node, by id, after `extraArgs`, e.g. `{ n2: ['--test-clock-offset-seconds', '3'] }`. */
  nodeArgs?: Record<string, string[]>;
  /** Names the schema and key prefix (`cl_<label>_<random>`). @default 'cluster' */
  label?: string;
  /** How long to wait for the first ring over all nodes. @default 30 000 */
  readyTimeoutMs?: number;
  /**
   * The admin key the harness sends on its own calls (`status`, `api`, the ring waits), for a
   * cluster started with auth on (`--admin-token-file` in `extraArgs`). @default none
   */
  adminToken?: string;
  /** The cli.js to run (another build). @default `$WHEELHOUSE_TEST_CLI`, else `CLI` (this checkout's dist) */
  cli?: string;
  /**
   * Runs each node in a network of its own (test/support/netns.ts): its address, the command
   * that starts it there, and the stores as that network reaches them. @default loopback
   */
  network?: ClusterNetwork;
}

/** Where the nodes of a cluster run when not all on loopback (a `TestNetwork`). */
export interface ClusterNetwork {
  host(id: string): string;
  launcher(id: string): string[];
  readonly postgresUrl: string;
  readonly redisUrl: string;
}

/** The result of a wait for the ring. */
export interface RingWait {
  /** From the call to the answer that satisfied it, ms. */
  elapsedMs: number;
  /** When the satisfying round of requests was sent, ms since the epoch (the condition held by its end). */
  roundStartMs: number;
  /** When its last answer arrived, ms since the epoch. */
  atMs: number;
  statuses: ClusterStatusJson[];
}

const REQUEST_TIMEOUT_MS = 3_000;

/** Calls a node's API with JSON and a timeout (a paused node never answers). */
export async function call<T = unknown>(
  url: string,
  method: string,
  path: string,
  body?: unknown,
  timeoutMs = REQUEST_TIMEOUT_MS,
  token?: string,
): Promise<{ status: number; body: T }> {
  const headers: Record<string, string> = body === undefined ? {} : { 'content-type': 'application/json' };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  const res = await fetch(`${url}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text.length > 0 ? JSON.parse(text) : null;
  } catch {
    // not JSON (the metrics text): leave it
  }
  return { status: res.status, body: parsed as T };
}

/**
 * Parses Prometheus text: the sum of the series of `name` whose labels include `labels` (0 when
 * the metric is there but no series carries them, as a labelled counter before its first
 * count). Throws when the text has no metric `name` at all: a renamed or removed metric must
 * not read as "nothing happened".
 */
export function metricValue(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  let declared = false;
  for (const line of text.split('\n')) {
    if (line.startsWith(`# TYPE ${name} `)) declared = true;
    if (line.startsWith('#') || !line.startsWith(name)) continue;
    const m = /^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = new Map<string, string>();
    for (const pair of (m[2] ?? '').matchAll(/([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      have.set(pair[1]!, pair[2]!);
    declared = true;
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) sum += Number(m[3]);
  }
  if (!declared) {
    const names = [...new Set([...text.matchAll(/^# TYPE (\S+)/gm)].map((x) => x[1]))];
    throw new Error(`no metric ${name} in the exposition (it has ${names.length}: ${names.join(', ')})`);
  }
  return sum;
}

export class ProcessCluster {
  readonly nodes: ClusterNode[] = [];
  readonly schema: string;
  readonly prefix: string;
  readonly secret: string;
  readonly partitions: number;
  readonly heartbeatSeconds: number;
  readonly failureTimeoutSeconds: number;
  private readonly extraArgs: string[];
  private readonly nodeArgs: Record<string, string[]>;
  private readonly cli: string | undefined;
  private readonly token: string | undefined;
  private readonly network: ClusterNetwork | undefined;
  private closed = false;

  constructor(options: ClusterOptions = {}) {
    const suffix = randomBytes(4).toString('hex');
    const label = (options.label ?? 'cluster').toLowerCase().replace(/[^a-z0-9_]/g, '_');
    this.schema = `cl_${label}_${suffix}`;
    this.prefix = `cl${label}${suffix}`;
    this.secret = randomBytes(24).toString('hex');
    this.partitions = options.partitions ?? 16;
    this.heartbeatSeconds = options.heartbeatSeconds ?? 0.5;
    this.failureTimeoutSeconds = options.failureTimeoutSeconds ?? 2;
    this.extraArgs = options.extraArgs ?? [];
    this.nodeArgs = options.nodeArgs ?? {};
    // WHEELHOUSE_TEST_CLI runs the cluster tests against another build (a bisect, a patched copy).
    this.cli = options.cli ?? process.env.WHEELHOUSE_TEST_CLI;
    this.token = options.adminToken;
    this.network = options.network;
  }

  /** The configured failure timeout, ms. */
  get failureTimeoutMs(): number {
    return this.failureTimeoutSeconds * 1000;
  }

  node(id: string): ClusterNode {
    const node = this.nodes.find((n) => n.id === id);
    if (!node) throw new Error(`no node ${id} in this cluster (${this.nodes.map((n) => n.id).join(', ')})`);
    return node;
  }

  /** Nodes alive and not paused. */
  running(): ClusterNode[] {
    return this.nodes.filter((n) => n.alive && !n.paused);
  }

  ids(nodes: ClusterNode[] = this.running()): string[] {
    return nodes.map((n) => n.id);
  }

  args(id: string): string[] {
    return [
      'node',
      '--node-id',
      id,
      '--port',
      '0',
      '--host',
      this.network?.host(id) ?? '127.0.0.1',
      // Off loopback a node asks for an admin key unless told not to: the test network is
      // the test's own.
      ...(this.network === undefined ? [] : ['--insecure']),
      '--postgres-url',
      this.network?.postgresUrl ?? TEST_POSTGRES_URL,
      '--postgres-schema',
      this.schema,
      '--redis-url',
      this.network?.redisUrl ?? TEST_REDIS_URL,
      '--redis-prefix',
      this.prefix,
      '--cluster-secret',
      this.secret,
      '--heartbeat-seconds',
      String(this.heartbeatSeconds),
      '--failure-timeout-seconds',
      String(this.failureTimeoutSeconds),
      '--partitions',
      String(this.partitions),
      '--builtin-executors',
      'false',
      '--postgres-pool-size',
      '6',
      '--log-level',
      'warn',
      ...this.extraArgs,
      ...(this.nodeArgs[id] ?? []),
    ];
  }

  /** Starts a node process; resolves once it printed that it listens (it has joined by then). */
  async addNode(id: string): Promise<ClusterNode> {
    if (this.closed) throw new Error('the cluster is closed');
    if (this.nodes.some((n) => n.id === id && n.alive)) throw new Error(`node ${id} already runs`);
    const proc = await startCliProcess(this.args(id), {
      ...(this.cli === undefined ? {} : { cli: this.cli }),
      ...(this.network === undefined ? {} : { launcher: this.network.launcher(id) }),
    });
    const node: ClusterNode = { id, url: proc.url, proc, alive: true, paused: false };
    void proc.exited().then(() => {
      node.alive = false;
      node.paused = false;
    });
    this.nodes.push(node);
    return node;
  }

  /** SIGKILL: a crash. Resolves once the process is gone. */
  async kill9(id: string): Promise<void> {
    const node = this.node(id);
    if (!node.alive) return;
    node.alive = false;
    killGroup(node.proc.child, 'SIGKILL');
    await node.proc.exited();
  }

  /** SIGSTOP: the process freezes (no heartbeats, no timers) until `cont`. */
  stop(id: string): void {
    const node = this.node(id);
    node.paused = true;
    node.proc.child.kill('SIGSTOP');
  }

  /** SIGCONT. */
  cont(id: string): void {
    const node = this.node(id);
    node.proc.child.kill('SIGCONT');
    node.paused = false;
  }

  /** SIGTERM: a graceful leave. Resolves on exit with how long the exit took from the signal. */
  async term(
    id: string,
  ): Promise<{ exitMs: number; code: number | null; signal: NodeJS.Signals | null; sentAtMs: number }> {
    const node = this.node(id);
    const sentAtMs = Date.now();
    node.proc.child.kill('SIGTERM');
    const { code, signal } = await node.proc.exited();
    node.alive = false;
    return { exitMs: Date.now() - sentAtMs, code, signal, sentAtMs };
  }

  /** `GET /admin/cluster` on one node. */
  async status(id: string): Promise<ClusterStatusJson> {
    const r = await call<ClusterStatusJson>(
      this.node(id).url,
      'GET',
      '/admin/cluster',
      undefined,
      undefined,
      this.token,
    );
    if (r.status !== 200) throw new Error(`GET /admin/cluster on ${id}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body;
  }

  /** Calls the API of node `id`. */
  api<T = unknown>(
    id: string,
    method: string,
    path: string,
    body?: unknown,
    timeoutMs?: number,
  ): Promise<{ status: number; body: T }> {
    return call<T>(this.node(id).url, method, path, body, timeoutMs, this.token);
  }

  /**
   * Waits until each of `ids` answers `/admin/cluster` with exactly `ids` in its ring, all of
   * them agreeing on every partition's owner, and every partition held (the fencing row) by
   * that owner. Polls every `pollMs`.
   */
  async waitForRing(ids: string[], timeoutMs = 30_000, pollMs = 50): Promise<RingWait> {
    const want = [...ids].sort();
    const start = Date.now();
    let roundStartMs = start;
    let last = 'no answer yet';
    const statuses = await eventually(
      async () => {
        roundStartMs = Date.now();
        const statuses = await Promise.all(want.map((id) => this.status(id)));
        const problem = ringProblem(want, statuses);
        if (problem === null) return statuses;
        last = problem;
        return undefined;
      },
      timeoutMs,
      'the ring',
      pollMs,
    ).catch((error: unknown) => {
      throw new Error(
        `the ring did not settle on [${want.join(', ')}] within ${timeoutMs} ms: ${last} (${String(error)})\n${this.tails()}`,
      );
    });
    return { elapsedMs: Date.now() - start, roundStartMs, atMs: Date.now(), statuses };
  }

  /** The ring's owner of wheel partition `p`, as a running node sees it. */
  async ownerOfPartition(p: number, via?: string): Promise<string> {
    const status = await this.status(via ?? this.ids()[0]!);
    const row = status.partitions.find((x) => x.partition === p);
    if (!row) throw new Error(`no partition ${p} in /admin/cluster`);
    return row.owner;
  }

  /**
   * The ring's owner of any actor, computed from a running node's ring with the same code the
   * nodes route by (plain consistent hashing for every kind but the wheel partitions).
   */
  async ownerOfActor(kind: string, key: string, via?: string): Promise<string> {
    const status = await this.status(via ?? this.ids()[0]!);
    // The wheel partitions are spread with bounded loads: the node's own answer is the one.
    if (kind === 'wheel') return this.ownerOfPartition(Number(key), via);
    return new RingPlacement(status.ring.nodes, { vnodesPerNode: status.ring.vnodes_per_node }).ownerOf(kind, key);
  }

  /** The wheel partition of a task id in this cluster. */
  partitionOf(taskId: string): number {
    return partitionOf(taskId, this.partitions);
  }

  /** One metric of node `id`: the sum of its series that carry `labels` (see `metricValue`; throws when the node has no such metric). */
  async metric(id: string, name: string, labels?: Record<string, string>): Promise<number> {
    const r = await call<string>(this.node(id).url, 'GET', '/metrics', undefined, undefined, this.token);
    if (r.status !== 200) throw new Error(`GET /metrics on ${id}: ${r.status}`);
    return metricValue(r.body, name, labels);
  }

  /** The tail of every node's output, for failure messages. */
  tails(chars = 4_000): string {
    return this.nodes
      .map(
        (n) =>
          `--- ${n.id} (${n.alive ? (n.paused ? 'paused' : 'alive') : 'gone'}) ---\n${n.proc.output().slice(-chars)}`,
      )
      .join('\n');
  }

  /** Kills every node and drops the schema and the Redis keys. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all(
      this.nodes.map(async (n) => {
        killGroup(n.proc.child, 'SIGKILL');
        n.alive = false;
        await n.proc.exited();
      }),
    );
    await dropTestStores(this.schema, this.prefix);
  }
}

/** What is wrong with these views of the ring, or null when they show a settled ring over `want`. */
function ringProblem(want: string[], statuses: ClusterStatusJson[]): string | null {
  const first = statuses[0];
  for (const s of statuses) {
    const ring = [...s.ring.nodes].sort();
    if (ring.join(',') !== want.join(',')) return `${s.node_id} routes by [${ring.join(', ')}]`;
    for (const p of s.partitions) {
      if (!want.includes(p.owner)) return `${s.node_id}: partition ${p.partition} owned by ${p.owner}`;
      if (p.held_by !== p.owner)
        return `${s.node_id}: partition ${p.partition} owned by ${p.owner}, held by ${p.held_by ?? 'nobody'}`;
      const other = first?.partitions.find((x) => x.partition === p.partition);
      if (other && other.owner !== p.owner)
        return `partition ${p.partition}: ${first!.node_id} says ${other.owner}, ${s.node_id} says ${p.owner}`;
    }
  }
  return null;
}

/** Starts `nodes` nodes (the first alone, so it applies the migrations) and waits for their ring. */
export async function startCluster(options: ClusterOptions = {}): Promise<ProcessCluster> {
  requireBuiltCli(options.cli);
  const cluster = new ProcessCluster(options);
  const n = options.nodes ?? 3;
  try {
    await cluster.addNode('n1');
    await Promise.all(Array.from({ length: n - 1 }, (_, i) => cluster.addNode(`n${i + 2}`)));
    await cluster.waitForRing(cluster.ids(), options.readyTimeoutMs ?? 30_000);
  } catch (error) {
    await cluster.close().catch(() => undefined);
    throw error;
  }
  return cluster;
}

/**
 * Slack added to the timing bounds the issue sets (failover within the failure timeout + 1 s,
 * a hand-over within 1 s), for the test worker's polling and a loaded machine, ms.
 */
export const TOLERANCE_MS = 1000;

/**
 * The node a test stops or kills: the one other than `spare` (which the test keeps talking to)
 * that owns the most partitions, so the most work moves.
 */
export function pickVictim(status: ClusterStatusJson, spare = 'n1'): string {
  const candidates = Object.entries(status.ring.partitions_per_node).filter(([id]) => id !== spare);
  candidates.sort((x, y) => y[1] - x[1]);
  return candidates[0]![0];
}

/** An actor a node's log says was fenced: its warn line for a refused stale write. */
export interface FencedActor {
  kind: string;
  key: string;
  /** The refusal, ending with the write refused in parentheses (`(ready.push).`). */
  reason: string;
  atMs: number;
}

/** The actors a node's log says were fenced, in log order. */
export function fencedActors(log: string): FencedActor[] {
  const actors: FencedActor[] = [];
  for (const line of log.split('\n')) {
    // The tail of the output may start mid-line: only whole JSON lines count.
    if (!line.startsWith('{') || !line.includes('a stale activation was fenced')) continue;
    const entry = JSON.parse(line) as { actor?: { kind?: string; key?: string }; reason?: string; time?: number };
    if (entry.actor?.kind !== undefined && entry.actor.key !== undefined)
      actors.push({ kind: entry.actor.kind, key: entry.actor.key, reason: entry.reason ?? '', atMs: entry.time ?? 0 });
  }
  return actors;
}
