/**
 * `npm run chaos -- --faults`: one node under load while its stores fail for real, as an
 * operator's machine would have them fail — Postgres restarted (twice), the node's Postgres
 * connections terminated, its Redis connections killed, Redis paused 4 s, Redis restarted
 * empty — and the node itself started with its clock 3 s ahead. Tasks fall due all along
 * (5 s leases), four honest worker processes run them, a dropping worker takes a few and
 * never reports, submissions go on throughout. What it prints: tasks lost, tasks run twice on
 * honest workers, each dropped lease's hand-on, the start lag of tasks due away from any
 * fault, what submits were answered, and what the safety nets and duty retries counted.
 * Every service it disturbed is put back, whatever happens (`ensureServices`).
 */
import { randomBytes } from 'node:crypto';
import { Pool, request } from 'undici';
import { startBenchNode, type BenchNode } from './node-process.js';
import {
  ensureServices,
  killRedisClients,
  pauseRedis,
  redisLaunch,
  restartPostgres,
  restartRedisEmpty,
  terminatePostgresConnections,
  type RedisLaunch,
} from './services.js';
import type { BenchStores } from './stores.js';
import { sleep } from './time.js';
import { WorkerFleet } from './worker-process.js';
import {
  analyseFaultRun,
  type DroppedClaim,
  type FaultRun,
  type FaultWindow,
  type SubmitAnswer,
} from './chaos-faults-report.js';
import { byTask } from './chaos-analysis.js';

export const FAULTS_TYPE = 'chaos.faults';
/** Every task's lease, s (the scenario of issue 11). */
const LEASE_SECONDS = 5;
/** The node's clock, ahead of the machine's, s. */
const CLOCK_OFFSET_SECONDS = 3;
const SUBMIT_EVERY_MS = 500;
/** Due times of a batch: from its submit to this much later. */
const DUE_SPREAD_MS = 20_000;
/** The dropping worker polls this often, taking this many tasks each time. */
const DROP_EVERY_MS = 3_000;
const DROP_TASKS = 2;
/** The end of a run: nothing changed for this long after the last task was due (leases and nets included). */
const STALL_MS = 30_000;

export interface FaultsArgs {
  quick: boolean;
  /** How long tasks are submitted and faults happen, s. */
  loadSeconds: number;
  /** Tasks in all. */
  tasks: number;
}

/** The faults, in order, at these fractions of the load window. */
const TIMELINE: { at: number; name: string }[] = [
  { at: 0.13, name: 'Postgres restarted' },
  { at: 0.27, name: "the node's Postgres connections terminated" },
  { at: 0.4, name: "the node's Redis connections killed" },
  { at: 0.53, name: 'Redis paused 4 s' },
  { at: 0.67, name: 'Redis restarted empty' },
  { at: 0.8, name: 'Postgres restarted again' },
];

export async function runFaults(stores: BenchStores, args: FaultsArgs, log: (line: string) => void): Promise<FaultRun> {
  const id = randomBytes(4).toString('hex');
  const names = { schema: `chaosf_${id}`, redisPrefix: `chaosf${id}` };
  const nodeId = `chaos-${id}`;
  let launch: RedisLaunch | null = null;
  let node: BenchNode | undefined;
  const fleets: WorkerFleet[] = [];
  let stopDropping = (): Promise<DroppedClaim[]> => Promise.resolve([]);
  try {
    launch = await redisLaunch(stores.redis);
    node = await startBenchNode(names, [
      '--node-id',
      nodeId,
      '--test-clock-offset-seconds',
      String(CLOCK_OFFSET_SECONDS),
      '--retry-base-seconds',
      '0.2',
    ]);
    const url = node.url;
    log(`faults: node ${nodeId} at ${url}, its clock ${CLOCK_OFFSET_SECONDS} s ahead`);
    const honest = await WorkerFleet.start(4, {
      url,
      taskType: FAULTS_TYPE,
      concurrency: 50,
      pollers: 1,
      recordStarts: true,
    });
    fleets.push(honest);
    stopDropping = dropLeases(url);

    const loadMs = args.loadSeconds * 1000;
    const startedMs = Date.now();
    const submitting = submitAllAlong(url, id, args.tasks, startedMs, loadMs - DUE_SPREAD_MS);
    const windows: FaultWindow[] = [];
    for (const fault of TIMELINE) {
      await sleep(Math.max(0, startedMs + fault.at * loadMs - Date.now()));
      const from = Date.now();
      const detail = await inject(fault.name, stores, launch, nodeId, names.redisPrefix);
      windows.push({
        name: fault.name,
        fromMs: from,
        toMs: Date.now() + (fault.name.startsWith('Redis paused') ? 4_000 : 0),
        detail,
      });
      log(`faults: ${fault.name} at +${((from - startedMs) / 1000).toFixed(1)} s (${detail})`);
    }
    const submits = await submitting;
    const created = submits.created;
    log(`faults: ${created.length} tasks created; waiting for them to succeed`);
    const dueLast = Math.max(...created.map((t) => t.dueMs));
    let last = { at: Date.now(), succeeded: -1 };
    for (;;) {
      const counts = await stores.countByStatus(names.schema, FAULTS_TYPE);
      const succeeded = counts.succeeded ?? 0;
      if (succeeded !== last.succeeded) last = { at: Date.now(), succeeded };
      if (succeeded === created.length) break;
      if (Date.now() > dueLast && Date.now() - last.at > STALL_MS) break;
      await sleep(500);
    }
    const dropped = await stopDropping();
    const results = await honest.stop();
    fleets.length = 0;
    const metrics = await (await request(`${url}/metrics`)).body.text();
    const statuses = await stores.taskStatuses(
      names.schema,
      created.map((t) => t.taskId),
    );
    return analyseFaultRun({
      created,
      answers: submits.answers,
      windows,
      dropped,
      runs: byTask(results),
      statuses,
      metrics,
      leaseMs: LEASE_SECONDS * 1000,
      startedMs,
    });
  } finally {
    await stopDropping();
    for (const f of fleets) f.kill();
    await node?.stop().catch(() => undefined);
    const restored = await ensureServices(launch).catch((error: unknown) => [
      `could not restore the services: ${String(error)}`,
    ]);
    if (restored.length > 0) log(`faults: ${restored.join(', ')}`);
    await stores.removeRun(names.schema, names.redisPrefix).catch(() => undefined);
  }
}

