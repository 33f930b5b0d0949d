/**
 * `node dist/bench/nemesis-check.js --dir D [--postgres URL] [--schema S]`: the nemesis's
 * history checker (issue 29). Reads a run directory (run.json, producer-*.jsonl,
 * worker-*.jsonl, faults.jsonl: the format is in bench/nemesis-history.ts) and the run's
 * tables, checks them (bench/nemesis-rules.ts, bench/nemesis-timing.ts), prints one summary
 * and exits 1 on any violation. The Postgres URL and schema come from run.json unless given.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { openPostgres, type Db } from '../src/store/db.js';
import { FAULT_KINDS } from './nemesis-faults.js';
import {
  checkHistory,
  parseJsonLines,
  RULES,
  type ExecutionRow,
  type FaultRecord,
  type HistoryInput,
  type NemesisReport,
  type ProducerRecord,
  type RunInfo,
  type TaskRow,
  type WorkerRecord,
} from './nemesis-history.js';

/** Rows read per round trip: a run has up to ~200 000 tasks. */
const PAGE = 10_000;

/** Reads `dir` and the run's tables, and checks them. */
export async function checkRunDir(dir: string, opts: { postgresUrl: string; schema: string }): Promise<NemesisReport> {
  const run = JSON.parse(await readFile(join(dir, 'run.json'), 'utf8')) as RunInfo;
  const files = (await readdir(dir)).sort();
  let tornLines = 0;
  const read = async <T>(prefix: string): Promise<T[]> => {
    const out: T[] = [];
    for (const f of files.filter((x) => x.startsWith(prefix) && x.endsWith('.jsonl'))) {
      const { records, torn } = parseJsonLines<T>(await readFile(join(dir, f), 'utf8'));
      tornLines += torn;
      for (const r of records) out.push(r);
    }
    return out;
  };
  const producers = await read<ProducerRecord>('producer-');
  const workers = await read<WorkerRecord>('worker-');
  const faults = (await read<FaultRecord>('faults')).filter((f) => f.ev === 'fault');
  const db = openPostgres({
    url: opts.postgresUrl,
    schema: opts.schema,
    poolSize: 1,
    applicationName: 'nemesis-check',
  });
  try {
    const input: HistoryInput = {
      run,
      producers,
      workers,
      faults,
      tornLines,
      tasks: await readTasks(db),
      executions: await readExecutions(db),
      dependencies: await readDependencies(db),
    };
    return checkHistory(input);
  } finally {
    await db.close();
  }
}

const ms = (d: Date | null): number | null => (d === null ? null : d.getTime());

/** Every task row but the schedules' own, a page at a time in id order. */
async function readTasks(db: Db): Promise<Map<string, TaskRow>> {
  const out = new Map<string, TaskRow>();
  for (let after = '00000000-0000-0000-0000-000000000000'; ;) {
    const { rows } = await db.query<{
      id: string;
      task_type: string;
      status: string;
      attempts: number;
      schedule_type: string;
      schedule_id: string | null;
      fire_time: Date | null;
      dag_id: string | null;
      limits: string[] | null;
      completed_at: Date | null;
      due_time: Date;
    }>(
      `SELECT id, task_type, status, attempts, schedule_type, schedule_id, fire_time, dag_id, limits, completed_at, due_time
       FROM tasks WHERE id > $1 AND schedule_type <> 'cron' ORDER BY id LIMIT ${PAGE}`,
      [after],
    );
    for (const r of rows) {
      out.set(r.id, {
        id: r.id,
        taskType: r.task_type,
        status: r.status,
        attempts: r.attempts,
        scheduleType: r.schedule_type,
        scheduleId: r.schedule_id,
        fireMs: ms(r.fire_time),
        dagId: r.dag_id,
        limits: r.limits,
        completedMs: ms(r.completed_at),
        dueMs: r.due_time.getTime(),
      });
    }
    if (rows.length < PAGE) return out;
    after = (rows.at(-1) as { id: string }).id;
  }
}

