/**
 * `npm run bench:bulk-retry`: issue 30's third acceptance run. 100 000 tasks that failed for
 * good are retried by one operation (`POST /api/operations`, action `retry`), while a probe
 * keeps submitting one task every 50 ms that a worker on the channel runs at once. Measured:
 * the probe's submit latency (the POST's round trip) and its claim lag (submit answered →
 * handler start, the same clock) for 20 s with nothing else going on, then while the operation
 * runs (after a CHECKPOINT and a 5 s settle); the operation's progress as `GET /api/operations/{id}` shows it each second; its
 * length. The bar: submit and claim p99 during the operation within 2× of idle. On Postgres +
 * Redis and on the embedded default.
 *
 *   npm run bench:bulk-retry [-- --tasks 100000 --only postgres]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { request } from 'undici';
import { createWorker, type TaskContext, type Worker } from '../src/worker/index.js';
import { BENCH_ADMIN_TOKEN, authHeaders } from './auth.js';
import { killAllChildren } from './children.js';
import { runNames, startBenchNode, type BenchNode } from './node-process.js';
import { percentiles } from './stats.js';
import { POSTGRES_URL } from './stores.js';
import { submitTasks } from './submit.js';
import { sleep } from './time.js';

const PROBE_EVERY_MS = 50;
const IDLE_MS = 20_000;
/**
 * Before the idle window: making 100 000 failed tasks leaves Postgres writing them back for a
 * while, and that landed in the idle window (its p99 moved 8–45 ms from run to run). A
 * CHECKPOINT writes it out now; then a short quiet wait.
 */
const SETTLE_MS = 5_000;
/**
 * The embedded node vacuums every 30 s what autovacuum would (decision 0046); its first pass
 * after 100 000 failed tasks is a catch-up of ~250 ms that otherwise fell into the idle window
 * (idle p99 82 ms in one run). The embedded settle waits one pass out.
 */
const EMBEDDED_SETTLE_MS = 35_000;
const WHOLE_LIMIT_MS = 40 * 60_000;

async function call<T>(
  url: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: T }> {
  const res = await request(`${url}${path}`, {
    method: method as 'GET',
    headers: { ...authHeaders(), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    headersTimeout: 60_000,
    bodyTimeout: 60_000,
  });
  const text = await res.body.text();
  return { status: res.statusCode, body: (text === '' ? null : JSON.parse(text)) as T };
}

/** Claims every task of `type` over HTTP and fails it for good; answers how many. */
async function failAll(url: string, type: string, count: number): Promise<number> {
  let failed = 0;
  while (failed < count) {
    const polled = await call<{ tasks: { task_id: string; lease_token: string }[] }>(url, 'POST', '/api/workers/poll', {
      worker_id: 'bulk-failer',
      task_types: [type],
      max_tasks: 1_000,
      wait_ms: 2_000,
    });
    if (polled.status !== 200) throw new Error(`poll answered ${polled.status}: ${JSON.stringify(polled.body)}`);
    const tasks = polled.body.tasks;
    if (tasks.length === 0) continue;
    const done = await call(url, 'POST', '/api/workers/complete', {
      results: tasks.map((t) => ({
        task_id: t.task_id,
        lease_token: t.lease_token,
        status: 'failed',
        error: 'the downstream was down',
        retryable: false,
      })),
    });
    if (done.status !== 200) throw new Error(`complete answered ${done.status}: ${JSON.stringify(done.body)}`);
    failed += tasks.length;
  }
  return failed;
}

interface Phase {
  submitMs: number[];
  claimMs: number[];
}

/** Submits one probe task every 50 ms until `stop()` says so; the worker records their claim lag. */
async function probe(url: string, type: string, starts: Map<string, number>, stop: () => boolean): Promise<Phase> {
  const submitMs: number[] = [];
  const answered = new Map<string, number>();
  const inFlight: Promise<void>[] = [];
  while (!stop()) {
    const t0 = performance.now();
    inFlight.push(
      call<{ task_id: string }>(url, 'POST', '/api/tasks', { task_type: type }).then((r) => {
        const t1 = performance.now();
        submitMs.push(t1 - t0);
        if (r.status === 201) answered.set(r.body.task_id, t1);
      }),
    );
    await sleep(PROBE_EVERY_MS);
  }
  await Promise.all(inFlight);
  const until = Date.now() + 10_000;
  while (Date.now() < until && [...answered.keys()].some((id) => !starts.has(id))) await sleep(50);
  const claimMs = [...answered].flatMap(([id, at]) => {
    const started = starts.get(id);
    return started === undefined ? [] : [Math.max(0, started - at)];
  });
  return { submitMs, claimMs };
}

async function checkpoint(): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    await client.query('CHECKPOINT');
  } finally {
    await client.end();
  }
}

function p(values: number[], q: number): number {
  return values.length === 0 ? NaN : (percentiles(values, [q])[0] as number);
}