/** Carries out one fault; answers what it did. */
async function inject(
  name: string,
  stores: BenchStores,
  launch: RedisLaunch,
  nodeId: string,
  prefix: string,
): Promise<string> {
  switch (name) {
    case 'Postgres restarted':
    case 'Postgres restarted again':
      return `down ${await restartPostgres()} ms`;
    case "the node's Postgres connections terminated":
      return `${await terminatePostgresConnections(stores.pg, `wheelhouse ${nodeId}`)} backends`;
    case "the node's Redis connections killed":
      return `${await killRedisClients(stores.redis, `wheelhouse:${prefix}`)} connections`;
    case 'Redis paused 4 s':
      await pauseRedis(stores.redis, 4_000);
      return 'CLIENT PAUSE 4000 ALL';
    case 'Redis restarted empty':
      return `down ${await restartRedisEmpty(stores.redis, launch)} ms`;
    default:
      throw new Error(`no such fault: ${name}`);
  }
}

/**
 * Submits `total` tasks in batches every 500 ms over `spanMs`, each due between its submit and
 * 20 s later, a fifth of them at once. A 429 or 503 is answered by waiting its Retry-After and
 * sending the batch again (idempotency keys make that safe); every answer is recorded.
 */
async function submitAllAlong(
  url: string,
  run: string,
  total: number,
  startedMs: number,
  spanMs: number,
): Promise<{ created: { taskId: string; dueMs: number }[]; answers: SubmitAnswer[] }> {
  const pool = new Pool(url, { connections: 4 });
  const batches = Math.max(1, Math.floor(spanMs / SUBMIT_EVERY_MS));
  const perBatch = Math.ceil(total / batches);
  const created: { taskId: string; dueMs: number }[] = [];
  const answers: SubmitAnswer[] = [];
  const sends: Promise<void>[] = [];
  for (let b = 0; b < batches; b++) {
    await sleep(Math.max(0, startedMs + b * SUBMIT_EVERY_MS - Date.now()));
    const now = Date.now();
    const tasks = Array.from({ length: perBatch }, (_, i) => {
      const dueMs = i % 5 === 0 ? now : now + Math.floor(Math.random() * DUE_SPREAD_MS);
      return {
        task_type: FAULTS_TYPE,
        timeout_seconds: LEASE_SECONDS,
        idempotency_key: `${run}-${b}-${i}`,
        payload: { due_ms: dueMs },
        schedule: { type: 'delayed', due_time: new Date(dueMs).toISOString() },
      };
    });
    sends.push(
      (async () => {
        for (;;) {
          const sentMs = Date.now();
          let status = 0;
          let retryAfter: string | null = null;
          let text = '';
          try {
            const res = await pool.request({
              path: '/api/tasks/batch',
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ tasks }),
            });
            status = res.statusCode;
            retryAfter = (res.headers['retry-after'] as string | undefined) ?? null;
            text = await res.body.text();
          } catch (error) {
            text = String(error);
          }
          answers.push({ atMs: sentMs, status, retryAfter });
          if (status === 201 || status === 200) {
            const ids = (JSON.parse(text) as { tasks: { task_id: string }[] }).tasks.map((t) => t.task_id);
            ids.forEach((taskId, i) => created.push({ taskId, dueMs: tasks[i]!.payload.due_ms }));
            return;
          }
          if (Date.now() - sentMs > 120_000) return;
          await sleep(retryAfter !== null && Number.isFinite(Number(retryAfter)) ? Number(retryAfter) * 1000 : 1_000);
        }
      })(),
    );
  }
  await Promise.all(sends);
  await pool.close();
  return { created, answers };
}

/** A worker that takes a few tasks every few seconds and never reports: their leases are dropped. */
function dropLeases(url: string): () => Promise<DroppedClaim[]> {
  const claims: DroppedClaim[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        const res = await request(`${url}/api/workers/poll`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            worker_id: 'chaos-dropper',
            task_types: [FAULTS_TYPE],
            max_tasks: DROP_TASKS,
            wait_ms: 1_000,
          }),
        });
        const body = (await res.body.json()) as { tasks?: { task_id: string; attempt: number }[] };
        for (const t of body.tasks ?? []) claims.push({ taskId: t.task_id, claimMs: Date.now(), attempt: t.attempt });
      } catch {
        // a store fault answered 503, or the node is gone at the end: try again later
      }
      await sleep(DROP_EVERY_MS);
    }
  })();
  return async () => {
    stopped = true;
    await loop;
    return claims;
  };
}
