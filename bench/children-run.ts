/**
 * `npm run bench:children`: issue 30's first acceptance run. A parent spawns 10 000 children in
 * 10 requests of 1 000 and waits for them; a worker with ONE slot runs the parent, then every
 * child while the parent waits (were the waiting parent holding the slot, nothing could run),
 * then the parent once more, which pages through all 10 000 results. Three variants:
 * - `plain`;
 * - `kill`: once a third of the children are done, the node that holds the parent's DAG
 *   actor (the one counting its children) is SIGKILLed and started again;
 * - `retried`: the parent's first attempt spawns half and fails (retryable); its retry spawns
 *   all ten requests again, with the same child keys, and waits.
 * Each on Postgres + Redis (two nodes; the worker knows both) and on the embedded default (one
 * node on PGlite, restarted on its data directory), over the worker channel and over HTTP.
 * Checked: the parent ran exactly as planned (2 runs, 3 when retried), its last run saw 10 000
 * children with their results, there are exactly 10 000 children (no key twice), every child
 * succeeded. Prints one row per run; exit 1 on any failure. Bounded: each run 8 minutes, the
 * whole 60.
 *
 *   npm run bench:children [-- --children 10000 --only postgres/channel/kill]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { createClient, type WheelhouseClient } from '../src/client/index.js';
import { createWorker, type TaskContext, type Worker } from '../src/worker/index.js';
import { BENCH_ADMIN_TOKEN, authHeaders } from './auth.js';
import { killAllChildren } from './children.js';
import { alive, freePort, runNames, startBenchNode, type BenchNode } from './node-process.js';
import { sleep } from './time.js';

type Backend = 'postgres' | 'embedded';
type Transport = 'channel' | 'http';
type Variant = 'plain' | 'kill' | 'retried';

const PER_REQUEST = 1_000;
const RUN_LIMIT_MS = 8 * 60_000;
const WHOLE_LIMIT_MS = 60 * 60_000;

interface Row {
  run: string;
  ok: boolean;
  seconds: number;
  parentRuns: string;
  seen: string;
  children: number;
  succeeded: number;
  note: string;
}

/** The nodes of one run, restartable where the worker looks for them. */
class Nodes {
  nodes: BenchNode[] = [];
  private readonly names = runNames();
  private readonly secret = `children-run-${Math.random().toString(36).slice(2)}-0123456789abcdef`;
  private readonly dataDir: string | null;
  private ports: number[] = [];

  constructor(readonly backend: Backend) {
    this.dataDir = backend === 'embedded' ? mkdtempSync(join(tmpdir(), 'wh-children-')) : null;
  }

  async start(): Promise<void> {
    const count = this.backend === 'postgres' ? 2 : 1;
    this.ports = await Promise.all(Array.from({ length: count }, () => freePort()));
    this.nodes = await Promise.all(this.ports.map((_, i) => this.startOne(i)));
  }

  get urls(): string[] {
    return this.ports.map((p) => `http://127.0.0.1:${p}`);
  }

  /** SIGKILLs node `i` and starts it again on the same port (and data directory). */
  async killAndRestart(i: number): Promise<void> {
    const node = this.nodes[i] as BenchNode;
    process.kill(node.pid, 'SIGKILL');
    node.rss.stop();
    while (alive(node)) await sleep(5);
    this.nodes[i] = await this.startOne(i);
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.stop()));
    if (this.dataDir !== null) rmSync(this.dataDir, { recursive: true, force: true });
  }

  private startOne(i: number): Promise<BenchNode> {
    const flags =
      this.backend === 'postgres'
        ? ['--node-id', `n${i + 1}`, '--cluster-secret', this.secret, '--heartbeat-seconds', '1']
        : [];
    return startBenchNode(this.names, flags, this.dataDir ?? undefined, this.ports[i]);
  }
}

/** Which node holds the parent's DAG actor now (the one counting its children), if any does. */
async function holderOf(urls: readonly string[], parentId: string): Promise<number | null> {
  for (const url of urls) {
    const res = await request(`${url}/admin/actors/dag/${parentId}`, { headers: authHeaders() }).catch(() => null);
    if (res === null) continue;
    if (res.statusCode !== 200) {
      await res.body.dump();
      continue;
    }
    const body = (await res.body.json()) as { node?: string };
    const at = Number(/^n(\d+)$/.exec(body.node ?? '')?.[1]);
    return Number.isInteger(at) ? at - 1 : null;
  }
  return null;
}

