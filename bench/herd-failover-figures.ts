/**
 * What `npm run bench:herd-failover` (bench/herd-failover.ts) makes of a run: from the
 * workers' record of every handler start and the task rows read back from Postgres, the tasks
 * lost, those handed out twice and why, the herd's start lag, and per wheel partition the
 * longest time without a delivery from the kill.
 */
import pg from 'pg';
import { partitionOf } from '../src/lib/ids.js';
import { duplicatesOf, type Duplicate } from './pg-failover.js';
import type { StartRecord } from './protocol.js';
import { percentiles } from './stats.js';

/** Every handler start across the worker processes, as one list. */
export interface Start {
  taskId: string;
  attempt: number;
  startMs: number;
}

export function flattenStarts(records: readonly (StartRecord | undefined)[]): Start[] {
  const out: Start[] = [];
  for (const r of records) {
    if (r === undefined) continue;
    for (let i = 0; i < r.taskIds.length; i++) {
      out.push({ taskId: r.taskIds[i]!, attempt: r.attempts[i]!, startMs: r.startMs[i]! });
    }
  }
  return out;
}

/** The end of the acknowledged tasks, from their rows. */
export interface Outcome {
  /** Acknowledged tasks not succeeded at the end: not in the database at all, or in another state. */
  lost: { taskId: string; status: string; attempts: number | null }[];
  /** The run's rows by status. */
  byStatus: Record<string, number>;
  /** The earliest claim (`started_at`, node clock) after the kill, as ms after it; null if none. */
  firstClaimAfterKillMs: number | null;
  /** The last completion (`completed_at`, node clock), Unix ms; null if none. */
  lastCompletedMs: number | null;
}

/** Opens a connection to `url`, runs `fn`, closes it. */
export async function withPostgres<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Succeeded tasks of the type, counted now. */
export async function countSucceeded(url: string, schema: string, taskType: string): Promise<number> {
  return withPostgres(url, async (c) => {
    const { rows } = await c.query<{ n: string }>(
      `SELECT count(*) AS n FROM "${schema}".tasks WHERE task_type = $1 AND status = 'succeeded'`,
      [taskType],
    );
    return Number(rows[0]?.n ?? 0);
  });
}