async function readExecutions(db: Db): Promise<Map<string, Map<number, ExecutionRow>>> {
  const out = new Map<string, Map<number, ExecutionRow>>();
  for (let after = { id: '00000000-0000-0000-0000-000000000000', attempt: 0 }; ;) {
    const { rows } = await db.query<{
      task_id: string;
      attempt: number;
      status: string;
      started_at: Date | null;
      completed_at: Date;
    }>(
      `SELECT task_id, attempt, status, started_at, completed_at FROM executions
       WHERE (task_id, attempt) > ($1::uuid, $2::int) ORDER BY task_id, attempt LIMIT ${PAGE}`,
      [after.id, after.attempt],
    );
    for (const r of rows) {
      const byAttempt = out.get(r.task_id) ?? new Map<number, ExecutionRow>();
      byAttempt.set(r.attempt, {
        taskId: r.task_id,
        attempt: r.attempt,
        status: r.status,
        startedMs: ms(r.started_at),
        completedMs: r.completed_at.getTime(),
      });
      out.set(r.task_id, byAttempt);
    }
    if (rows.length < PAGE) return out;
    const last = rows.at(-1) as { task_id: string; attempt: number };
    after = { id: last.task_id, attempt: last.attempt };
  }
}

async function readDependencies(db: Db): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  const { rows } = await db.query<{ task_id: string; predecessor_id: string }>(
    'SELECT task_id, predecessor_id FROM task_dependencies',
  );
  for (const r of rows) out.set(r.task_id, [...(out.get(r.task_id) ?? []), r.predecessor_id]);
  return out;
}

/** The report as a short plain-text summary, one line per `log` call. */
export function printReport(report: NemesisReport, log: (line: string) => void): void {
  const list = (counts: Record<string, number>): string =>
    Object.entries(counts)
      .filter(([, n]) => n > 0)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ') || 'none';
  log(`nemesis history: ${(report.runMs / 60_000).toFixed(1)} min`);
  log(`faults injected: ${list(report.faults)}`);
  // Not a violation (a run without namespaces has no partitions), but a run that claims to have
  // survived the menu must show which of it never came.
  const never = FAULT_KINDS.filter((kind) => (report.faults[kind] ?? 0) === 0);
  if (never.length > 0) log(`fault kinds never injected: ${never.join(', ')}`);
  log(
    `acknowledged: ${list(report.acknowledged)}; DAGs ${report.dags.count} (${report.dags.nodes} tasks); ` +
      `cron schedules ${report.cron.schedules} (${report.cron.instances} instances); gave up ${report.gaveUp}`,
  );
  log(
    `logs: ${report.tornLines} torn lines, ${report.orphanEnds} ends without a start, ${report.cutRuns} runs cut at the run's end; ` +
      `${report.notDue} tasks due after the run ended`,
  );
  const lostBy: Record<string, number> = {};
  for (const l of report.lost) lostBy[l.status] = (lostBy[l.status] ?? 0) + 1;
  log(
    `lost: ${report.lost.length}${report.lost.length > 0 ? ` (${list(lostBy)})` : ''}; rows no acknowledgement names: ${report.strays}`,
  );
  log(`duplicated: ${report.duplicatedTasks} tasks; extra starts by why: ${list(report.duplicates)}`);
  log(
    `attempts no worker saw (timed out): ${report.unseenAttempts}; succeeded tasks whose final answer was not logged: ${report.unknownAnswers}`,
  );
  log(
    `cron gaps: ${report.cronGaps.count} (${report.cronGaps.missed} fire times), longest ${(report.cronGaps.longestMs / 1000).toFixed(1)} s`,
  );
  // The keys nearest their limit (or furthest past it) first.
  const limits = [...report.limits].sort((a, b) => b.maxObserved - b.concurrency - (a.maxObserved - a.concurrency));
  log(
    `limits: ${limits.length} keys checked${limits.length > 10 ? ' (the 10 fullest)' : ''}: ` +
      (limits
        .slice(0, 10)
        .map((l) => `${l.key} max ${l.maxObserved}/${l.concurrency}`)
        .join(', ') || 'none'),
  );
  for (const rule of RULES) {
    const of = report.violations.filter((v) => v.rule === rule);
    log(`violations ${rule}: ${report.violationsByRule[rule]}`);
    for (const v of of.slice(0, 10)) log(`  ${v.taskIds.join(', ')}: ${v.why}`);
  }
  log(`verdict: ${report.verdict}`);
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { dir: { type: 'string' }, postgres: { type: 'string' }, schema: { type: 'string' } },
  });
  if (values.dir === undefined) throw new Error('usage: nemesis-check --dir D [--postgres URL] [--schema S]');
  const run = JSON.parse(await readFile(join(values.dir, 'run.json'), 'utf8')) as RunInfo;
  const report = await checkRunDir(values.dir, {
    postgresUrl: values.postgres ?? run.postgres_url,
    schema: values.schema ?? run.schema,
  });
  printReport(report, (line) => console.log(line));
  return report.verdict === 'PASS' ? 0 : 1;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error);
      process.exit(2);
    },
  );
}
