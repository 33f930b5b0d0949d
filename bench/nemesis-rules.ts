/**
 * The nemesis checker's rules about each task on its own (issue 29): nothing acknowledged is
 * lost, every attempt is accounted for, and no two live workers held a task at once unless
 * the database had ended the earlier hold or a Postgres failover lost the claim. Pure: they
 * read a {@link HistoryInput} and the workers' runs and report through `violate`.
 */
import { FINAL_STATUSES } from '../src/domain/lifecycle.js';
import type { DuplicateReason, HistoryInput, Run, TaskRow, Violation } from './nemesis-records.js';

/** How far a worker's clock reading may sit from the database's for the same instant, ms. */
export const TOLERANCE_MS = 250;
/** A write committed asynchronously this long before a Postgres failover may be lost with it, ms (decision 0025). */
export const FAILOVER_LOSS_MS = 10_000;
/** A fault without `until` is taken to disturb the cluster this long, ms. */
export const FAULT_DEFAULT_MS = 15_000;

export interface Context {
  input: HistoryInput;
  /** By task id, each list by start. */
  runs: Map<string, Run[]>;
  violate: (v: Violation) => void;
}

export function isFinal(status: string): boolean {
  return (FINAL_STATUSES as readonly string[]).includes(status);
}

export function iso(ms: number | null): string {
  return ms === null ? 'never' : new Date(ms).toISOString().slice(11, 23);
}

/**
 * How the database ended attempt `k` of a task: its execution row, or for the attempt that
 * ended the task, the task row; null while it runs (or when the row that should say is missing).
 */
export function attemptEnd(
  input: HistoryInput,
  row: TaskRow,
  k: number,
): { status: string; completedMs: number | null } | null {
  const execution = input.executions.get(row.id)?.get(k);
  if (execution) return { status: execution.status, completedMs: execution.completedMs };
  if (k === row.attempts && isFinal(row.status)) return { status: row.status, completedMs: row.completedMs };
  return null;
}

/**
 * Whether a fault of the cluster or its stores (a worker's own faults aside) was under way at
 * some instant of [fromMs, toMs]: its window is [t, until], or [t, t + FAULT_DEFAULT_MS].
 */
export function clusterFaultOverlaps(input: HistoryInput, fromMs: number, toMs: number): boolean {
  return input.faults.some(
    (f) =>
      f.kind !== 'worker-kill' &&
      f.kind !== 'worker-drop-leases' &&
      f.t <= toMs &&
      (f.until ?? f.t + FAULT_DEFAULT_MS) >= fromMs,
  );
}

/** The first `pg-failover` fault injected within [fromMs, toMs]. */
export function failoverWithin(input: HistoryInput, fromMs: number, toMs: number): number | null {
  const f = input.faults.find((x) => x.kind === 'pg-failover' && x.t >= fromMs && x.t <= toMs);
  return f ? f.t : null;
}

/** The tasks the producers were promised: acknowledged submits, DAG nodes, and the acknowledged schedules' instances. */
export function expectedTasks(input: HistoryInput): Map<string, string> {
  const out = new Map<string, string>();
  const schedules = new Set<string>();
  for (const p of input.producers) {
    if (p.ev === 'ack') out.set(p.task_id, p.kind);
    else if (p.ev === 'dag') for (const n of p.nodes) out.set(n.task_id, 'dag');
    else if (p.ev === 'cron') schedules.add(p.schedule_id);
  }
  for (const row of input.tasks.values()) {
    if (row.scheduleId !== null && schedules.has(row.scheduleId)) out.set(row.id, 'cron instance');
  }
  return out;
}

/**
 * Rule `lost`: every expected task is in the database and final. A task due after the run
 * ended is not expected to have finished (counted, not reported). Also counts the strays: rows
 * no producer was acknowledged (a submit whose answer was lost, given up).
 */
