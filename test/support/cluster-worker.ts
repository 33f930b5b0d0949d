/**
 * What the cluster tests do with a running cluster: submit through a chosen node, work tasks
 * with a worker that records every assignment (so executions can be counted per task), and
 * read the outcome — tasks missing or run twice, start lags, and where a missing task is.
 */
import { Redis } from 'ioredis';
import { expect } from 'vitest';
import { type ProcessCluster } from './cluster.js';
import { eventually, sleep } from './waits.js';
import { TEST_REDIS_URL } from './nodes.js';

// ---------------------------------------------------------------------------------------------
// Submitting

export interface Submitted {
  taskId: string;
  dueMs: number;
  partition: number;
  /** The node the submission went to. */
  via: string;
}

/** `POST /api/tasks/batch` through node `via`; one answer per task, in order. */
export async function submitBatch(cluster: ProcessCluster, via: string, tasks: unknown[]): Promise<Submitted[]> {
  const out: Submitted[] = [];
  for (let i = 0; i < tasks.length; i += 1000) {
    const r = await cluster.api<{ tasks: { task_id: string; due_time: string }[] }>(
      via,
      'POST',
      '/api/tasks/batch',
      { tasks: tasks.slice(i, i + 1000) },
      30_000,
    );
    if (r.status !== 201) throw new Error(`batch submit through ${via}: ${r.status} ${JSON.stringify(r.body)}`);
    for (const t of r.body.tasks)
      out.push({ taskId: t.task_id, dueMs: Date.parse(t.due_time), partition: cluster.partitionOf(t.task_id), via });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// A worker over HTTP

export interface Assignment {
  taskId: string;
  taskType: string;
  attempt: number;
  payload: unknown;
  leaseToken: string;
  /** The node whose poll answered it. */
  node: string;
  /** When the poll answer arrived, ms since the epoch. */
  atMs: number;
  /** The lease's expiry the node told the worker (`lease_expires_at`), ms since the epoch. */
  leaseExpiresMs: number;
}

export interface TestWorkerOptions {
  /** Task types it polls for. */
  types: string[];
  /** Node ids it polls (round robin); change with `setTargets`. */
  targets: string[];
  /** Concurrent poll loops. @default 3 */
  loops?: number;
  /** @default 100 */
  maxTasks?: number;
  /** Long-poll wait, ms. @default 500 */
  waitMs?: number;
  /** Assignments it keeps without completing (e.g. a predecessor the test completes itself). */
  hold?: (a: Assignment) => boolean;
  /** @default 'w-test' */
  workerId?: string;
}

/**
 * A worker in the test process: long-polls the target nodes, records every assignment and
 * completes it `succeeded` through the node that handed it out (another target if that one is
 * gone). Poll errors (a node killed mid-poll) are counted and the loop goes on.
 */
export class TestWorker {
  readonly assignments: Assignment[] = [];
  readonly held = new Map<string, Assignment>();
  pollErrors = 0;
  /** Results the cluster refused (`ok: false`: the lease was no longer held). */
  readonly refused: Assignment[] = [];
  private targets: string[];
  private running = false;
  private loops: Promise<void>[] = [];
  private turn = 0;

  constructor(
    private readonly cluster: ProcessCluster,
    private readonly options: TestWorkerOptions,
  ) {
    this.targets = [...options.targets];
  }

  setTargets(ids: string[]): void {
    this.targets = [...ids];
  }

  start(): this {
    if (this.running) return this;
    this.running = true;
    this.loops = Array.from({ length: this.options.loops ?? 3 }, () => this.loop());
    return this;
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  /** How many times each task was handed out. */
  counts(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const a of this.assignments) counts.set(a.taskId, (counts.get(a.taskId) ?? 0) + 1);
    return counts;
  }

  /** The first assignment of each task. */
  firstStarts(): Map<string, Assignment> {
    const first = new Map<string, Assignment>();
    for (const a of this.assignments) if (!first.has(a.taskId)) first.set(a.taskId, a);
    return first;
  }

  /** Resolves once every one of `ids` was handed out at least once. */
  async waitFor(ids: Iterable<string>, timeoutMs: number, what = 'tasks'): Promise<void> {
    const wanted = [...ids];
    await eventually(
      () => {
        const counts = this.counts();
        return wanted.every((id) => counts.has(id)) ? true : undefined;
      },
      timeoutMs,
      what,
    ).catch(async (error: unknown) => {
      const lost = wanted.filter((id) => !this.counts().has(id));
      const detail = await describeTasks(this.cluster, lost).catch((e: unknown) => `(no detail: ${String(e)})`);
      throw new Error(
        `${String(error)}: ${lost.length} of ${wanted.length} never handed out\n${detail}\n${this.cluster.tails()}`,
      );
    });
  }

  /** Completes a held assignment through node `via`. Returns whether the lease was still held. */
  async completeHeld(taskId: string, via: string): Promise<boolean> {
    const a = this.held.get(taskId);
    if (!a) throw new Error(`task ${taskId} is not held by this worker`);
    const r = await this.cluster.api<{ results: { ok: boolean }[] }>(
      via,
      'POST',
      '/api/workers/complete',
      {
        results: [{ task_id: a.taskId, lease_token: a.leaseToken, status: 'succeeded' }],
      },
      10_000,
    );
    if (r.status !== 200) throw new Error(`complete through ${via}: ${r.status} ${JSON.stringify(r.body)}`);
    this.held.delete(taskId);
    return r.body.results[0]?.ok === true;
  }

  private nextTarget(): string | undefined {
    const live = this.targets.filter((id) => {
      const n = this.cluster.nodes.find((x) => x.id === id);
      return n !== undefined && n.alive && !n.paused;
    });
    if (live.length === 0) return undefined;
    return live[this.turn++ % live.length];
  }

  private async loop(): Promise<void> {
    const waitMs = this.options.waitMs ?? 500;
    while (this.running) {
      const target = this.nextTarget();
      if (target === undefined) {
        await sleep(50); // real time is the subject: every node process is down or paused; look again shortly
        continue;
      }
      let polled: {
        task_id: string;
        task_type: string;
        payload: unknown;
        attempt: number;
        lease_token: string;
        lease_expires_at: string;
      }[];
      try {
        const r = await this.cluster.api<{ tasks: typeof polled }>(
          target,
          'POST',
          '/api/workers/poll',
          {
            worker_id: this.options.workerId ?? 'w-test',
            task_types: this.options.types,
            max_tasks: this.options.maxTasks ?? 100,
            wait_ms: waitMs,
          },
          waitMs + 5_000,
        );
        if (r.status !== 200) throw new Error(`poll ${target}: ${r.status} ${JSON.stringify(r.body)}`);
        polled = r.body.tasks;
      } catch {
        this.pollErrors++;
        await sleep(50); // real time is the subject: a node process that failed a poll; retry shortly
        continue;
      }
      const atMs = Date.now();
      const toComplete: Assignment[] = [];
      for (const t of polled) {
        const a: Assignment = {
          taskId: t.task_id,
          taskType: t.task_type,
          attempt: t.attempt,
          payload: t.payload,
          leaseToken: t.lease_token,
          node: target,
          atMs,
          leaseExpiresMs: Date.parse(t.lease_expires_at),
        };
        this.assignments.push(a);
        if (this.options.hold?.(a)) this.held.set(a.taskId, a);
        else toComplete.push(a);
      }
      if (toComplete.length > 0) await this.complete(toComplete, target);
    }
  }

  private async complete(batch: Assignment[], first: string): Promise<void> {
    const results = batch.map((a) => ({ task_id: a.taskId, lease_token: a.leaseToken, status: 'succeeded' }));
    for (let attempt = 0; attempt < 20; attempt++) {
      const via = attempt === 0 ? first : this.nextTarget();
      if (via === undefined) {
        await sleep(100); // real time is the subject: no node process to report to; retry shortly
        continue;
      }
      try {
        const r = await this.cluster.api<{ results: { task_id: string; ok: boolean }[] }>(
          via,
          'POST',
          '/api/workers/complete',
          { results },
          10_000,
        );
        if (r.status !== 200) throw new Error(`complete through ${via}: ${r.status}`);
        for (const [i, res] of r.body.results.entries()) if (!res.ok) this.refused.push(batch[i]!);
        return;
      } catch {
        await sleep(100); // real time is the subject: a node process that failed a report; retry shortly
      }
    }
    throw new Error(`could not report ${batch.length} results`);
  }
}

// ---------------------------------------------------------------------------------------------
// Reading the outcome

/** Tasks run more than once, as `id ×n`. */
export function duplicates(counts: Map<string, number>, ids?: Iterable<string>): string[] {
  const out: string[] = [];
  for (const id of ids ?? counts.keys()) {
    const n = counts.get(id) ?? 0;
    if (n > 1) out.push(`${id} ×${n}`);
  }
  return out;
}

/** Asserts that the worker was handed each of `submitted` exactly once, and that no result of it was refused. */
export function expectEachRanOnce(worker: TestWorker, submitted: Submitted[]): void {
  const counts = worker.counts();
  expect(
    missing(
      counts,
      submitted.map((t) => t.taskId),
    ),
  ).toEqual([]);
  expect(duplicates(counts)).toEqual([]);
  expect(worker.refused).toEqual([]);
}

export function missing(counts: Map<string, number>, ids: Iterable<string>): string[] {
  return [...ids].filter((id) => !counts.has(id));
}

/** Largest and median start − due over `tasks`, ms. */
export function lagStats(
  worker: TestWorker,
  tasks: Submitted[],
): { max: number; p50: number; n: number; worst: Submitted | undefined } {
  const starts = worker.firstStarts();
  const lags: { lag: number; task: Submitted }[] = [];
  for (const t of tasks) {
    const a = starts.get(t.taskId);
    if (a) lags.push({ lag: a.atMs - t.dueMs, task: t });
  }
  lags.sort((a, b) => a.lag - b.lag);
  const worst = lags[lags.length - 1];
  return { max: worst?.lag ?? 0, p50: lags[Math.floor(lags.length / 2)]?.lag ?? 0, n: lags.length, worst: worst?.task };
}

/**
 * One line per task: partition, the ring owner and fencing row of that partition now, what
 * the task row says, where the task id is in Redis (ready queue, in flight, far bucket) and
 * the partition actor's state — for the message of a test that found tasks missing.
 */
export async function describeTasks(cluster: ProcessCluster, ids: string[], via?: string): Promise<string> {
  const node = via ?? cluster.ids()[0]!;
  const status = await cluster.status(node).catch(() => null);
  const redis = new Redis(TEST_REDIS_URL);
  const lines: string[] = [];
  try {
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, found] = await redis.scan(cursor, 'MATCH', `${cluster.prefix}:*`, 'COUNT', 1000);
      keys.push(...found);
      cursor = next;
    } while (cursor !== '0');
    const zsets: string[] = [];
    for (const key of keys) if ((await redis.type(key)) === 'zset') zsets.push(key);
    const fences = new Map<number, string | null>();
    for (const id of ids.slice(0, 40)) {
      const p = cluster.partitionOf(id);
      if (!fences.has(p)) fences.set(p, await redis.get(`${cluster.prefix}:{p${p}}:fence`));
      const row = status?.partitions.find((x) => x.partition === p);
      const task = await cluster.api<Record<string, unknown>>(node, 'GET', `/api/tasks/${id}`).catch(() => null);
      const t = task?.body ?? {};
      const where: string[] = [];
      for (const key of zsets) {
        if ((await redis.zscore(key, id)) !== null) where.push(key.slice(cluster.prefix.length + 1));
        else {
          const [, members] = await redis.zscan(key, '0', 'MATCH', `*${id}*`, 'COUNT', 10_000);
          if (members.length > 0) where.push(`${key.slice(cluster.prefix.length + 1)} (as ${members[0]})`);
        }
      }
      const actor = row
        ? await cluster
            .api<{ node?: string; epoch?: number; state?: unknown }>(node, 'GET', `/admin/actors/wheel/${p}`)
            .catch(() => null)
        : null;
      lines.push(
        `${id} partition ${p} (owner ${row?.owner ?? '?'}, held by ${row?.held_by ?? '?'} at epoch ${row?.epoch ?? '?'}, redis fence ${fences.get(p) ?? 'none'}): ` +
          `${String(t.status)} due ${String(t.due_time)} attempts ${String(t.attempts)}; in redis: ${where.join(', ') || 'nowhere'}; ` +
          `wheel actor: ${actor ? `${actor.status} ${JSON.stringify(actor.body)}` : '?'}`,
      );
    }
  } finally {
    redis.disconnect();
  }
  return lines.join('\n');
}
