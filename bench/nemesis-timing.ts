/**
 * The nemesis checker's rules about time across tasks (issue 29): each cron fire time made one
 * instance (gaps only where a fault explains them), no DAG dependent started before its
 * predecessors succeeded, and no limit key ever had more runs at once than its concurrency.
 */
import { resolveLimit, typeLimit, type LimitSpec } from '../src/domain/limits.js';
import type { Run } from './nemesis-records.js';
import {
  attemptEnd,
  clusterFaultOverlaps,
  FAILOVER_LOSS_MS,
  failoverWithin,
  iso,
  TOLERANCE_MS,
  type Context,
} from './nemesis-rules.js';

/**
 * Rule `cron`. An instance's id is derived from (schedule, generation, fire time), so two
 * instances of one fire time mean a write path that bypassed it. Missing fire times: under
 * `fire_once` (the default), a schedule whose actor was away longer than the misfire threshold
 * runs its overdue instance once — it keeps its own, earlier fire time — and goes on from the
 * first fire time after it is back (src/actors/cron-times.ts `fireChange`). So a gap between
 * two instances' fire times is what downtime leaves, and it is allowed when each fire time it
 * misses is under a cluster fault or within `CRON_RECOVERY_MS` of one's end (its window
 * [t, until or t + 15 s]): a schedule that stays silent longer than that after the cluster
 * is whole again is stuck, however many faults came before. Also checked: the first instance came one interval after the schedule was
 * acknowledged, and instances went on until its end (or the run's end, less one interval).
 */
/** How long after a fault a schedule may stay silent: the failure timeout, a rehydration, a misfire pass, ms. */
export const CRON_RECOVERY_MS = 30_000;

export function checkCron(ctx: Context): {
  schedules: number;
  instances: number;
  gaps: { count: number; missed: number; longestMs: number };
} {
  const { input } = ctx;
  const schedules = input.producers.flatMap((p) => (p.ev === 'cron' ? [p] : []));
  const fires = new Map<string, Map<number, string[]>>(schedules.map((s) => [s.schedule_id, new Map()]));
  let instances = 0;
  for (const row of input.tasks.values()) {
    const byFire = row.scheduleId === null ? undefined : fires.get(row.scheduleId);
    if (!byFire || row.fireMs === null) continue;
    instances++;
    byFire.set(row.fireMs, [...(byFire.get(row.fireMs) ?? []), row.id]);
  }
  const gaps = { count: 0, missed: 0, longestMs: 0 };
  for (const s of schedules) {
    const byFire = fires.get(s.schedule_id) as Map<number, string[]>;
    for (const [fireMs, ids] of byFire) {
      if (ids.length > 1) {
        ctx.violate({
          rule: 'cron',
          taskIds: ids,
          why: `schedule ${s.schedule_id}: fire time ${iso(fireMs)} has ${ids.length} instances`,
        });
      }
      if (fireMs > s.end_ms) {
        ctx.violate({
          rule: 'cron',
          taskIds: ids,
          why: `schedule ${s.schedule_id}: fire time ${iso(fireMs)} is after its end ${iso(s.end_ms)}`,
        });
      }
    }
    const times = [...byFire.keys()].sort((a, b) => a - b);
    const gap = (fromMs: number, toMs: number, missed: number): void => {
      if (missed < 1) return;
      gaps.count++;
      gaps.missed += missed;
      gaps.longestMs = Math.max(gaps.longestMs, toMs - fromMs);
      const unexplained: number[] = [];
      for (let k = 1; k <= missed; k++) {
        const fireMs = fromMs + k * s.every_ms;
        if (!clusterFaultOverlaps(input, fireMs - CRON_RECOVERY_MS, fireMs)) unexplained.push(fireMs);
      }
      if (unexplained.length === 0) return;
      ctx.violate({
        rule: 'cron',
        taskIds: [s.schedule_id],
        why: `schedule ${s.schedule_id}: no instance for ${missed} fire time(s) between ${iso(fromMs)} and ${iso(toMs)}, ${unexplained.length} of them (from ${iso(unexplained[0] as number)}) more than ${CRON_RECOVERY_MS / 1000} s after any fault`,
      });
    };
    const first = times[0] ?? Infinity;
    const horizon = Math.min(s.end_ms, input.run.ended_ms - s.every_ms);
    gap(
      s.t,
      Math.min(first, horizon + s.every_ms),
      Math.floor((Math.min(first, horizon) - s.t - TOLERANCE_MS) / s.every_ms),
    );
    for (let i = 1; i < times.length; i++) {
      const a = times[i - 1] as number;
      const b = times[i] as number;
      gap(a, b, Math.round((b - a) / s.every_ms) - 1);
    }
    const last = times.at(-1);
    if (last !== undefined) gap(last, horizon + s.every_ms, Math.floor((horizon - last) / s.every_ms));
  }
  return { schedules: schedules.length, instances, gaps };
}

/**
 * Rule `dag`: a dependent's first start comes after each predecessor succeeded (its
 * completion in the database, less the clock tolerance), and never when one did not succeed.
 * The edges are the database's and the producers' both.
 */
