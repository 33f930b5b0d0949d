/**
 * The Postgres failover scenario (issue 29, item 1), shared by its test
 * (test/e2e/pg-failover.slow.test.ts) and its bench (`npm run chaos -- --pg-failover`): nodes
 * on a pg_auto_failover set ({@link PgHa}) through a multi-host URL, a steady stream of
 * submits that retry on 429/503 with their idempotency keys, HTTP workers that run every task
 * they are handed and report it (retrying a report the node answers 503), and kill -9 of the
 * primary mid-stream. What it answers: every acknowledged (201/200) task and its end, each
 * task handed out more than once and why, the answers the submits got, and how long from the
 * kill to a server taking writes and to the first task claimed on it.
 */
import pg from 'pg';
import { request } from 'undici';
import type { PgHa } from './pg-ha.js';
import { sleep } from './time.js';

export const FAILOVER_TYPE = 'failover.probe';
/** A submit stops retrying after this long, ms (counted as `gave up` among the answers). */
const SUBMIT_GIVE_UP_MS = 60_000;

export interface FailoverScenario {
  ha: PgHa;
  /** The nodes' base URLs: submits and workers go round them. */
  urls: readonly string[];
  /** The nodes' schema on the HA set. */
  schema: string;
  /** Submits before the kill, and after it until this long past the new primary taking writes, ms. */
  beforeKillMs: number;
  afterWritableMs: number;
  /** One submit every this often, ms. */
  submitEveryMs: number;
  /** The tasks' `timeout_seconds` (their lease). */
  leaseSeconds: number;
  /** How long to wait for every acknowledged task to succeed, ms. */
  settleMs: number;
  log?: (line: string) => void;
}

/** One hand-out of a task to a worker. */
export interface Run {
  taskId: string;
  attempt: number;
  /** When the poll that brought it was sent, and when it answered, ms. */
  polledMs: number;
  receivedMs: number;
  /** The node's answer to the report: 200, 409 (the lease had moved on), or 0 when none came. */
  reported: number;
}

/** A task handed out more than once, and why. */
export interface Duplicate {
  taskId: string;
  attempts: number[];
  /**
   * `claim lost`: handed out again with the same attempt — the claim (committed asynchronously,
   * decision 0003) was not on the new primary, so the row was pending again;
   * `lease ran out`: a later attempt — the result did not reach the new primary (lost with the
   * old one, or refused while no primary answered) before the lease ran out.
   */
  why: 'claim lost' | 'lease ran out';
}

export interface FailoverResult {
  acknowledged: number;
  /** Acknowledged tasks not in the database at all. */
  lost: string[];
  /** Acknowledged tasks not succeeded when the run ended, with their status. */
  unfinished: { taskId: string; status: string }[];
  /** Task rows of the run's type that no acknowledged submit names (half-written submissions). */
  strays: number;
  duplicates: Duplicate[];
  /**
   * The submits' answers by HTTP status (0: no answer; `gave up`: submits still unanswered
   * after a minute of retries), and the error codes of the 5xx ones.
   */
  answers: Record<string, number>;
  errorCodes: Record<string, number>;
  killed: { name: string; port: number };
  /** From the kill to a server taking writes, and to the first task claimed after it, ms. */
  writableAfterMs: number;
  firstClaimAfterMs: number | null;
  /** What the primary had before the kill (`synchronous_standby_names`, `synchronous_commit`). */
  replication: { synchronousStandbyNames: string; synchronousCommit: string };
}

interface Acknowledged {
  taskId: string;
}

/** Runs the scenario once on a started set and started nodes. */
export async function runPgFailover(s: FailoverScenario): Promise<FailoverResult> {
  const log = s.log ?? (() => undefined);
  const runs: Run[] = [];
  const acked = new Map<string, Acknowledged>();
  const answers: Record<string, number> = {};
  const errorCodes: Record<string, number> = {};
  const primary = await s.ha.primary();
  if (primary === undefined) throw new Error('the set has no primary');
  const replication = await s.ha.replicationSettings(primary.port);
  let stopSubmitting = false;
  let stopWorking = false;

  const submitting = (async () => {
    const sends: Promise<void>[] = [];
    for (let i = 0; !stopSubmitting; i++) {
      sends.push(submitUntilAnswered(s.urls[i % s.urls.length]!, `${s.schema}-${i}`, s, acked, answers, errorCodes));
      await sleep(s.submitEveryMs);
    }
    await Promise.all(sends);
  })();
  const working = s.urls.map((url, i) => work(url, `failover-w${i}`, runs, () => stopWorking));

  await sleep(s.beforeKillMs);
  const killed = await s.ha.killPrimary();
  const killMs = Date.now();
  log(`pg-failover: killed the primary ${killed.name} (${killed.port}) after ${acked.size} acknowledged submits`);
  await s.ha.waitForWritable(180_000, killed.port);
  const writableAfterMs = Date.now() - killMs;
  log(`pg-failover: a server takes writes ${writableAfterMs} ms after the kill`);
  await sleep(s.afterWritableMs);
  stopSubmitting = true;
  await submitting;
  log(`pg-failover: ${acked.size} submits acknowledged; waiting for them to succeed`);

  const rows = await waitSettled(s, acked);
  stopWorking = true;
  await Promise.all(working);
  const firstAfter = runs.filter((r) => r.polledMs >= killMs).sort((a, b) => a.receivedMs - b.receivedMs)[0];
  return {
    acknowledged: acked.size,
    lost: [...acked.keys()].filter((id) => !rows.has(id)),
    unfinished: [...acked.keys()]
      .filter((id) => rows.has(id) && rows.get(id) !== 'succeeded')
      .map((taskId) => ({ taskId, status: rows.get(taskId)! })),
    strays: [...rows.keys()].filter((id) => !acked.has(id)).length,
    duplicates: duplicatesOf(runs),
    answers,
    errorCodes,
    killed: { name: killed.name, port: killed.port },
    writableAfterMs,
    firstClaimAfterMs: firstAfter === undefined ? null : firstAfter.receivedMs - killMs,
    replication,
  };
}

