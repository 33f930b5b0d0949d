/**
 * The nemesis's records (issue 29): what its producers, workers and fault injector write to a run
 * directory, the rows the checker reads from the database, and the report it makes of them.
 * Types and parsing only: bench/nemesis-history.ts pairs the records into runs and checks them.
 */
import type { ResultOutcome } from '../src/worker/index.js';

export type FaultKind =
  | 'node-kill'
  | 'node-stop'
  | 'pg-failover'
  | 'redis-primary-kill'
  | 'partition'
  | 'clock-step'
  | 'worker-drop-leases'
  | 'worker-kill';

/** `run.json`. */
export interface RunInfo {
  schema: string;
  postgres_url: string;
  started_ms: number;
  ended_ms: number;
  /** Declared limits by name; `x:*` is a family. */
  limits: Record<string, { concurrency?: number | null }>;
}

export type ProducerRecord =
  | { ev: 'ack'; t: number; task_id: string; idem: string; kind: 'immediate' | 'delayed' | 'limited'; due_ms: number }
  | { ev: 'dag'; t: number; dag_id: string; nodes: { ref: string; task_id: string; deps: string[] }[] }
  | { ev: 'cron'; t: number; schedule_id: string; expr: string; every_ms: number; end_ms: number }
  | { ev: 'gave_up'; t: number; idem: string; kind: string; last: string };

export type WorkerRecord =
  | {
      ev: 'start';
      t: number;
      task_id: string;
      attempt: number;
      worker: string;
      path: 'channel' | 'http';
      task_type: string;
    }
  | { ev: 'end'; t: number; task_id: string; attempt: number; worker: string; outcome: 'ok' | 'lease_lost' | 'error' }
  | { ev: 'drop'; t: number; task_id: string; attempt: number; worker: string }
  /** The node's answer to the result of a run that ended `ok` (the SDK's `onResult`). */
  | { ev: 'answer'; t: number; task_id: string; attempt: number; worker: string; outcome: ResultOutcome };

export interface FaultRecord {
  ev: 'fault';
  /** When it struck: a `pg-failover`'s is the primary's kill (what the loss windows count from). */
  t: number;
  kind: FaultKind;
  target: string;
  until?: number;
}

/** A row of `tasks`, times in Unix ms. */
export interface TaskRow {
  id: string;
  taskType: string;
  status: string;
  attempts: number;
  scheduleType: string;
  scheduleId: string | null;
  fireMs: number | null;
  dagId: string | null;
  limits: string[] | null;
  completedMs: number | null;
  dueMs: number;
}

/** A row of `executions`: an attempt the task outlived (or that a lease expiry ended). */
export interface ExecutionRow {
  taskId: string;
  attempt: number;
  status: string;
  startedMs: number | null;
  completedMs: number;
}

export interface HistoryInput {
  run: RunInfo;
  producers: ProducerRecord[];
  workers: WorkerRecord[];
  faults: FaultRecord[];
  /** Lines of the logs that did not parse (a torn last line of a killed process). */
  tornLines: number;
  tasks: Map<string, TaskRow>;
  /** By task id, then attempt. */
  executions: Map<string, Map<number, ExecutionRow>>;
  /** Task id → its predecessors' ids (`task_dependencies`). */
  dependencies: Map<string, string[]>;
}

/** One hand-out of a task as a worker saw it: from its start to what ended its hold. */
export interface Run {
  taskId: string;
  attempt: number;
  worker: string;
  startMs: number;
  endMs: number;
  /** `cut`: no end, drop or kill before the run's end. */
  how: 'end' | 'drop' | 'killed' | 'cut';
  outcome?: 'ok' | 'lease_lost' | 'error';
  /** What the node made of the run's result; none when no answer was logged (worker killed, run cut). */
  answer?: ResultOutcome;
  answerMs?: number;
}

export type RuleId = 'lost' | 'attempts' | 'double-holding' | 'cron' | 'dag' | 'limits';
export const RULES: readonly RuleId[] = ['lost', 'attempts', 'double-holding', 'cron', 'dag', 'limits'];

export interface Violation {
  rule: RuleId;
  taskIds: string[];
  why: string;
}

export type DuplicateReason =
  'lease ran out' | 'claim lost in failover' | 'result lost in failover' | 'retry after failure' | 'other';

export interface NemesisReport {
  runMs: number;
  faults: Record<string, number>;
  acknowledged: Record<string, number>;
  dags: { count: number; nodes: number };
  cron: { schedules: number; instances: number };
  gaveUp: number;
  tornLines: number;
  /** Worker ends and drops that match no start (a torn start line). */
  orphanEnds: number;
  /** Runs with no end, drop or kill: cut at the run's end. */
  cutRuns: number;
  /** Tasks due after the run ended: not expected to have finished. */
  notDue: number;
  lost: { taskId: string; status: string }[];
  /** Task rows that no acknowledgement names (a submit whose answer was lost: allowed). */
  strays: number;
  /** Extra starts (beyond a task's first) by why they happened. */
  duplicates: Record<DuplicateReason, number>;
  duplicatedTasks: number;
  /** Attempts no worker saw, each ended `timed_out` (a claim's answer lost with a node). */
  unseenAttempts: number;
  /** Succeeded tasks whose final run has no answer logged (worker killed, or report answered error). */
  unknownAnswers: number;
  cronGaps: { count: number; missed: number; longestMs: number };
  limits: { key: string; concurrency: number; maxObserved: number }[];
  violations: Violation[];
  violationsByRule: Record<RuleId, number>;
  verdict: 'PASS' | 'FAIL';
}

/**
 * One log file's records: a line that does not parse as a JSON object with an `ev` (a torn
 * write of a killed process) is counted and skipped.
 */
export function parseJsonLines<T>(text: string): { records: T[]; torn: number } {
  const records: T[] = [];
  let torn = 0;
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    try {
      const value = JSON.parse(line) as unknown;
      if (typeof value === 'object' && value !== null && typeof (value as { ev?: unknown }).ev === 'string') {
        records.push(value as T);
      } else torn++;
    } catch {
      torn++;
    }
  }
  return { records, torn };
}