export function checkLost(ctx: Context): {
  lost: { taskId: string; status: string }[];
  notDue: number;
  strays: number;
} {
  const lost: { taskId: string; status: string }[] = [];
  let notDue = 0;
  const expected = expectedTasks(ctx.input);
  for (const [id, kind] of expected) {
    const row = ctx.input.tasks.get(id);
    if (!row) {
      lost.push({ taskId: id, status: 'missing' });
      ctx.violate({ rule: 'lost', taskIds: [id], why: `acknowledged (${kind}) but not in the database` });
    } else if (!isFinal(row.status)) {
      if (row.dueMs > ctx.input.run.ended_ms) {
        notDue++;
        continue;
      }
      lost.push({ taskId: id, status: row.status });
      ctx.violate({
        rule: 'lost',
        taskIds: [id],
        why: `${kind} due ${iso(row.dueMs)} still ${row.status} (attempts ${row.attempts}) when the run ended`,
      });
    }
  }
  let strays = 0;
  for (const id of ctx.input.tasks.keys()) if (!expected.has(id)) strays++;
  return { lost, notDue, strays };
}

/**
 * Rule `attempts`: the workers' attempts agree with the database's count N. No start beyond
 * N; every attempt below N has its execution row; an attempt no worker saw must have timed
 * out (its claim's answer was lost); a succeeded task's attempt N was run, and not only by
 * workers the node refused; a result accepted for an attempt the task outlived is one the
 * database kept as `failed` (a retry), or lost with a Postgres failover soon after; no attempt
 * has two results accepted unless a failover lost the first one's claim and result.
 */
export function checkAttempts(ctx: Context): { unseen: number; unknownAnswers: number } {
  const { input } = ctx;
  let unseen = 0;
  let unknownAnswers = 0;
  const ids = new Set([...expectedTasks(input).keys(), ...ctx.runs.keys()]);
  for (const id of ids) {
    const runs = ctx.runs.get(id) ?? [];
    const row = input.tasks.get(id);
    if (!row) {
      if (runs.length > 0) {
        const r = runs[0] as Run;
        ctx.violate({
          rule: 'attempts',
          taskIds: [id],
          why: `worker ${r.worker} started it, but the database has no such task`,
        });
      }
      continue;
    }
    const n = row.attempts;
    const bad = (why: string): void => ctx.violate({ rule: 'attempts', taskIds: [id], why });
    for (const r of runs) {
      if (r.attempt < 1 || r.attempt > n)
        bad(`worker ${r.worker} started attempt ${r.attempt}, the database counts ${n}`);
    }
    const seen = new Set(runs.map((r) => r.attempt));
    for (let k = 1; k <= n; k++) {
      const end = attemptEnd(input, row, k);
      if (k < n && !input.executions.get(id)?.has(k))
        bad(`attempt ${k} of ${n} (task ${row.status}) has no execution row`);
      if (seen.has(k) || !end) continue;
      if (end.status === 'timed_out') unseen++;
      else bad(`attempt ${k} ended ${end.status} at ${iso(end.completedMs)}, but no worker started it`);
    }
    if (row.status === 'succeeded' && seen.has(n)) {
      const last = runs.filter((r) => r.attempt === n);
      // A result the node stored can still be answered `refused`: when the node dies before its
      // ack leaves, the worker sends the result again on its next socket, and the new node finds
      // the attempt over. So a refusal with a cluster fault between the run's end and its answer
      // says nothing either way; nor does `unacknowledged` (the worker stopped before the ack).
      const ackLost = (r: Run): boolean =>
        r.answer === 'unacknowledged' ||
        (r.answer !== 'accepted' && clusterFaultOverlaps(input, r.endMs, r.answerMs ?? r.endMs));
      if (!last.some((r) => r.answer === 'accepted')) {
        if (
          last.some(
            (r) =>
              r.how === 'killed' || r.how === 'cut' || (r.outcome === 'ok' && r.answer === undefined) || ackLost(r),
          )
        )
          unknownAnswers++;
        else bad(`succeeded at attempt ${n}, but every run of it was refused or dropped`);
      }
    }
    const accepted = new Map<number, Run[]>();
    for (const r of runs) {
      if (r.answer !== 'accepted') continue;
      accepted.set(r.attempt, [...(accepted.get(r.attempt) ?? []), r]);
      if (r.attempt >= n) continue;
      const end = attemptEnd(input, row, r.attempt);
      const lostInFailover =
        end?.status === 'timed_out' &&
        failoverWithin(input, r.endMs - TOLERANCE_MS, r.endMs + FAILOVER_LOSS_MS) !== null;
      if (end?.status !== 'failed' && end?.status !== 'cancelled' && !lostInFailover) {
        bad(
          `worker ${r.worker}'s result for attempt ${r.attempt} was accepted at ${iso(r.endMs)}, but the database ended that attempt ${end?.status ?? 'never'} (no failover to lose it)`,
        );
      }
    }
    for (const [k, list] of accepted) {
      // One attempt number run twice, each result accepted, is what a failover leaves when it
      // loses both the claim and the result of the earlier run (decision 0025: neither is
      // committed synchronously): the row is pending again at the same count. Every earlier
      // run must have ended just before a failover for that.
      const earlier = [...list].sort((a, b) => a.endMs - b.endMs).slice(0, -1);
      const unexplained = earlier.filter(
        (r) => failoverWithin(input, r.endMs - TOLERANCE_MS, r.endMs + FAILOVER_LOSS_MS) === null,
      );
      if (unexplained.length > 0) bad(`${list.length} results accepted for attempt ${k}`);
    }
  }
  return { unseen, unknownAnswers };
}

