/**
 * The nemesis's history (issue 29): the workers' records paired into runs, and the pure check
 * that turns a run directory's records (bench/nemesis-records.ts) and the database's rows into
 * one report. No I/O here: bench/nemesis-check.ts reads the files and the tables; the rules
 * themselves are in bench/nemesis-rules.ts and bench/nemesis-timing.ts.
 */
import {
  RULES,
  type HistoryInput,
  type NemesisReport,
  type RuleId,
  type Run,
  type Violation,
  type WorkerRecord,
} from './nemesis-records.js';
import { checkAttempts, checkHolding, checkLost, type Context } from './nemesis-rules.js';
import { checkCron, checkDag, checkLimits } from './nemesis-timing.js';

export { FAILOVER_LOSS_MS, FAULT_DEFAULT_MS, TOLERANCE_MS } from './nemesis-rules.js';
export * from './nemesis-records.js';

/**
 * The workers' runs. A start is paired with the first later end or drop of the same worker,
 * task and attempt; one with neither ends at its worker's kill (a `worker-kill` fault after
 * it) or else at the run's end.
 */
export function runsOf(input: HistoryInput): { runs: Map<string, Run[]>; orphanEnds: number; cut: number } {
  const kills = new Map<string, number[]>();
  for (const f of input.faults) {
    if (f.kind === 'worker-kill') kills.set(f.target, [...(kills.get(f.target) ?? []), f.t]);
  }
  const byKey = new Map<string, WorkerRecord[]>();
  for (const r of input.workers) {
    const key = `${r.task_id} ${r.attempt} ${r.worker}`;
    const list = byKey.get(key);
    if (list) list.push(r);
    else byKey.set(key, [r]);
  }
  const runs = new Map<string, Run[]>();
  let orphanEnds = 0;
  let cut = 0;
  for (const records of byKey.values()) {
    records.sort((a, b) => a.t - b.t || (a.ev === 'start' ? -1 : 1));
    let open: Run | null = null;
    let last = null as Run | null;
    const close = (run: Run): void => {
      last = run;
      const list = runs.get(run.taskId);
      if (list) list.push(run);
      else runs.set(run.taskId, [run]);
    };
    const closeUnended = (run: Run, before: number): void => {
      const kill = (kills.get(run.worker) ?? [])
        .filter((t) => t >= run.startMs && t <= before)
        .sort((a, b) => a - b)[0];
      if (kill !== undefined) close({ ...run, endMs: kill, how: 'killed' });
      else {
        cut++;
        close({ ...run, endMs: Math.max(run.startMs, input.run.ended_ms), how: 'cut' });
      }
    };
    for (const r of records) {
      if (r.ev === 'answer') {
        if (open) closeUnended(open, r.t);
        open = null;
        if (last) Object.assign(last, { answer: r.outcome, answerMs: r.t });
        else orphanEnds++;
      } else if (r.ev === 'start') {
        if (open) closeUnended(open, r.t);
        open = { taskId: r.task_id, attempt: r.attempt, worker: r.worker, startMs: r.t, endMs: r.t, how: 'cut' };
      } else if (!open) {
        orphanEnds++;
      } else {
        close({ ...open, endMs: r.t, how: r.ev, ...(r.ev === 'end' ? { outcome: r.outcome } : {}) });
        open = null;
      }
    }
    if (open) closeUnended(open, Infinity);
  }
  for (const list of runs.values()) list.sort((a, b) => a.startMs - b.startMs);
  return { runs, orphanEnds, cut };
}

/** Checks a run's history against every rule (see the issue 29 brief and each rule's comment). */
export function checkHistory(input: HistoryInput): NemesisReport {
  const { runs, orphanEnds, cut } = runsOf(input);
  const violations: Violation[] = [];
  const ctx: Context = { input, runs, violate: (v) => violations.push(v) };
  const lost = checkLost(ctx);
  const attempts = checkAttempts(ctx);
  const holding = checkHolding(ctx);
  const cron = checkCron(ctx);
  checkDag(ctx);
  const limits = checkLimits(ctx, holding.claimLostCuts);

  const count = (keys: string[]): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const k of keys) out[k] = (out[k] ?? 0) + 1;
    return out;
  };
  const dags = input.producers.filter((p) => p.ev === 'dag');
  return {
    runMs: input.run.ended_ms - input.run.started_ms,
    faults: count(input.faults.map((f) => f.kind)),
    acknowledged: count(input.producers.flatMap((p) => (p.ev === 'ack' ? [p.kind] : []))),
    dags: { count: dags.length, nodes: dags.reduce((n, d) => n + d.nodes.length, 0) },
    cron: { schedules: cron.schedules, instances: cron.instances },
    gaveUp: input.producers.filter((p) => p.ev === 'gave_up').length,
    tornLines: input.tornLines,
    orphanEnds,
    cutRuns: cut,
    notDue: lost.notDue,
    lost: lost.lost,
    strays: lost.strays,
    duplicates: holding.duplicates,
    duplicatedTasks: holding.duplicatedTasks,
    unseenAttempts: attempts.unseen,
    unknownAnswers: attempts.unknownAnswers,
    cronGaps: cron.gaps,
    limits,
    violations,
    violationsByRule: Object.fromEntries(
      RULES.map((rule) => [rule, violations.filter((v) => v.rule === rule).length]),
    ) as Record<RuleId, number>,
    verdict: violations.length === 0 ? 'PASS' : 'FAIL',
  };
}