export async function readOutcome(
  url: string,
  schema: string,
  taskType: string,
  acknowledged: readonly string[],
  killedMs: number,
): Promise<Outcome> {
  return withPostgres(url, async (c) => {
    const { rows } = await c.query<{ id: string; status: string; attempts: number }>(
      `SELECT id::text, status, attempts FROM "${schema}".tasks WHERE task_type = $1`,
      [taskType],
    );
    const { rows: first } = await c.query<{ ms: string | null; last: string | null }>(
      `SELECT (extract(epoch FROM min(started_at) FILTER (WHERE started_at >= to_timestamp($2::double precision / 1000))) * 1000)::bigint AS ms,
              (extract(epoch FROM max(completed_at)) * 1000)::bigint AS last
         FROM "${schema}".tasks WHERE task_type = $1`,
      [taskType, killedMs],
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    const byStatus: Record<string, number> = {};
    for (const r of rows) byStatus[r.status] = (byStatus[r.status] ?? 0) + 1;
    const lost = acknowledged.flatMap((taskId) => {
      const row = byId.get(taskId);
      if (row?.status === 'succeeded') return [];
      return [{ taskId, status: row?.status ?? 'missing', attempts: row?.attempts ?? null }];
    });
    const firstMs = first[0]?.ms;
    const lastMs = first[0]?.last;
    return {
      lost,
      byStatus,
      firstClaimAfterKillMs: firstMs === null || firstMs === undefined ? null : Number(firstMs) - killedMs,
      lastCompletedMs: lastMs === null || lastMs === undefined ? null : Number(lastMs),
    };
  });
}

export interface Handouts {
  /** Tasks whose handler ran at least once. */
  started: number;
  duplicates: Duplicate[];
  /** Count of duplicates by why. */
  why: Record<string, number>;
  /** Tasks whose first start was at or after the kill (not yet started when it came). */
  startedAfterKill: number;
  /** Start lag (first start − T) over the tasks, ms. */
  lagMs: { p50: number; p99: number; max: number };
}

export function handouts(starts: readonly Start[], dueMs: number, killedMs: number): Handouts {
  const first = new Map<string, number>();
  for (const s of starts) {
    const seen = first.get(s.taskId);
    if (seen === undefined || s.startMs < seen) first.set(s.taskId, s.startMs);
  }
  const lags = Float64Array.from(first.values(), (ms) => ms - dueMs);
  const [p50, p99, max] = percentiles(lags, [50, 99, 100]) as [number, number, number];
  const duplicates = duplicatesOf(starts);
  const why: Record<string, number> = {};
  for (const d of duplicates) why[d.why] = (why[d.why] ?? 0) + 1;
  let startedAfterKill = 0;
  for (const ms of first.values()) if (ms >= killedMs) startedAfterKill++;
  return { started: first.size, duplicates, why, startedAfterKill, lagMs: { p50, p99, max } };
}

/** One wheel partition around the kill. */
export interface PartitionGap {
  partition: number;
  /** Its tasks not yet started at the kill. */
  leftAtKill: number;
  /** From the kill to its first start after it, ms (null: none after the kill). */
  firstAfterMs: number | null;
  /**
   * Its longest stretch without a start, from the kill to its last start, ms (the stretch from
   * the kill to its first start included): how long it did not deliver while it had tasks.
   */
  gapMs: number | null;
}

export function partitionGaps(starts: readonly Start[], partitions: number, killedMs: number): PartitionGap[] {
  const times: number[][] = Array.from({ length: partitions }, () => []);
  const firstStart = new Map<string, number>();
  for (const s of starts) {
    times[partitionOf(s.taskId, partitions)]!.push(s.startMs);
    const seen = firstStart.get(s.taskId);
    if (seen === undefined || s.startMs < seen) firstStart.set(s.taskId, s.startMs);
  }
  const left = new Array<number>(partitions).fill(0);
  for (const [taskId, ms] of firstStart) if (ms >= killedMs) left[partitionOf(taskId, partitions)]!++;
  return times.map((list, partition) => {
    const after = list.filter((t) => t >= killedMs).sort((a, b) => a - b);
    if (after.length === 0) return { partition, leftAtKill: left[partition]!, firstAfterMs: null, gapMs: null };
    let last = killedMs;
    let longest = 0;
    for (const t of after) {
      longest = Math.max(longest, t - last);
      last = t;
    }
    return { partition, leftAtKill: left[partition]!, firstAfterMs: after[0]! - killedMs, gapMs: longest };
  });
}

/** `p3 4.21 s (812 left)`-style lines: the partitions that still had tasks at the kill, longest gap first. */
export function describeGaps(gaps: readonly PartitionGap[]): {
  line: string;
  minS: number | null;
  maxS: number | null;
  medianS: number | null;
} {
  const busy = gaps.filter((g) => g.leftAtKill > 0 && g.gapMs !== null).sort((a, b) => b.gapMs! - a.gapMs!);
  const idle = gaps.length - busy.length;
  const seconds = busy.map((g) => g.gapMs! / 1000);
  const line =
    busy.map((g) => `p${g.partition} ${(g.gapMs! / 1000).toFixed(2)} s (${g.leftAtKill} left)`).join(', ') +
    (idle > 0 ? `${busy.length > 0 ? '; ' : ''}${idle} drained before the kill` : '');
  return {
    line,
    minS: seconds.at(-1) ?? null,
    maxS: seconds[0] ?? null,
    medianS: seconds.length === 0 ? null : seconds[Math.floor(seconds.length / 2)]!,
  };
}