/** Why a task was started again: `later` started after `earlier`. */
function whyAgain(input: HistoryInput, row: TaskRow, earlier: Run, later: Run): DuplicateReason {
  if (earlier.attempt === later.attempt) {
    return failoverWithin(input, earlier.startMs - FAILOVER_LOSS_MS, later.startMs) !== null
      ? 'claim lost in failover'
      : 'other';
  }
  const end = attemptEnd(input, row, earlier.attempt);
  if (end?.status === 'failed') return 'retry after failure';
  if (end?.status !== 'timed_out') return 'other';
  return earlier.answer === 'accepted' ? 'result lost in failover' : 'lease ran out';
}

/**
 * Rule `double-holding`, and the duplicates. Two runs of a task overlap legitimately only when
 * the database had ended the earlier one's attempt (a lease run out, a failure reported) by the
 * later one's start, or when both carry one attempt and a Postgres failover came between
 * (the claim, committed asynchronously, was lost with the old primary: decision 0025). The
 * same attempt handed out twice without a failover is an `attempts` violation even when the
 * runs do not overlap. Returns, for the limits rule, where each lost claim's hold ended.
 */
export function checkHolding(ctx: Context): {
  duplicates: Record<DuplicateReason, number>;
  duplicatedTasks: number;
  claimLostCuts: Map<Run, number>;
} {
  const { input } = ctx;
  const duplicates: Record<DuplicateReason, number> = {
    'lease ran out': 0,
    'claim lost in failover': 0,
    'result lost in failover': 0,
    'retry after failure': 0,
    other: 0,
  };
  let duplicatedTasks = 0;
  const claimLostCuts = new Map<Run, number>();
  for (const [id, runs] of ctx.runs) {
    const row = input.tasks.get(id);
    if (!row || runs.length < 2) continue;
    duplicatedTasks++;
    for (let j = 1; j < runs.length; j++) {
      const later = runs[j] as Run;
      const earlier = runs.slice(0, j).reduce((a, b) => (b.attempt >= a.attempt ? b : a));
      duplicates[whyAgain(input, row, earlier, later)]++;
      for (const r1 of runs.slice(0, j)) {
        const overlap = later.startMs < r1.endMs;
        const what = `attempt ${r1.attempt} on ${r1.worker} (${iso(r1.startMs)}–${iso(r1.endMs)}, ${r1.how}) and attempt ${later.attempt} on ${later.worker} from ${iso(later.startMs)}`;
        if (r1.attempt === later.attempt) {
          if (failoverWithin(input, r1.startMs - FAILOVER_LOSS_MS, later.startMs) !== null) {
            claimLostCuts.set(r1, Math.min(r1.endMs, later.startMs));
          } else {
            ctx.violate({
              rule: overlap ? 'double-holding' : 'attempts',
              taskIds: [id],
              why: `one attempt handed out twice with no Postgres failover between: ${what}`,
            });
          }
          continue;
        }
        if (!overlap) continue;
        const end = attemptEnd(input, row, r1.attempt);
        const endedInDb =
          r1.attempt < later.attempt &&
          end !== null &&
          end.completedMs !== null &&
          end.completedMs <= later.startMs + TOLERANCE_MS;
        if (!endedInDb) {
          ctx.violate({
            rule: 'double-holding',
            taskIds: [id],
            why: `${what} overlap; the database ended attempt ${r1.attempt} ${end ? `${end.status} at ${iso(end.completedMs)}` : 'never'}`,
          });
        }
      }
    }
  }
  return { duplicates, duplicatedTasks, claimLostCuts };
}