async function runOnce(backend: Backend, transport: Transport, variant: Variant, total: number): Promise<Row> {
  const name = `${backend}/${transport}/${variant}`;
  const started = Date.now();
  const nodes = new Nodes(backend);
  const tag = Math.random().toString(36).slice(2, 8);
  const parentType = `acc.parent.${tag}`;
  const childType = `acc.child.${tag}`;
  const runs: string[] = [];
  let seen = '';
  let childrenDone = 0;
  let note = '';
  let worker: Worker | null = null;
  let client: WheelhouseClient | null = null;
  const requests = total / PER_REQUEST;
  try {
    await nodes.start();
    client = createClient({ url: nodes.urls[0] as string, ...(BENCH_ADMIN_TOKEN ? { token: BENCH_ADMIN_TOKEN } : {}) });
    const reader = client;
    const handler = async (ctx: TaskContext): Promise<unknown> => {
      if (ctx.taskType === childType) {
        childrenDone++;
        return { n: (ctx.payload as { n: number }).n };
      }
      runs.push(ctx.children === undefined ? `attempt ${ctx.attempt}` : `attempt ${ctx.attempt} resumed`);
      if (ctx.children !== undefined) {
        let count = 0;
        let withResult = 0;
        for await (const child of reader.children.list(ctx.taskId, { limit: 1_000 })) {
          count++;
          if (typeof (child.result as { n?: unknown } | null)?.n === 'number') withResult++;
        }
        seen = `${count} listed, ${withResult} with results; summary ${JSON.stringify(ctx.children)}`;
        return { count, withResult };
      }
      const spawnNow = variant === 'retried' && ctx.attempt === 1 ? requests / 2 : requests;
      for (let r = 0; r < spawnNow; r++) {
        await ctx.spawn(
          Array.from({ length: PER_REQUEST }, (_, i) => ({
            taskType: childType,
            payload: { n: r * PER_REQUEST + i },
            childKey: `c-${r * PER_REQUEST + i}`,
          })),
        );
      }
      if (spawnNow < requests) throw Object.assign(new Error('spawned half, then failed'), { retryable: true });
      return ctx.waitForChildren();
    };
    worker = createWorker({
      urls: nodes.urls,
      transport,
      concurrency: 1,
      taskTypes: [parentType, childType],
      handler,
      onError: () => undefined,
      pollWaitMs: 1_000,
      ...(BENCH_ADMIN_TOKEN ? { token: BENCH_ADMIN_TOKEN } : {}),
    });
    worker.start();
    const { taskId } = await client.submit({ taskType: parentType, maxRetries: 2 });
    let killed = variant !== 'kill';
    const until = started + RUN_LIMIT_MS;
    let status = '';
    while (Date.now() < until) {
      if (!killed && childrenDone >= total / 3) {
        const at = (await holderOf(nodes.urls, taskId)) ?? nodes.nodes.length - 1;
        const t0 = Date.now();
        await nodes.killAndRestart(at);
        note = `n${at + 1} (holding the parent's DAG actor) killed at ${childrenDone} children done, back in ${((Date.now() - t0) / 1000).toFixed(1)} s`;
        killed = true;
      }
      status = (await client.get(taskId).catch(() => null))?.status ?? status;
      if (['succeeded', 'failed', 'cancelled'].includes(status)) break;
      await sleep(250);
    }
    const listed: { key: string | null; status: string }[] = [];
    for await (const child of client.children.list(taskId, { limit: 1_000 }))
      listed.push({ key: child.childKey, status: child.status });
    const keys = new Set(listed.map((c) => c.key));
    const succeeded = listed.filter((c) => c.status === 'succeeded').length;
    const expectedRuns = variant === 'retried' ? 3 : 2;
    const ok =
      status === 'succeeded' &&
      runs.length === expectedRuns &&
      (runs.at(-1) ?? '').endsWith('resumed') &&
      seen.startsWith(`${total} listed, ${total} with results`) &&
      listed.length === total &&
      keys.size === total &&
      succeeded === total;
    return {
      run: name,
      ok,
      seconds: (Date.now() - started) / 1000,
      parentRuns: runs.join(', '),
      seen,
      children: listed.length,
      succeeded,
      note: status === 'succeeded' ? note : `${note} parent ${status || 'unknown'} at the limit`.trim(),
    };
  } catch (error) {
    return {
      run: name,
      ok: false,
      seconds: (Date.now() - started) / 1000,
      parentRuns: runs.join(', '),
      seen,
      children: 0,
      succeeded: 0,
      note: `error: ${error instanceof Error ? error.message : String(error)}`.slice(0, 300),
    };
  } finally {
    await worker?.stop({ timeoutMs: 2_000 }).catch(() => undefined);
    await nodes.stop();
  }
}

const { values } = parseArgs({
  options: {
    children: { type: 'string', default: '10000' },
    only: { type: 'string' },
  },
});
const total = Number(values.children);
if (!Number.isInteger(total) || total < PER_REQUEST || total % PER_REQUEST !== 0 || (total / PER_REQUEST) % 2 !== 0) {
  process.stderr.write(`--children must be an even number of thousands, got ${values.children}\n`);
  process.exit(2);
}
const hard = setTimeout(() => {
  process.stderr.write('hard limit of 60 minutes reached\n');
  killAllChildren();
  process.exit(1);
}, WHOLE_LIMIT_MS);
hard.unref();

const rows: Row[] = [];
for (const backend of ['postgres', 'embedded'] as const) {
  for (const transport of ['channel', 'http'] as const) {
    for (const variant of ['plain', 'kill', 'retried'] as const) {
      const name = `${backend}/${transport}/${variant}`;
      if (values.only !== undefined && !name.includes(values.only)) continue;
      const row = await runOnce(backend, transport, variant, total);
      rows.push(row);
      process.stdout.write(
        `${row.ok ? 'ok  ' : 'FAIL'} ${row.run.padEnd(26)} ${row.seconds.toFixed(1).padStart(6)} s  runs: ${row.parentRuns}; seen: ${row.seen}; children ${row.children}, succeeded ${row.succeeded}${row.note ? `; ${row.note}` : ''}\n`,
      );
    }
  }
}
clearTimeout(hard);
process.exit(rows.every((r) => r.ok) ? 0 : 1);
