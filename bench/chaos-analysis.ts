/**
 * What `npm run chaos` reads off a run: when the herd was all ready, when the dead node's
 * partitions were taken over, which tasks ran twice (and whether they were in flight on the dead
 * node), where lost tasks are, and what Postgres says about claims.
 */
import { clusterView, type ClusterNode } from './cluster-nodes.js';
import { fmtS } from './chaos-report.js';
import type { WorkerResult } from './protocol.js';
import type { BenchStores } from './stores.js';
import { sleep } from './time.js';
import type { WorkerFleet } from './worker-process.js';

export const HERD_TYPE = 'chaos.herd';
export const PROBE_TYPE = 'chaos.probe';

/** From T − 200 ms, every 10 ms: ready + in flight (Redis) + started ≥ count; returns that moment − T (W2's "all ready after T"). */
export async function watchReady(
  stores: BenchStores,
  prefix: string,
  fleet: WorkerFleet,
  count: number,
  dueMs: number,
): Promise<number> {
  await sleep(Math.max(0, dueMs - Date.now() - 200));
  while (Date.now() < dueMs + 180_000) {
    const started = fleet.started;
    const ready = await stores.readyAndTaken(prefix, HERD_TYPE);
    if (ready + started >= count) return Date.now() - dueMs;
    await sleep(10);
  }
  return Number.NaN;
}

/**
 * After the kill, every 100 ms on a survivor: when its ring drops the dead node, and when
 * every partition the dead node owned is held (fencing row) by a survivor that the ring names.
 */
export async function watchTakeover(
  survivor: ClusterNode,
  victimId: string,
  owned: number[],
  killMs: number,
): Promise<{ heldMs: number; notes: string[] }> {
  let ringMs = Number.NaN;
  let lastOff = '';
  while (Date.now() - killMs < 60_000) {
    const asked = Date.now();
    try {
      const view = await clusterView(survivor.url, 5_000);
      if (Number.isNaN(ringMs) && !view.ring.nodes.includes(victimId)) ringMs = Date.now() - killMs;
      const byPartition = new Map(view.partitions.map((p) => [p.partition, p]));
      const off = owned.filter((p) => {
        const row = byPartition.get(p);
        return !row || row.held_by === null || row.held_by === victimId || row.held_by !== row.owner;
      });
      if (off.length === 0) {
        const heldMs = Date.now() - killMs;
        return {
          heldMs,
          notes: [
            `${survivor.nodeId}'s ring dropped ${victimId} ${fmtS(ringMs)} after the kill; all ${owned.length} of its partitions held by survivors ${fmtS(heldMs)} after (polled every 100 ms)`,
          ],
        };
      }
      lastOff = off
        .slice(0, 6)
        .map((p) => `${p}: ${JSON.stringify(byPartition.get(p))}`)
        .join('; ');
    } catch (error) {
      lastOff = String(error);
    }
    await sleep(Math.max(0, 100 - (Date.now() - asked)));
  }
  return {
    heldMs: Number.NaN,
    notes: [
      `NOT all of ${victimId}'s partitions were held by survivors 60 s after the kill (ring dropped it after ${fmtS(ringMs)}); still off: ${lastOff}`,
    ],
  };
}

/** One task's executions as the workers saw them. */
export interface TaskRuns {
  taskId: string;
  runs: number;
  firstMs: number;
  firstVia: number;
  firstAttempt: number;
  attempts: number[];
  /** Start of the latest run, Unix ms. */
  againMs: number;
}

export function byTask(results: WorkerResult[]): Map<string, TaskRuns> {
  const out = new Map<string, TaskRuns>();
  for (const r of results) {
    const s = r.starts;
    if (!s) continue;
    for (let i = 0; i < s.taskIds.length; i++) {
      const id = s.taskIds[i] as string;
      const at = s.startMs[i] as number;
      const run = out.get(id);
      if (!run) {
        out.set(id, {
          taskId: id,
          runs: 1,
          firstMs: at,
          firstVia: s.via[i] as number,
          firstAttempt: s.attempts[i] as number,
          attempts: [s.attempts[i] as number],
          againMs: at,
        });
        continue;
      }
      run.runs++;
      run.againMs = Math.max(run.againMs, at);
      run.attempts.push(s.attempts[i] as number);
      if (at < run.firstMs) {
        run.firstMs = at;
        run.firstVia = s.via[i] as number;
        run.firstAttempt = s.attempts[i] as number;
      }
    }
  }
  return out;
}

/**
 * Tasks whose handler ran more than once. One counts as in flight on the dead node when its
 * first run was polled from that node (so claimed before the kill: a dead node answers no
 * poll): its result had to go back through the dead node, so its lease ran out and it ran
 * again. Any other duplicate is unexplained.
 */
export function duplicates(
  runs: TaskRuns[],
  victimIndex: number,
  killMs: number,
): { duplicated: number; inFlight: number; notes: string[] } {
  const dup = runs.filter((r) => r.runs > 1);
  const inFlight = dup.filter((r) => r.firstVia === victimIndex);
  const other = dup.filter((r) => r.firstVia !== victimIndex);
  const lateFirst = runs.filter((r) => r.runs === 1 && r.firstAttempt > 1).length;
  const notes = [
    `run more than once: ${dup.length} tasks (${dup.reduce((n, r) => n + r.runs - 1, 0)} extra runs); ${inFlight.length} of them first ran from a poll of the dead node`,
  ];
  if (inFlight.length > 0) {
    const firsts = inFlight.map((r) => r.firstMs - killMs);
    const agains = inFlight.map((r) => r.againMs - killMs);
    notes.push(
      `those ${inFlight.length}: first run kill ${signed(Math.min(...firsts))} … ${signed(Math.max(...firsts))}, run again kill + ${fmtS(Math.min(...agains))} … ${fmtS(Math.max(...agains))}; ` +
        `attempts seen ${JSON.stringify(countBy(inFlight.map((r) => r.attempts.join('+'))))}`,
    );
  }
  notes.push(`tasks run once but at attempt > 1 (claimed, never run, lease expired): ${lateFirst}`);
  if (other.length > 0) {
    notes.push(
      `UNEXPLAINED duplicates (first run not polled from the dead node): ${other.length}, e.g. ` +
        other
          .slice(0, 5)
          .map(
            (r) =>
              `${r.taskId} first via node #${r.firstVia + 1} at ${new Date(r.firstMs).toISOString().slice(11, 23)} attempts ${r.attempts.join(',')}`,
          )
          .join('; '),
    );
  }
  return { duplicated: dup.length, inFlight: inFlight.length, notes };
}