export function checkDag(ctx: Context): void {
  const { input } = ctx;
  const predecessors = new Map<string, Set<string>>();
  const add = (id: string, preds: Iterable<string>): void => {
    const set = predecessors.get(id) ?? new Set<string>();
    for (const p of preds) set.add(p);
    predecessors.set(id, set);
  };
  for (const [id, preds] of input.dependencies) add(id, preds);
  for (const p of input.producers) {
    if (p.ev !== 'dag') continue;
    const byRef = new Map(p.nodes.map((n) => [n.ref, n.task_id]));
    for (const n of p.nodes)
      add(
        n.task_id,
        n.deps.flatMap((ref) => byRef.get(ref) ?? []),
      );
  }
  for (const [id, preds] of predecessors) {
    const first = ctx.runs.get(id)?.[0];
    if (!first) continue;
    for (const p of preds) {
      const row = input.tasks.get(p);
      // A predecessor's success that a Postgres failover then lost (its completion committed
      // asynchronously, decision 0003) still happened: a dependent it released may have
      // started before the failover, and the predecessor runs again.
      const lostSuccess = (ctx.runs.get(p) ?? []).some(
        (r) =>
          r.answer === 'accepted' &&
          r.answerMs !== undefined &&
          r.answerMs <= first.startMs + TOLERANCE_MS &&
          failoverWithin(input, r.answerMs - TOLERANCE_MS, r.answerMs + FAILOVER_LOSS_MS) !== null,
      );
      const why =
        row?.status !== 'succeeded'
          ? `started at ${iso(first.startMs)} though its predecessor ${p} is ${row?.status ?? 'missing'}`
          : (row.completedMs === null || first.startMs < row.completedMs - TOLERANCE_MS) && !lostSuccess
            ? `started at ${iso(first.startMs)}, before its predecessor ${p} completed at ${iso(row.completedMs)}`
            : null;
      if (why !== null) ctx.violate({ rule: 'dag', taskIds: [id, p], why });
    }
  }
}

/**
 * Rule `limits`: for each limit key with a declared concurrency (exactly, or by its family in
 * run.json) the holds of the tasks naming it — each run from its start to the earliest of its
 * end and the database's end of its attempt (a lease run out, a result taken; a claim lost in
 * a failover ends where the attempt was handed out again) — never number more than the
 * concurrency at one instant. Every task takes part in its type's `type:<t>` too.
 */
export function checkLimits(
  ctx: Context,
  claimLostCuts: Map<Run, number>,
): { key: string; concurrency: number; maxObserved: number }[] {
  const { input } = ctx;
  const declared = new Map<string, LimitSpec>();
  for (const [name, spec] of Object.entries(input.run.limits)) {
    if (typeof spec.concurrency !== 'number') continue;
    declared.set(name, { concurrency: spec.concurrency, rate: null, onLimit: 'queue', weight: 1 });
  }
  const concurrencyOf = new Map<string, number | null>();
  const holds = new Map<string, { t: number; delta: number; run: Run }[]>();
  for (const [id, runs] of ctx.runs) {
    const row = input.tasks.get(id);
    if (!row) continue;
    for (const name of [...(row.limits ?? []), typeLimit(row.taskType)]) {
      if (!concurrencyOf.has(name))
        concurrencyOf.set(name, resolveLimit(name, (n) => declared.get(n))?.concurrency ?? null);
      if (concurrencyOf.get(name) === null) continue;
      const events = holds.get(name) ?? [];
      for (const r of runs) {
        const dbEnd = attemptEnd(input, row, r.attempt)?.completedMs ?? Infinity;
        const endMs = Math.min(r.endMs, dbEnd, claimLostCuts.get(r) ?? Infinity);
        if (endMs <= r.startMs) continue;
        events.push({ t: r.startMs, delta: 1, run: r }, { t: endMs, delta: -1, run: r });
      }
      holds.set(name, events);
    }
  }
  const out: { key: string; concurrency: number; maxObserved: number }[] = [];
  for (const [key, events] of holds) {
    const concurrency = concurrencyOf.get(key) as number;
    // Ends before starts at one instant: a hold given up as another is granted is not an overlap.
    events.sort((a, b) => a.t - b.t || a.delta - b.delta);
    const held = new Set<Run>();
    let max = 0;
    for (const e of events) {
      if (e.delta < 0) {
        held.delete(e.run);
        continue;
      }
      held.add(e.run);
      max = Math.max(max, held.size);
      if (held.size === concurrency + 1) {
        ctx.violate({
          rule: 'limits',
          taskIds: [...held].map((r) => r.taskId),
          why: `${key} (concurrency ${concurrency}) held by ${held.size} runs at ${iso(e.t)}: ${[...held].map((r) => `${r.taskId.slice(0, 8)}#${r.attempt}@${r.worker}`).join(', ')}`,
        });
      }
    }
    out.push({ key, concurrency, maxObserved: max });
  }
  return out.sort((a, b) => a.key.localeCompare(b.key));
}
