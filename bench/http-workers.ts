/**
 * `npm run bench:http-workers -- [--rounds N] [--tasks N] [--backends postgres,embedded]`:
 * the path workers in other languages take, against the SDK's, on each backend, in one run.
 *
 * Per round and backend, on a fresh node each: `tasks` no-op tasks are submitted first (batches
 * of 1 000), then drained either by `bench/http-worker.ts` (8 pollers × 100 slots, long-poll,
 * one `POST /api/tasks/{id}/complete` per task over kept-alive connections) or by one SDK
 * worker process (800 slots, 8 pollers, results in batches). Rate = tasks / (last result
 * accepted − first task handed out). With `BENCH_CLI` set to another build's
 * `dist/src/cli.js` the nodes run from that build, for before/after figures.
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { trackChild, waitForExit, killAllChildren } from './children.js';
import { cpuDelta, cpuSnapshot, pidsNamed } from './cluster-nodes.js';
import type { HttpWorkerConfig, HttpWorkerResult } from './http-worker.js';
import { runNames, startBenchNode, type BenchNode } from './node-process.js';
import { BenchStores } from './stores.js';
import { submitTasks } from './submit.js';
import { WorkerFleet } from './worker-process.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '1' },
    tasks: { type: 'string', default: '20000' },
    backends: { type: 'string', default: 'postgres,embedded' },
    pollers: { type: 'string', default: '8' },
    slots: { type: 'string', default: '100' },
  },
});
const ROUNDS = Number(values.rounds);
const TASKS = Number(values.tasks);
const POLLERS = Number(values.pollers);
const SLOTS = Number(values.slots);
const BACKENDS = values.backends.split(',') as ('postgres' | 'embedded')[];
const TIMEOUT_MS = 120_000 + TASKS * 5;
const HTTP_WORKER = resolve(import.meta.dirname, 'http-worker.js');

const log = (line: string): void => {
  process.stdout.write(`[http-workers ${new Date().toISOString().slice(11, 23)}] ${line}\n`);
};

interface ModeFigures {
  rate: number;
  /** Node process CPU, µs per task, over the drain. */
  nodeUsPerTask: number;
  /** Postgres server processes' CPU, µs per task, over the drain (0 on the embedded backend). */
  postgresUsPerTask: number;
  note: string;
}

async function withNode<T>(
  stores: BenchStores,
  backend: 'postgres' | 'embedded',
  fn: (node: BenchNode) => Promise<T>,
): Promise<T> {
  const names = runNames();
  const dataDir = backend === 'embedded' ? mkdtempSync(join(tmpdir(), 'wheelhouse-bench-')) : null;
  const flags = dataDir === null ? [] : ['--backend', 'embedded', '--data-dir', dataDir];
  const node = await startBenchNode(names, flags);
  try {
    return await fn(node);
  } finally {
    await node.stop();
    if (dataDir !== null) rmSync(dataDir, { recursive: true, force: true });
    else await stores.removeRun(names.schema, names.redisPrefix);
  }
}

/** CPU of the node and of Postgres from now until `stop()`, µs per task. */
function cpuWindow(node: BenchNode): (tasks: number) => { nodeUs: number; postgresUs: number } {
  const postgres = pidsNamed('postgres');
  const before = { node: cpuSnapshot([node.pid]), postgres: cpuSnapshot(postgres) };
  return (tasks) => {
    const postgresNow = [...new Set([...postgres, ...pidsNamed('postgres')])];
    return {
      nodeUs: (cpuDelta(before.node, cpuSnapshot([node.pid])) * 1000) / tasks,
      postgresUs: (cpuDelta(before.postgres, cpuSnapshot(postgresNow)) * 1000) / tasks,
    };
  };
}

