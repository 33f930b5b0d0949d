/**
 * `npm run bench:python -- [--tasks N] [--concurrency C] [--rounds R] [--embedded]`: the Python
 * SDK's worker (sdk/python, `wheelhouse.Worker` on the channel) against the TypeScript SDK's
 * (`createWorker`, channel) draining the same work from the same node. Each run submits N no-op
 * tasks of a fresh task type through the batch route, lets the wheel make them ready, then starts
 * one worker with C slots and a handler that does nothing, and times it from its start to the
 * node's N-th acknowledged result. Runs alternate TS, Python, TS, Python, … (R rounds; the order
 * within a round flips each round), on one node, so both meet the same node and neighbours.
 * A warm-up drain of each side comes first, not counted (the node's first drain pays for its JIT).
 * Reports tasks/s per run, the medians, and the CPU per task of each worker process (µs). The
 * TypeScript worker runs in a child process of its own (bench/python-drain-ts-worker.ts), as the
 * Python one does.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { authHeaders } from './auth.js';
import { runNames, startBenchNode } from './node-process.js';
import { median } from './stats.js';
import { BenchStores } from './stores.js';
import { sleep } from './time.js';

const { values } = parseArgs({
  options: {
    tasks: { type: 'string', default: '20000' },
    concurrency: { type: 'string', default: '100' },
    rounds: { type: 'string', default: '3' },
    embedded: { type: 'boolean', default: false },
  },
});
const total = Number(values.tasks);
const concurrency = Number(values.concurrency);
const rounds = Number(values.rounds);
const PYTHON = process.env.PYTHON ?? 'python3';
const ROOT = resolve(import.meta.dirname, '../..');
const PY_WORKER = join(ROOT, 'bench/python-drain-worker.py');
const TS_WORKER = resolve(import.meta.dirname, 'python-drain-ts-worker.js');

async function submit(url: string, taskType: string, total: number): Promise<void> {
  for (let done = 0; done < total; done += 1000) {
    const n = Math.min(1000, total - done);
    const body = JSON.stringify({ tasks: Array.from({ length: n }, () => ({ task_type: taskType })) });
    for (;;) {
      const res = await request(`${url}/api/tasks/batch`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...authHeaders() },
        body,
      });
      const text = await res.body.text();
      if (res.statusCode === 201) break;
      if (res.statusCode !== 429 && res.statusCode !== 503)
        throw new Error(`batch answered ${res.statusCode}: ${text.slice(0, 300)}`);
      await sleep(200);
    }
  }
}

interface Drain {
  seconds: number;
  cpu_seconds: number;
  stats: { reported: number; discarded: number };
}

/** Runs a worker process to the end of its drain; resolves with what it printed last. */
function drain(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<Drain> {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    const limit = setTimeout(() => child.kill('SIGKILL'), 600_000);
    child.once('close', (code) => {
      clearTimeout(limit);
      const last = out.trim().split('\n').pop() ?? '';
      if (code !== 0) return fail(new Error(`${args.join(' ')} exited ${code}:\n${out.slice(-2000)}`));
      try {
        done(JSON.parse(last) as Drain);
      } catch {
        fail(new Error(`no figures from ${args.join(' ')}:\n${out.slice(-2000)}`));
      }
    });
  });
}

const names = runNames();
const dataDir = values.embedded ? mkdtempSync(join(tmpdir(), 'wheelhouse-bench-')) : undefined;
const stores = new BenchStores();
const node = await startBenchNode(names, [], dataDir);
const figures: Record<'ts' | 'python', { rate: number; cpuUs: number }[]> = { ts: [], python: [] };
/** Submits, waits for the wheel, and drains with one worker of `side`; `count` tasks. */
async function run(side: 'ts' | 'python', label: string, count: number): Promise<Drain> {
  const taskType = `bench.pydrain.${side}.${label}.${Date.now()}`;
  await submit(node.url, taskType, count);
  await sleep(1_500); // the wheel fires them all into the ready queue
  const args = [node.url, taskType, String(count), String(concurrency)];
  const result =
    side === 'python'
      ? await drain(PYTHON, [PY_WORKER, ...args], { PYTHONPATH: join(ROOT, 'sdk/python/src') })
      : await drain(process.execPath, [TS_WORKER, ...args], {});
  // Every result accepted by the node, none discarded: a drain that lost tasks has no rate.
  if (result.stats.reported !== count || result.stats.discarded !== 0)
    throw new Error(`${side} worker: ${JSON.stringify(result.stats)} for ${count} tasks`);
  return result;
}

try {
  // A warm-up drain of each side, not counted: the node's first drain pays for its JIT.
  await run('ts', 'warmup', Math.min(total, 5000));
  await run('python', 'warmup', Math.min(total, 5000));
  for (let round = 0; round < rounds; round++) {
    const order: ('ts' | 'python')[] = round % 2 === 0 ? ['ts', 'python'] : ['python', 'ts'];
    for (const side of order) {
      const result = await run(side, String(round), total);
      const rate = total / result.seconds;
      const cpuUs = (result.cpu_seconds * 1e6) / total;
      figures[side].push({ rate, cpuUs });
      console.log(`round ${round + 1} ${side}: ${Math.round(rate)} tasks/s, worker ${cpuUs.toFixed(1)} µs/task`);
    }
  }
  const ts = median(figures.ts.map((f) => f.rate));
  const py = median(figures.python.map((f) => f.rate));
  const list = (side: 'ts' | 'python'): string => figures[side].map((f) => Math.round(f.rate)).join(' / ');
  console.log(
    `python-drain ${values.embedded ? 'embedded' : 'postgres'}: ${total} tasks, concurrency ${concurrency}: ` +
      `TS ${list('ts')} (median ${Math.round(ts)}) tasks/s; Python ${list('python')} (median ${Math.round(py)}) tasks/s; ` +
      `Python ÷ TS ${(py / ts).toFixed(2)}; worker CPU µs/task TS ${median(figures.ts.map((f) => f.cpuUs)).toFixed(1)}, ` +
      `Python ${median(figures.python.map((f) => f.cpuUs)).toFixed(1)}`,
  );
} finally {
  await node.stop();
  if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
  else await stores.removeRun(names.schema, names.redisPrefix);
  await stores.close();
}
