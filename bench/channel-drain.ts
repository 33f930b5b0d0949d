/**
 * `npm run bench:channel -- [--tasks N] [--sockets K] [--credits C] [--embedded]`: the cost of
 * the worker channel's hot path (claim → `tasks` frame → `results` frame → completion) on one
 * node. N no-op tasks are submitted through the batch route and left ready; then K raw channel
 * workers (`ws`, no SDK) connect with C credits each, answer every `tasks` frame at once with one
 * `results` frame, and grant the credit back as the acks come. Prints tasks/s over the drain
 * and the CPU spent per task by the node process and by its Postgres backends (read from /proc,
 * the backends found by the node's `application_name`), µs. On a shared machine the CPU figures
 * are the ones to compare; wall time moves with the neighbours. With `BENCH_CLI` set to another
 * build's `dist/src/cli.js` the node runs from that build, for before/after figures.
 * `BENCH_NODE_ARGS="--cpu-prof --cpu-prof-dir=…"` profiles the node.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import WebSocket from 'ws';
import { cpuDelta, cpuSnapshot } from './cluster-nodes.js';
import { runNames, startBenchNode } from './node-process.js';
import { BenchStores } from './stores.js';
import { sleep } from './time.js';

const { values } = parseArgs({
  options: {
    tasks: { type: 'string', default: '50000' },
    sockets: { type: 'string', default: '8' },
    credits: { type: 'string', default: '250' },
    embedded: { type: 'boolean', default: false },
  },
});
const total = Number(values.tasks);
const sockets = Number(values.sockets);
const credits = Number(values.credits);
const TASK_TYPE = 'bench.channel';

interface TaskFrame {
  task_id: string;
  lease_token: string;
}
type NodeFrame =
  { type: 'tasks'; tasks: TaskFrame[] } | { type: 'acks'; acks: { task_id: string; ok: boolean }[] } | { type: string };

async function submit(url: string): Promise<void> {
  const batches = Math.ceil(total / 1000);
  let next = 0;
  const one = async (): Promise<void> => {
    while (next < batches) {
      const index = next++;
      const n = Math.min(1000, total - index * 1000);
      const body = JSON.stringify({ tasks: Array.from({ length: n }, () => ({ task_type: TASK_TYPE })) });
      for (;;) {
        const res = await request(`${url}/api/tasks/batch`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
        });
        const text = await res.body.text();
        if (res.statusCode === 201) break;
        if (res.statusCode !== 429 && res.statusCode !== 503)
          throw new Error(`batch answered ${res.statusCode}: ${text.slice(0, 300)}`);
        await sleep(200);
      }
    }
  };
  await Promise.all([one(), one()]);
}

/** One raw channel worker: answers each `tasks` frame with one `results` frame, credit back per ack. */
function worker(url: string, id: number, onAcked: (n: number) => void): Promise<WebSocket> {
  const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/api/workers/connect`);
  ws.on('message', (data: Buffer) => {
    const frame = JSON.parse(data.toString('utf8')) as NodeFrame;
    if (frame.type === 'tasks') {
      const { tasks } = frame as { tasks: TaskFrame[] };
      ws.send(
        JSON.stringify({
          type: 'results',
          results: tasks.map((t) => ({ task_id: t.task_id, lease_token: t.lease_token, status: 'succeeded' })),
        }),
      );
    } else if (frame.type === 'acks') {
      const { acks } = frame as { acks: { ok: boolean }[] };
      ws.send(JSON.stringify({ type: 'credit', n: acks.length }));
      onAcked(acks.filter((a) => a.ok).length);
    } else if (frame.type === 'error') {
      throw new Error(`worker ${id} got ${data.toString('utf8')}`);
    }
  });
  return new Promise((resolve, reject) => {
    ws.once('open', () => {
      ws.send(JSON.stringify({ type: 'hello', worker_id: `bench-${id}`, task_types: [TASK_TYPE], credits }));
      resolve(ws);
    });
    ws.once('error', reject);
  });
}

const names = runNames();
const nodeId = `bench-channel-${randomBytes(3).toString('hex')}`;
const dataDir = values.embedded ? mkdtempSync(join(tmpdir(), 'wheelhouse-bench-')) : undefined;
const stores = new BenchStores();
const node = await startBenchNode(names, ['--node-id', nodeId], dataDir);
const open: WebSocket[] = [];
try {
  await submit(node.url);
  await sleep(1_500); // the wheel fires them all into the ready queue
  const pgBefore = values.embedded ? new Map<number, number>() : cpuSnapshot(await stores.backendPids(nodeId));
  const nodeBefore = cpuSnapshot([node.pid]);
  const harnessBefore = process.cpuUsage();
  const started = performance.now();
  const startedMonoUs = process.hrtime.bigint() / 1000n;
  let acked = 0;
  let finish!: () => void;
  const drained = new Promise<void>((resolve) => (finish = resolve));
  for (let i = 0; i < sockets; i++)
    open.push(
      await worker(node.url, i, (n) => {
        acked += n;
        if (acked >= total) finish();
      }),
    );
  const limit = setTimeout(() => {
    console.error(`channel-drain: only ${acked} of ${total} acked in 5 min`);
    process.exit(1);
  }, 300_000);
  await drained;
  clearTimeout(limit);
  const wallMs = performance.now() - started;
  const nodeMs = cpuDelta(nodeBefore, cpuSnapshot([node.pid]));
  const pgMs = values.embedded ? 0 : cpuDelta(pgBefore, cpuSnapshot(await stores.backendPids(nodeId)));
  const harness = process.cpuUsage(harnessBefore);
  const perTask = (ms: number): string => ((ms * 1000) / total).toFixed(1);
  console.log(
    `channel-drain ${values.embedded ? 'embedded' : 'postgres'}: ${total} tasks, ${sockets}×${credits} credits: ` +
      `${Math.round(total / (wallMs / 1000))} tasks/s, node ${perTask(nodeMs)} µs/task` +
      (values.embedded ? '' : `, postgres ${perTask(pgMs)} µs/task`) +
      `, workers ${perTask((harness.user + harness.system) / 1000)} µs/task`,
  );
  // The same clock as a --cpu-prof profile's timestamps: to read the drain alone from one.
  console.log(`drain window (monotonic µs): ${startedMonoUs} ${process.hrtime.bigint() / 1000n}`);
} finally {
  for (const ws of open) ws.terminate();
  await node.stop();
  if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
  else await stores.removeRun(names.schema, names.redisPrefix);
  await stores.close();
}
