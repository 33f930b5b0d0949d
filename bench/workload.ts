import type { BenchNode } from './node-process.js';
import type { WorkerResult } from './protocol.js';
import type { BenchStores } from './stores.js';

/** What every workload is given and returns; the figures of one run of one workload. */

export interface Bar {
  /** The figure must be at least (`>=`) or at most (`<=`) `value`. */
  op: '>=' | '<=';
  value: number;
  /** What the bar is compared with, e.g. "BullMQ ≈ 19 000/s". */
  reference?: string;
}

export interface MetricSpec {
  key: string;
  label: string;
  unit: string;
  digits: number;
  bar?: Bar;
}

export interface RunFigures {
  values: Record<string, number>;
  /** Anything odd about the run (retries, a margin too short, a count mismatch). */
  notes: string[];
  /** false when the tasks' final states did not match what was submitted. */
  verified: boolean;
}

export interface RunContext {
  stores: BenchStores;
  /** Starts this run's node (a fresh schema and prefix), recorded for cleanup. */
  startNode(): Promise<BenchNode>;
  quick: boolean;
  workers: number;
  pollers: number;
  /** W4's firing window (`--cron-window-seconds`), ms; null: the workload's default. */
  cronWindowMs: number | null;
  log(line: string): void;
}

/**
 * Runs `fn` with a fresh run context (bench/run.ts makes it) and afterwards stops every node it
 * started (`nodes`, as they are started) and removes their schemas and keys, whatever happened.
 */
export type WithRunContext = <T>(fn: (ctx: RunContext, nodes: readonly BenchNode[]) => Promise<T>) => Promise<T>;

export interface Workload {
  id: string;
  title: string;
  /** How the figures are defined, for the report. */
  definitions: string[];
  metrics: MetricSpec[];
  run(ctx: RunContext): Promise<RunFigures>;
}

/** Checks every task of `taskType` succeeded, from Postgres. */
export async function verifyAllSucceeded(
  ctx: RunContext,
  node: BenchNode,
  taskType: string,
  expected: number,
): Promise<{ verified: boolean; notes: string[] }> {
  const counts = await ctx.stores.countByStatus(node.schema, taskType);
  const succeeded = counts.succeeded ?? 0;
  if (succeeded === expected && Object.keys(counts).length === 1) return { verified: true, notes: [] };
  const message = `MISMATCH: expected ${expected} succeeded ${taskType} tasks, Postgres has ${JSON.stringify(counts)}`;
  ctx.log(`!!! ${message}`);
  return { verified: false, notes: [message] };
}

/** One line on how the workers talked to the node: poll and completion batch sizes. */
export function workerTraffic(results: WorkerResult[]): string {
  const sum = (f: (r: WorkerResult) => number): number => results.reduce((n, r) => n + f(r), 0);
  const started = sum((r) => r.started);
  const polls = sum((r) => r.polls);
  const requests = sum((r) => r.completionRequests);
  const rss = Math.max(...results.map((r) => r.maxRssMiB));
  const frames = sum((r) => r.resultFrames ?? 0);
  if (polls === 0 && frames > 0) {
    // Over the worker channel: tasks are pushed, results go back in frames.
    return (
      `workers: over the channel, ${frames} results frames (${(sum((r) => r.reported) / frames).toFixed(1)} results each), ` +
      `${sum((r) => r.reconnects ?? 0)} reconnects, max RSS ${rss.toFixed(0)} MiB`
    );
  }
  return (
    `workers: ${polls} polls (${(started / Math.max(1, polls)).toFixed(1)} tasks each), ` +
    `${requests} completion requests (${(sum((r) => r.reported) / Math.max(1, requests)).toFixed(1)} results each), max RSS ${rss.toFixed(0)} MiB`
  );
}