async function httpMode(node: BenchNode, taskType: string): Promise<ModeFigures> {
  await submitTasks(node.url, TASKS, () => ({ task_type: taskType }));
  const config: HttpWorkerConfig = {
    url: node.url,
    taskType,
    tasks: TASKS,
    pollers: POLLERS,
    slots: SLOTS,
    timeoutMs: TIMEOUT_MS,
  };
  const child = trackChild(
    fork(HTTP_WORKER, [JSON.stringify(config)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
  );
  let cpu: ReturnType<typeof cpuWindow> | null = null;
  const result = await new Promise<HttpWorkerResult>((resolveResult, reject) => {
    child.on('message', (m: { type: string; result?: HttpWorkerResult }) => {
      if (m.type === 'ready') cpu = cpuWindow(node);
      if (m.type === 'result' && m.result) resolveResult(m.result);
    });
    child.once('exit', (code) => reject(new Error(`the HTTP worker exited (${code}) before reporting`)));
  });
  const used = (cpu as ReturnType<typeof cpuWindow> | null)?.(TASKS) ?? { nodeUs: NaN, postgresUs: NaN };
  await waitForExit(child, 10_000);
  if (result.accepted < TASKS) throw new Error(`HTTP worker: ${JSON.stringify(result)}`);
  const errors = Object.entries(result.errors);
  return {
    rate: (TASKS / (result.lastResultMs - result.firstTaskMs)) * 1000,
    nodeUsPerTask: used.nodeUs,
    postgresUsPerTask: used.postgresUs,
    note:
      `${result.polls} polls, ${result.completeRequests} complete requests, ${result.refused} refused` +
      (errors.length === 0 ? '' : `, failed: ${errors.map(([what, n]) => `${what} ×${n}`).join(', ')}`),
  };
}

async function sdkMode(node: BenchNode, taskType: string): Promise<ModeFigures> {
  await submitTasks(node.url, TASKS, () => ({ task_type: taskType }));
  const cpu = cpuWindow(node);
  const fleet = await WorkerFleet.start(1, {
    url: node.url,
    taskType,
    concurrency: POLLERS * SLOTS,
    pollers: POLLERS,
  });
  try {
    await fleet.until((f) => f.reported >= TASKS, TIMEOUT_MS, `${TASKS} SDK results`);
  } catch (error) {
    fleet.kill();
    throw error;
  }
  const used = cpu(TASKS);
  const [result] = await fleet.stop();
  if (result === undefined) throw new Error('no SDK worker result');
  return {
    rate: (TASKS / (result.lastReportedMs - result.firstStartMs)) * 1000,
    nodeUsPerTask: used.nodeUs,
    postgresUsPerTask: used.postgresUs,
    note: `${result.polls} polls, ${result.completionRequests} completion requests`,
  };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

async function main(): Promise<void> {
  const stores = new BenchStores();
  const figures = new Map<string, ModeFigures[]>();
  const push = (key: string, f: ModeFigures): void => {
    figures.set(key, [...(figures.get(key) ?? []), f]);
  };
  log(
    `${ROUNDS} round(s), ${TASKS} tasks, ${POLLERS} pollers × ${SLOTS}, backends ${BACKENDS.join(', ')}` +
      (process.env.BENCH_CLI ? `, nodes from ${process.env.BENCH_CLI}` : ''),
  );
  try {
    for (let round = 1; round <= ROUNDS; round++) {
      for (const backend of BACKENDS) {
        for (const mode of ['http', 'sdk'] as const) {
          const f = await withNode(stores, backend, (node) =>
            mode === 'http' ? httpMode(node, 'bench.http') : sdkMode(node, 'bench.sdk'),
          );
          push(`${backend} ${mode}`, f);
          log(
            `round ${round} ${backend} ${mode}: ${f.rate.toFixed(0)} tasks/s, node ${f.nodeUsPerTask.toFixed(0)} µs/task, ` +
              `postgres ${f.postgresUsPerTask.toFixed(0)} µs/task (${f.note})`,
          );
        }
      }
    }
  } finally {
    await stores.close();
  }
  for (const backend of BACKENDS) {
    const http = figures.get(`${backend} http`) ?? [];
    const sdk = figures.get(`${backend} sdk`) ?? [];
    const ratios = http.map((h, i) => h.rate / (sdk[i]?.rate ?? NaN));
    log(
      `${backend}: HTTP per-task ${median(http.map((f) => f.rate)).toFixed(0)}/s (${http.map((f) => f.rate.toFixed(0)).join(' / ')}), ` +
        `SDK ${median(sdk.map((f) => f.rate)).toFixed(0)}/s (${sdk.map((f) => f.rate.toFixed(0)).join(' / ')}), ` +
        `ratio ${median(ratios).toFixed(2)} (${ratios.map((r) => r.toFixed(2)).join(' / ')}); ` +
        `HTTP node ${median(http.map((f) => f.nodeUsPerTask)).toFixed(0)} µs/task, postgres ${median(http.map((f) => f.postgresUsPerTask)).toFixed(0)} µs/task`,
    );
  }
}

const hardTimer = setTimeout(
  () => {
    log('ABORT: hard timeout');
    killAllChildren();
    process.exit(1);
  },
  ROUNDS * BACKENDS.length * 2 * TIMEOUT_MS,
);
main().then(
  () => {
    clearTimeout(hardTimer);
    process.exit(0);
  },
  (error: unknown) => {
    process.stderr.write(`http-workers: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    killAllChildren();
    process.exit(1);
  },
);