export function signed(ms: number): string {
  return `${ms < 0 ? '−' : '+'} ${fmtS(Math.abs(ms))}`;
}

/** Where the tasks that never succeeded are: a summary, and per partition its due times and its owner now. */
export async function diagnoseLost(
  stores: BenchStores,
  schema: string,
  node: ClusterNode,
  partitions: number,
): Promise<{ summary: string; detail: string[] }> {
  const { rows } = await stores.pg.query<{
    partition: number;
    status: string;
    task_type: string;
    due: Date;
    attempts: number;
    n: string;
    created: Date;
  }>(
    `SELECT partition, status, task_type, due_time AS due, attempts, count(*) AS n, min(created_at) AS created
     FROM "${schema}".tasks WHERE task_type IN ($1, $2) AND status <> 'succeeded' GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 4`,
    [HERD_TYPE, PROBE_TYPE],
  );
  const view = await clusterView(node.url, 5_000).catch(() => null);
  const at = (d: Date): string => d.toISOString().slice(11, 23);
  const owner = (partition: number): string => {
    const p = view?.partitions.find((x) => x.partition === partition);
    return `owner ${p?.owner ?? '?'}, held by ${p?.held_by ?? '?'}, epoch ${p?.epoch ?? '?'}`;
  };
  const count = (f: (r: (typeof rows)[number]) => string): string =>
    Object.entries(countByN(rows.map((r) => [f(r), Number(r.n)])))
      .map(([k, n]) => `${k} ×${n}`)
      .join(', ');
  const summary =
    `NOT SUCCEEDED: ${rows.reduce((n, r) => n + Number(r.n), 0)} tasks in ${new Set(rows.map((r) => r.partition)).size} partitions: ` +
    `${count((r) => `${r.task_type} ${r.status} attempts ${r.attempts}`)}; due at ${count((r) => at(r.due))}; their partitions' owners now: ${count((r) => owner(r.partition).split(',')[0] as string)}`;
  const detail = rows.map(
    (r) =>
      `not succeeded: partition ${r.partition} (of ${partitions}): ${r.n} ${r.task_type} ${r.status} due ${at(r.due)}, created ${at(r.created)}; the partition now: ${owner(r.partition)}`,
  );
  return { summary, detail };
}

export function countByN(pairs: [string, number][]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, n] of pairs) out[k] = (out[k] ?? 0) + n;
  return out;
}

/** Claims beyond the first (attempts − 1) and timed-out executions per worker id, from Postgres. */
export async function claimsInPostgres(
  stores: BenchStores,
  schema: string,
  results: WorkerResult[],
  nodes: readonly ClusterNode[],
): Promise<string[]> {
  const { rows } = await stores.pg.query<{ reclaimed: string; extra: string | null }>(
    `SELECT count(*) FILTER (WHERE attempts > 1) AS reclaimed, sum(GREATEST(attempts - 1, 0)) AS extra FROM "${schema}".tasks WHERE task_type IN ($1, $2)`,
    [HERD_TYPE, PROBE_TYPE],
  );
  const timedOut = await stores.pg.query<{ worker_id: string | null; n: string }>(
    `SELECT e.worker_id, count(*) AS n FROM "${schema}".executions e JOIN "${schema}".tasks t ON t.id = e.task_id
     WHERE t.task_type IN ($1, $2) AND e.status = 'timed_out' GROUP BY e.worker_id`,
    [HERD_TYPE, PROBE_TYPE],
  );
  // SDK worker ids are bench-<pid>-<url index>: name the node each one polled.
  const nodeOf = new Map<string, string>();
  for (const r of results)
    for (const u of r.perUrl ?? []) nodeOf.set(u.workerId, nodes.find((n) => n.url === u.url)?.nodeId ?? u.url);
  const byWorker = timedOut.rows.map(
    (r) =>
      `${r.worker_id ?? 'null'}${r.worker_id && nodeOf.has(r.worker_id) ? ` (via ${nodeOf.get(r.worker_id)})` : ''} ${r.n}`,
  );
  return [
    `Postgres: ${rows[0]?.reclaimed ?? 0} herd/probe tasks claimed more than once (${rows[0]?.extra ?? 0} extra claims); timed-out executions by worker: ${byWorker.length > 0 ? byWorker.join(', ') : 'none'}`,
  ];
}

export function traffic(results: WorkerResult[]): string {
  return results
    .flatMap((r) => r.perUrl ?? [])
    .map(
      (u) =>
        `${u.url.replace('http://127.0.0.1:', ':')} ${u.started} started, ${u.reported} accepted, ${u.discarded} discarded, ${u.polls} polls`,
    )
    .join('; ');
}

export function countBy(keys: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of keys) out[k] = (out[k] ?? 0) + 1;
  return out;
}