async function runOnce(backend: 'postgres' | 'embedded', count: number): Promise<boolean> {
  const dataDir = backend === 'embedded' ? mkdtempSync(join(tmpdir(), 'wh-bulk-')) : undefined;
  let node: BenchNode | null = null;
  const tag = Math.random().toString(36).slice(2, 8);
  const failedType = `bulk.failed.${tag}`;
  const probeType = `bulk.probe.${tag}`;
  const starts = new Map<string, number>();
  let probeWorker: Worker | null = null;
  try {
    node = await startBenchNode(runNames(), nodeFlags, dataDir);
    probeWorker = createWorker({
      url: node.url,
      transport: 'channel',
      concurrency: 50,
      taskTypes: [probeType],
      handler: (ctx: TaskContext) => {
        starts.set(ctx.taskId, performance.now());
        return Promise.resolve(null);
      },
      onError: () => undefined,
      ...(BENCH_ADMIN_TOKEN ? { token: BENCH_ADMIN_TOKEN } : {}),
    });
    probeWorker.start();
    const t0 = Date.now();
    await submitTasks(node.url, count, () => ({ task_type: failedType, max_retries: 0 }));
    const failed = await failAll(node.url, failedType, count);
    const setupS = (Date.now() - t0) / 1000;
    const url = node.url;

    if (backend === 'postgres') await checkpoint();
    await sleep(backend === 'postgres' ? SETTLE_MS : EMBEDDED_SETTLE_MS);
    const idleUntil = Date.now() + IDLE_MS;
    const idle = await probe(url, probeType, starts, () => Date.now() >= idleUntil);

    const opStarted = Date.now();
    const started = await call<{ operation_id: string }>(url, 'POST', '/api/operations', {
      action: 'retry',
      filter: { status: 'failed', task_type: failedType },
    });
    if (started.status !== 202) throw new Error(`the operation was refused: ${JSON.stringify(started.body)}`);
    const progress: string[] = [];
    let state = 'running';
    let opDone = 0;
    const watch = (async () => {
      while (state === 'running' && Date.now() - opStarted < 20 * 60_000) {
        const op = await call<{ state: string; matched: number; done: number }>(
          url,
          'GET',
          `/api/operations/${started.body.operation_id}`,
        );
        state = op.body.state;
        opDone = op.body.done;
        progress.push(`${((Date.now() - opStarted) / 1000).toFixed(0)} s: ${op.body.done}/${op.body.matched}`);
        await sleep(1_000);
      }
    })();
    const during = await probe(url, probeType, starts, () => state !== 'running');
    await watch;
    const opS = (Date.now() - opStarted) / 1000;

    const row = (name: string, idleV: number[], duringV: number[]): string => {
      const [i50, i99, d50, d99] = [p(idleV, 50), p(idleV, 99), p(duringV, 50), p(duringV, 99)];
      return `${name}: idle p50 ${i50.toFixed(1)} p99 ${i99.toFixed(1)} ms (n ${idleV.length}); during p50 ${d50.toFixed(1)} p99 ${d99.toFixed(1)} ms (n ${duringV.length}); p99 ratio ${(d99 / i99).toFixed(2)}×`;
    };
    const submitRatio = p(during.submitMs, 99) / p(idle.submitMs, 99);
    const claimRatio = p(during.claimMs, 99) / p(idle.claimMs, 99);
    const ok = state === 'done' && opDone === count && failed === count && submitRatio <= 2 && claimRatio <= 2;
    process.stdout.write(
      [
        `${ok ? 'ok  ' : 'FAIL'} ${backend}: ${count} failed tasks made in ${setupS.toFixed(0)} s; retry operation ${state}, ${opDone} done in ${opS.toFixed(1)} s (${(opDone / opS).toFixed(0)}/s), ${progress.length} progress reads`,
        `  ${row('submit', idle.submitMs, during.submitMs)}`,
        `  ${row('claim lag', idle.claimMs, during.claimMs)}`,
        `  progress: ${progress.filter((_, i) => i % Math.max(1, Math.ceil(progress.length / 8)) === 0).join(', ')}`,
      ].join('\n') + '\n',
    );
    return ok;
  } finally {
    await probeWorker?.stop({ timeoutMs: 2_000 }).catch(() => undefined);
    await node?.stop();
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
  }
}

const { values } = parseArgs({
  options: { tasks: { type: 'string', default: '100000' }, only: { type: 'string' }, 'page-tasks': { type: 'string' } },
});
/** The nodes' `operationPageTasks`, when given (for figures of one page size against another). */
const nodeFlags = values['page-tasks'] === undefined ? [] : ['--operation-page-tasks', values['page-tasks']];
const count = Number(values.tasks);
const hard = setTimeout(() => {
  process.stderr.write('hard limit of 40 minutes reached\n');
  killAllChildren();
  process.exit(1);
}, WHOLE_LIMIT_MS);
hard.unref();
let allOk = true;
for (const backend of ['postgres', 'embedded'] as const) {
  if (values.only !== undefined && values.only !== backend) continue;
  allOk = (await runOnce(backend, count)) && allOk;
}
clearTimeout(hard);
process.exit(allOk ? 0 : 1);