/** Submits one task, sending it again with its idempotency key on 429, 503 or no answer, until acknowledged. */
async function submitUntilAnswered(
  url: string,
  key: string,
  s: FailoverScenario,
  acked: Map<string, Acknowledged>,
  answers: Record<string, number>,
  errorCodes: Record<string, number>,
): Promise<void> {
  const body = JSON.stringify({
    task_type: FAILOVER_TYPE,
    timeout_seconds: s.leaseSeconds,
    idempotency_key: key,
    payload: { key },
  });
  const giveUpMs = Date.now() + SUBMIT_GIVE_UP_MS;
  for (;;) {
    let status = 0;
    let retryAfterS = 1;
    try {
      const res = await request(`${url}/api/tasks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        headersTimeout: 30_000,
      });
      status = res.statusCode;
      retryAfterS = Number(res.headers['retry-after'] ?? 1) || 1;
      const answer = (await res.body.json()) as { task_id?: string; error?: { code?: string } };
      if (status === 201 || status === 200) {
        acked.set(answer.task_id!, { taskId: answer.task_id! });
      } else if (status >= 500) {
        const code = answer.error?.code ?? 'none';
        errorCodes[`${status} ${code}`] = (errorCodes[`${status} ${code}`] ?? 0) + 1;
      }
    } catch {
      // no answer (a timeout): the same key again
    }
    answers[String(status)] = (answers[String(status)] ?? 0) + 1;
    if (status === 201 || status === 200) return;
    if (Date.now() > giveUpMs) {
      answers['gave up'] = (answers['gave up'] ?? 0) + 1;
      return;
    }
    if (status !== 0 && status !== 429 && status !== 503) throw new Error(`a submit was answered ${status}`);
    await sleep(Math.min(retryAfterS, 2) * 1000);
  }
}

/** An HTTP worker: polls, runs each task at once, reports it (again on 503, until answered). */
async function work(url: string, workerId: string, runs: Run[], stopped: () => boolean): Promise<void> {
  while (!stopped()) {
    const polledMs = Date.now();
    let tasks: { task_id: string; lease_token: string; attempt: number }[] = [];
    try {
      const res = await request(`${url}/api/workers/poll`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ worker_id: workerId, task_types: [FAILOVER_TYPE], max_tasks: 20, wait_ms: 500 }),
      });
      const answer = (await res.body.json()) as { tasks?: typeof tasks };
      tasks = res.statusCode === 200 ? (answer.tasks ?? []) : [];
    } catch {
      tasks = [];
    }
    if (tasks.length === 0) {
      await sleep(100);
      continue;
    }
    const receivedMs = Date.now();
    await Promise.all(
      tasks.map(async (t) => {
        const run: Run = { taskId: t.task_id, attempt: t.attempt, polledMs, receivedMs, reported: 0 };
        runs.push(run);
        run.reported = await report(url, t.task_id, t.lease_token, stopped);
      }),
    );
  }
}

async function report(url: string, taskId: string, leaseToken: string, stopped: () => boolean): Promise<number> {
  while (!stopped()) {
    try {
      const res = await request(`${url}/api/tasks/${taskId}/complete`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ lease_token: leaseToken, status: 'succeeded' }),
      });
      await res.body.dump();
      if (res.statusCode !== 503) return res.statusCode;
    } catch {
      // no answer: again
    }
    await sleep(500);
  }
  return 0;
}

/** Waits until every acknowledged task succeeded (or `settleMs` passed); answers every row of the run's type. */
async function waitSettled(s: FailoverScenario, acked: Map<string, Acknowledged>): Promise<Map<string, string>> {
  const pool = new pg.Pool({ connectionString: s.ha.serverUrl(await s.ha.waitForWritable()), max: 1 });
  pool.on('error', () => undefined);
  try {
    const until = Date.now() + s.settleMs;
    for (;;) {
      const { rows } = await pool.query<{ id: string; status: string }>(
        `SELECT id::text, status::text FROM ${s.schema}.tasks WHERE task_type = $1`,
        [FAILOVER_TYPE],
      );
      const byId = new Map(rows.map((r) => [r.id, r.status]));
      const done = [...acked.keys()].every((id) => byId.get(id) === 'succeeded');
      if (done || Date.now() > until) return byId;
      await sleep(500);
    }
  } finally {
    await pool.end();
  }
}

/**
 * The tasks handed out more than once among `runs` (one entry per hand-out), and why: the same
 * attempt twice is a claim lost with the old primary, a later attempt a lease that ran out.
 * Also used by `npm run bench:herd-failover`.
 */
export function duplicatesOf(runs: readonly Pick<Run, 'taskId' | 'attempt'>[]): Duplicate[] {
  const byTask = new Map<string, Pick<Run, 'taskId' | 'attempt'>[]>();
  for (const run of runs) byTask.set(run.taskId, [...(byTask.get(run.taskId) ?? []), run]);
  return [...byTask.entries()]
    .filter(([, list]) => list.length > 1)
    .map(([taskId, list]) => {
      const attempts = list.map((r) => r.attempt);
      const sameAttempt = new Set(attempts).size < attempts.length;
      return { taskId, attempts, why: sameAttempt ? 'claim lost' : 'lease ran out' };
    });
}
