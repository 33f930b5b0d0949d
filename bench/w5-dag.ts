import { request } from 'undici';
import { alive, currentMiB, type BenchNode } from './node-process.js';
import { percentiles, spaced } from './stats.js';
import type { DagDependentRow } from './stores.js';
import { submitDags, type DagAnswer } from './submit.js';
import { sleep, waitFor } from './time.js';
import { WorkerFleet } from './worker-process.js';
import { workerTraffic, type RunContext, type RunFigures, type Workload } from './workload.js';
import { authHeaders } from './auth.js';

/**
 * W5: dependent tasks (POST /api/dags). Part A: many small independent diamonds. Part B: one
 * large chain of fans. From both, the overhead of a dependency edge: how long after its last
 * predecessor completed a dependent task is claimed. Part C: many tasks blocked behind one
 * task nobody runs — what they cost in node memory, and how fast cancelling that one task
 * cancels them all.
 */
const TASK_TYPE = 'bench.dag';
/** Part C's root: no worker serves this type, so it stays ready until it is cancelled. */
const HOLD_TYPE = 'bench.dag.hold';
const BLOCKED_TYPE = 'bench.dag.blocked';
const CONCURRENCY = 1000;
/** Long-polls per worker process, at least, as in W4: a freed dependent should not wait for a poll in flight. */
const POLLERS = 4;

const DIAMONDS = 1_000;
const DIAMONDS_QUICK = 100;
/** Diamond requests in flight at once. */
const DIAMOND_PARALLEL = 16;

/** Part B: stages of FAN_OUT tasks and the fan-in task that joins them. */
const FAN_OUT = 99;
const STAGE_TASKS = FAN_OUT + 1;
const CHAIN_TASKS = 10_000;
const CHAIN_TASKS_QUICK = 1_000;

const BLOCKED = 100_000;
const BLOCKED_QUICK = 10_000;
/** Part C: tasks per POST /api/dags, as chains of CHAIN_DEPTH whose heads wait on the root. */
const BLOCKED_PER_REQUEST = 1_000;
const CHAIN_DEPTH = 10;
const BLOCKED_PARALLEL = 4;
/** How long part C's tasks sit blocked, RSS sampled, before the root is cancelled. */
const HOLD_MS = 5_000;

/** How long parts A and B may take to finish after their last submit answer, and C's cascade. */
const FINISH_LIMIT_MS = 120_000;
const CASCADE_LIMIT_MS = 120_000;
const SAMPLE_EVERY_MS = 100;
const PROGRESS_LOG_EVERY_MS = 10_000;

/** Statuses of a task that may still move on. */
const OPEN = ['blocked', 'pending', 'ready', 'running'];

interface PartFigures {
  values: Record<string, number>;
  notes: string[];
  verified: boolean;
}

export const w5Dag: Workload = {
  id: 'W5',
  title: 'DAG',
  definitions: [
    `W5 A: ${spaced(DIAMONDS)} (quick: ${spaced(DIAMONDS_QUICK)}) independent diamonds (a → b, a → c, {b, c} → d), one POST /api/dags each, ` +
      `${DIAMOND_PARALLEL} requests in flight, while a worker process (SDK, ${CONCURRENCY} slots, at least ${POLLERS} long-polls, no-op) already polls. ` +
      'Submitted/s = diamonds / (first request → last answer); end to end = first request → the latest completed_at (Postgres, node clock) ' +
      'of their tasks, once all have succeeded.',
    `W5 B: then one POST /api/dags of ${spaced(CHAIN_TASKS)} (quick: ${spaced(CHAIN_TASKS_QUICK)}) tasks, a chain of fans: stages of ${FAN_OUT} fan-out tasks ` +
      `and one fan-in task that depends on all ${FAN_OUT}; every fan-out task of a stage depends on the previous stage's fan-in ` +
      `(the first stage's fan-out tasks are the roots: a single root would make it ${spaced(CHAIN_TASKS + 1)} tasks, over the 10 000 a request may hold). ` +
      'Submission = that one request; end to end = request sent → the latest completed_at of its tasks.',
    'W5 edge overhead, over every task of A and B that has predecessors: its started_at (the claim) − the latest completed_at ' +
      'of its predecessors, both written by the node (Postgres); the time a dependent spends becoming pending, on the wheel, ' +
      'in the ready queue and in the claim. One figure per dependent task, not per edge (only its last predecessor decides).',
    `W5 C: on a fresh node, one root task of a type no worker serves (it stays ready), then ${spaced(BLOCKED)} (quick: ${spaced(BLOCKED_QUICK)}) tasks ` +
      `behind it in POST /api/dags requests of ${spaced(BLOCKED_PER_REQUEST)} (${BLOCKED_PARALLEL} in flight): chains of ${CHAIN_DEPTH} whose heads ` +
      `depend on the root's task id. The 512 MiB bar is on the node's largest RSS sample from submission to ${HOLD_MS / 1000} s after ` +
      'the last answer, with every one of them blocked. Then DELETE /api/tasks/{root}: cascade = DELETE sent → the latest completed_at ' +
      'of the cancelled tasks (Postgres), once all are cancelled; RSS during the cascade is the largest sample from the DELETE until then.',
  ],
  metrics: [
    { key: 'aSubmitRate', label: 'A: diamonds submitted', unit: '/s', digits: 0 },
    { key: 'aEndToEndS', label: 'A: first submit → last completion', unit: 's', digits: 3 },
    { key: 'bSubmitS', label: 'B: chain of fans submitted in', unit: 's', digits: 3 },
    { key: 'bEndToEndS', label: 'B: submit → last completion', unit: 's', digits: 3 },
    { key: 'edgeP50Ms', label: 'A+B: edge overhead p50', unit: 'ms', digits: 1 },
    {
      key: 'edgeP99Ms',
      label: 'A+B: edge overhead p99',
      unit: 'ms',
      digits: 1,
      bar: { op: '<=', value: 20, reference: 'Airflow > 1 s per hop' },
    },
    { key: 'edgeMaxMs', label: 'A+B: edge overhead max', unit: 'ms', digits: 1 },
    { key: 'rssMiB', label: 'A+B: node max RSS', unit: 'MiB', digits: 0 },
    { key: 'cSubmitRate', label: 'C: blocked tasks submitted', unit: '/s', digits: 0 },
    { key: 'cRssMiB', label: 'C: node max RSS, all blocked', unit: 'MiB', digits: 0, bar: { op: '<=', value: 512 } },
    { key: 'cCascadeS', label: 'C: DELETE root → all cancelled', unit: 's', digits: 3 },
    { key: 'cCascadeRssMiB', label: 'C: node max RSS during the cascade', unit: 'MiB', digits: 0 },
  ],
  async run(ctx: RunContext): Promise<RunFigures> {
    const ab = await graphs(ctx, ctx.quick ? DIAMONDS_QUICK : DIAMONDS, ctx.quick ? CHAIN_TASKS_QUICK : CHAIN_TASKS);
    const c = await heldBehindOne(ctx, ctx.quick ? BLOCKED_QUICK : BLOCKED);
    return {
      values: { ...ab.values, ...c.values },
      notes: [...ab.notes, ...c.notes.map((n) => `C: ${n}`)],
      verified: ab.verified && c.verified,
    };
  },
};

/** Parts A and B on one node with a worker fleet, then the edge overhead over both. */
async function graphs(ctx: RunContext, diamonds: number, chainTasks: number): Promise<PartFigures> {
  const node = await ctx.startNode();
  const fleet = await WorkerFleet.start(ctx.workers, {
    url: node.url,
    taskType: TASK_TYPE,
    concurrency: CONCURRENCY,
    pollers: Math.max(ctx.pollers, POLLERS),
  });
  try {
    node.rss.reset();
    const notes: string[] = [];

    // A: the diamonds.
    const aStatuses: Record<string, number> = {};
    const a = await submitDags(node.url, diamonds, () => DIAMOND, {
      parallel: DIAMOND_PARALLEL,
      onCreated: (_, answer) => tallyAnswer(aStatuses, answer),
    });
    const aTasks = diamonds * 4;
    const aSubmitMs = a.lastAnsweredMs - a.firstSubmitMs;
    ctx.log(`W5 A: ${diamonds} diamonds submitted in ${aSubmitMs} ms; waiting for their ${aTasks} tasks`);
    if (a.retried > 0) notes.push(`A: ${a.retried} submit requests were answered 429/503 and sent again`);
    checkAnswers(notes, 'A', aStatuses, { pending: diamonds, blocked: diamonds * 3 });
    const aDone = await untilSettled(ctx, node, a.dagIds, aTasks, 'A');
    const aLast = await ctx.stores.dagLastCompleted(node.schema, a.dagIds);
    const aEndToEndMs = aDone.allSucceeded ? aLast.lastMs - a.firstSubmitMs : Number.NaN;
    ctx.log(`W5 A: ${JSON.stringify(aDone.counts)} after ${((Date.now() - a.firstSubmitMs) / 1000).toFixed(1)} s`);

    // B: the chain of fans.
    const stages = Math.floor(chainTasks / STAGE_TASKS);
    const bTasks = stages * STAGE_TASKS;
    const bStatuses: Record<string, number> = {};
    const body = chainOfFans(stages);
    const b = await submitDags(node.url, 1, () => body, {
      parallel: 1,
      onCreated: (_, answer) => tallyAnswer(bStatuses, answer),
    });
    const bSubmitMs = b.lastAnsweredMs - b.firstSubmitMs;
    ctx.log(`W5 B: ${bTasks} tasks (${stages} stages) submitted in ${bSubmitMs} ms; waiting for them`);
    if (b.retried > 0) notes.push(`B: the submit request was answered 429/503 and sent again ${b.retried} time(s)`);
    checkAnswers(notes, 'B', bStatuses, { pending: FAN_OUT, blocked: bTasks - FAN_OUT });
    const bDone = await untilSettled(ctx, node, b.dagIds, bTasks, 'B');
    const bLast = await ctx.stores.dagLastCompleted(node.schema, b.dagIds);
    const bEndToEndMs = bDone.allSucceeded ? bLast.lastMs - b.firstSubmitMs : Number.NaN;
    ctx.log(`W5 B: ${JSON.stringify(bDone.counts)} after ${((Date.now() - b.firstSubmitMs) / 1000).toFixed(1)} s`);

    const rssMiB = node.rss.maxMiB;
    const results = await fleet.stop();
    notes.push(workerTraffic(results));

    // The edge overhead, from Postgres.
    const aRows = await ctx.stores.dagDependents(node.schema, a.dagIds);
    const bRows = await ctx.stores.dagDependents(node.schema, b.dagIds);
    const aEdges = overheads(aRows);
    const bEdges = overheads(bRows);
    const all = [...aEdges.ms, ...bEdges.ms];
    const [p50, p99, max] = percentiles(all, [50, 99, 100]) as [number, number, number];
    notes.push(`A: ${edgeSummary(aEdges, diamonds * 3, diamonds * 4)}`);
    notes.push(`A: ${splitAt(aRows, a.lastAnsweredMs)}`);
    notes.push(`B: ${edgeSummary(bEdges, bTasks - FAN_OUT, FAN_OUT + (stages - 1) * 2 * FAN_OUT)}`);
    if (bDone.allSucceeded) {
      // The longest path runs through one fan-out task and the fan-in of every stage.
      const pathTasks = stages * 2;
      notes.push(
        `B: longest path ${pathTasks} tasks: end to end / ${pathTasks} = ${(bEndToEndMs / pathTasks).toFixed(1)} ms per task`,
      );
    }
    const negative = all.filter((ms) => ms < 0).length;
    if (negative > 0)
      notes.push(
        `ODD: ${negative} dependents were claimed before their last predecessor completed (min ${Math.min(...all).toFixed(1)} ms)`,
      );

    const aCheck = checkCounts('A', aDone.counts, { succeeded: aTasks }, aLast.withoutCompletedAt);
    const bCheck = checkCounts('B', bDone.counts, { succeeded: bTasks }, bLast.withoutCompletedAt);
    const apiCheck = await checkDagApi(node.url, b.dagIds[0] as string, bTasks);
    for (const message of [...aCheck, ...bCheck, ...apiCheck]) {
      ctx.log(`!!! ${message}`);
      notes.push(message);
    }
    return {
      values: {
        aSubmitRate: (diamonds / aSubmitMs) * 1000,
        aEndToEndS: aEndToEndMs / 1000,
        bSubmitS: bSubmitMs / 1000,
        bEndToEndS: bEndToEndMs / 1000,
        edgeP50Ms: p50,
        edgeP99Ms: p99,
        edgeMaxMs: max,
        rssMiB,
      },
      notes,
      verified: aCheck.length === 0 && bCheck.length === 0 && apiCheck.length === 0,
    };
  } catch (error) {
    fleet.kill();
    throw error;
  }
}

/** Part C: `count` tasks blocked behind one root nobody runs, then the root cancelled. */
async function heldBehindOne(ctx: RunContext, count: number): Promise<PartFigures> {
  const node = await ctx.startNode();
  const notes: string[] = [`node RSS idle, before submitting: ${currentMiB(node).toFixed(0)} MiB`];
  node.rss.reset();
  const root = await call<{ task_id: string; status: string }>(
    node.url,
    'POST',
    '/api/tasks',
    { task_type: HOLD_TYPE },
    201,
  );
  const requests = Math.ceil(count / BLOCKED_PER_REQUEST);
  const statuses: Record<string, number> = {};
  const submitted = await submitDags(node.url, requests, () => heldChains(root.task_id), {
    parallel: BLOCKED_PARALLEL,
    onCreated: (_, answer) => tallyAnswer(statuses, answer),
  });
  const total = requests * BLOCKED_PER_REQUEST;
  const submitMs = submitted.lastAnsweredMs - submitted.firstSubmitMs;
  if (submitted.retried > 0) notes.push(`${submitted.retried} submit requests were answered 429/503 and sent again`);
  checkAnswers(notes, '', statuses, { blocked: total });
  ctx.log(
    `W5 C: ${total} blocked tasks submitted in ${(submitMs / 1000).toFixed(1)} s, node RSS ${currentMiB(node).toFixed(0)} MiB; holding ${HOLD_MS / 1000} s`,
  );
  await sleep(HOLD_MS);
  if (!alive(node))
    throw new Error(`W5 C: the node process died with the tasks blocked; its last output:\n${node.output()}`);
  const heldMiB = currentMiB(node);
  const rssBlockedMiB = node.rss.maxMiB;
  const held = await ctx.stores.dagStatusCounts(node.schema, submitted.dagIds);
  notes.push(
    `${total} tasks blocked: RSS ${heldMiB.toFixed(0)} MiB after ${HOLD_MS / 1000} s, max ${rssBlockedMiB.toFixed(0)} MiB; Postgres ${JSON.stringify(held)}`,
  );
  const problems = checkCounts('C before the DELETE', held, { blocked: total }, 0);

  node.rss.reset();
  const deleteSentMs = Date.now();
  const deleted = await call<{ cancelled_instances?: number }>(
    node.url,
    'DELETE',
    `/api/tasks/${root.task_id}`,
    undefined,
    200,
  );
  const answeredMs = Date.now();
  let counts: Record<string, number> = {};
  const allCancelled = await waitFor(
    async () => {
      counts = await ctx.stores.dagStatusCounts(node.schema, submitted.dagIds);
      return (counts.cancelled ?? 0) >= total || !alive(node);
    },
    CASCADE_LIMIT_MS,
    SAMPLE_EVERY_MS,
  );
  const seenMs = Date.now();
  const cascadeRssMiB = node.rss.maxMiB;
  const last = await ctx.stores.dagLastCompleted(node.schema, submitted.dagIds);
  const rootCounts = await ctx.stores.countByStatus(node.schema, HOLD_TYPE);
  notes.push(
    `DELETE answered in ${answeredMs - deleteSentMs} ms (${JSON.stringify(deleted)}); all cancelled seen by the harness after ` +
      `${seenMs - deleteSentMs} ms (sampled every ${SAMPLE_EVERY_MS} ms); root ${JSON.stringify(rootCounts)}`,
  );
  let cascadeMs = Number.NaN;
  if (allCancelled && (counts.cancelled ?? 0) === total) {
    if (last.withoutCompletedAt === 0) cascadeMs = last.lastMs - deleteSentMs;
    else {
      cascadeMs = seenMs - deleteSentMs;
      notes.push(
        `${last.withoutCompletedAt} cancelled tasks have no completed_at: the cascade time is the harness's observation`,
      );
    }
  }
  problems.push(...checkCounts('C after the DELETE', counts, { cancelled: total }, 0));
  if ((rootCounts.cancelled ?? 0) !== 1)
    problems.push(`MISMATCH: the root should be cancelled, Postgres has ${JSON.stringify(rootCounts)}`);
  for (const message of problems) {
    ctx.log(`!!! ${message}`);
    notes.push(message);
  }
  return {
    values: {
      cSubmitRate: (total / submitMs) * 1000,
      cRssMiB: rssBlockedMiB,
      cCascadeS: cascadeMs / 1000,
      cCascadeRssMiB: cascadeRssMiB,
    },
    notes,
    verified: problems.length === 0,
  };
}

const DIAMOND = {
  tasks: [
    { ref: 'a', task_type: TASK_TYPE },
    { ref: 'b', task_type: TASK_TYPE, depends_on: ['a'] },
    { ref: 'c', task_type: TASK_TYPE, depends_on: ['a'] },
    { ref: 'd', task_type: TASK_TYPE, depends_on: ['b', 'c'] },
  ],
};

/** `stages` stages of FAN_OUT fan-out tasks (`s<stage>f<i>`) and their fan-in (`s<stage>j`). */
function chainOfFans(stages: number): Record<string, unknown> {
  const tasks: Record<string, unknown>[] = [];
  for (let s = 0; s < stages; s++) {
    const fanOut: string[] = [];
    for (let f = 0; f < FAN_OUT; f++) {
      const ref = `s${s}f${f}`;
      fanOut.push(ref);
      tasks.push(s === 0 ? { ref, task_type: TASK_TYPE } : { ref, task_type: TASK_TYPE, depends_on: [`s${s - 1}j`] });
    }
    tasks.push({ ref: `s${s}j`, task_type: TASK_TYPE, depends_on: fanOut });
  }
  return { tasks };
}

/** BLOCKED_PER_REQUEST tasks as chains of CHAIN_DEPTH (`c<chain>k<depth>`), each head depending on `rootId`. */
function heldChains(rootId: string): Record<string, unknown> {
  const tasks: Record<string, unknown>[] = [];
  for (let c = 0; c < BLOCKED_PER_REQUEST / CHAIN_DEPTH; c++) {
    for (let k = 0; k < CHAIN_DEPTH; k++) {
      tasks.push({ ref: `c${c}k${k}`, task_type: BLOCKED_TYPE, depends_on: [k === 0 ? rootId : `c${c}k${k - 1}`] });
    }
  }
  return { tasks };
}

/**
 * Samples the status counts of `dagIds`' tasks until all `expected` succeeded, or none is
 * open any more, or FINISH_LIMIT_MS passed; logs progress now and then.
 */
async function untilSettled(
  ctx: RunContext,
  node: BenchNode,
  dagIds: readonly string[],
  expected: number,
  part: string,
): Promise<{ counts: Record<string, number>; allSucceeded: boolean }> {
  let counts: Record<string, number> = {};
  let lastLogMs = Date.now();
  await waitFor(
    async () => {
      counts = await ctx.stores.dagStatusCounts(node.schema, dagIds);
      if ((counts.succeeded ?? 0) >= expected) return true;
      if (!alive(node)) throw new Error(`W5 ${part}: the node process died; its last output:\n${node.output()}`);
      const total = Object.values(counts).reduce((n, v) => n + v, 0);
      if (total >= expected && OPEN.every((s) => (counts[s] ?? 0) === 0)) return true;
      if (Date.now() - lastLogMs >= PROGRESS_LOG_EVERY_MS) {
        ctx.log(`W5 ${part}: ${JSON.stringify(counts)}`);
        lastLogMs = Date.now();
      }
      return false;
    },
    FINISH_LIMIT_MS,
    SAMPLE_EVERY_MS,
  );
  return { counts, allSucceeded: (counts.succeeded ?? 0) === expected };
}

interface Overheads {
  ms: number[];
  dependents: number;
  edges: number;
  /** Dependents with no started_at or a predecessor with no completed_at. */
  missing: number;
}

function overheads(rows: readonly DagDependentRow[]): Overheads {
  const ms: number[] = [];
  let edges = 0;
  for (const row of rows) {
    edges += row.edges;
    if (row.overheadMs !== null) ms.push(row.overheadMs);
  }
  return { ms, dependents: rows.length, edges, missing: rows.length - ms.length };
}

function edgeSummary(o: Overheads, expectedDependents: number, expectedEdges: number): string {
  const [p50, p99, max] = percentiles(o.ms, [50, 99, 100]) as [number, number, number];
  const counted = `${o.dependents} dependents (expected ${expectedDependents}) over ${o.edges} edges (expected ${expectedEdges})`;
  const missing = o.missing > 0 ? `, ${o.missing} without a start or a predecessor's completion` : '';
  return `${counted}${missing}; edge overhead p50 ${fmtMs(p50)}, p99 ${fmtMs(p99)}, max ${fmtMs(max)}`;
}

/**
 * Part A's overhead split at the last submit answer: dependents freed while diamonds were
 * still being submitted, and those freed after.
 */
function splitAt(rows: readonly DagDependentRow[], lastAnsweredMs: number): string {
  const during: number[] = [];
  const after: number[] = [];
  for (const row of rows) {
    if (row.overheadMs === null || row.readyMs === null) continue;
    (row.readyMs <= lastAnsweredMs ? during : after).push(row.overheadMs);
  }
  const part = (ms: number[]): string => {
    const [p50, p99] = percentiles(ms, [50, 99]) as [number, number];
    return `${ms.length} dependents, p50 ${fmtMs(p50)}, p99 ${fmtMs(p99)}`;
  };
  return `edge overhead while diamonds were still being submitted: ${part(during)}; after the last submit answer: ${part(after)}`;
}

/** Adds an answer's task statuses to `into`. */
function tallyAnswer(into: Record<string, number>, answer: DagAnswer): void {
  for (const task of answer.tasks) into[task.status] = (into[task.status] ?? 0) + 1;
}

/** A note when the statuses POST /api/dags answered are not the expected ones (tasks without predecessors pending, the rest blocked). */
function checkAnswers(
  notes: string[],
  part: string,
  statuses: Record<string, number>,
  expected: Record<string, number>,
): void {
  if (!sameCounts(statuses, expected)) {
    notes.push(
      `${part === '' ? '' : `${part}: `}POST /api/dags answered statuses ${JSON.stringify(statuses)}, expected ${JSON.stringify(expected)}`,
    );
  }
}

/** MISMATCH messages when Postgres's counts are not `expected` or completion times are missing. */
function checkCounts(
  part: string,
  counts: Record<string, number>,
  expected: Record<string, number>,
  withoutCompletedAt: number,
): string[] {
  const out: string[] = [];
  if (!sameCounts(counts, expected))
    out.push(`MISMATCH (${part}): expected ${JSON.stringify(expected)}, Postgres has ${JSON.stringify(counts)}`);
  if (withoutCompletedAt > 0) out.push(`MISMATCH (${part}): ${withoutCompletedAt} finished tasks have no completed_at`);
  return out;
}

function sameCounts(actual: Record<string, number>, expected: Record<string, number>): boolean {
  const keys = new Set([...Object.keys(actual), ...Object.keys(expected)]);
  return [...keys].every((k) => (actual[k] ?? 0) === (expected[k] ?? 0));
}

/** GET /api/dags/{id} agrees with Postgres: every task succeeded. MISMATCH messages otherwise. */
async function checkDagApi(url: string, dagId: string, tasks: number): Promise<string[]> {
  const dag = await call<{ dag_id?: string; status?: string; counts?: Record<string, number>; tasks?: unknown[] }>(
    url,
    'GET',
    `/api/dags/${dagId}`,
    undefined,
    200,
  );
  const out: string[] = [];
  if (dag.dag_id !== dagId) out.push(`MISMATCH (GET /api/dags/${dagId}): dag_id is ${JSON.stringify(dag.dag_id)}`);
  if (
    (dag.counts?.succeeded ?? 0) !== tasks ||
    Object.keys(dag.counts ?? {}).some((k) => k !== 'succeeded' && (dag.counts?.[k] ?? 0) !== 0)
  ) {
    out.push(`MISMATCH (GET /api/dags/${dagId}): counts ${JSON.stringify(dag.counts)}, expected ${tasks} succeeded`);
  }
  if (dag.tasks?.length !== tasks)
    out.push(`MISMATCH (GET /api/dags/${dagId}): ${dag.tasks?.length ?? 'no'} tasks listed, expected ${tasks}`);
  if (dag.status !== 'succeeded')
    out.push(`GET /api/dags/${dagId}: status ${JSON.stringify(dag.status)} (expected "succeeded")`);
  return out;
}

/** One request to the node; any status but `expected` throws with the answer. */
async function call<T>(
  url: string,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  body: unknown,
  expected: number,
): Promise<T> {
  const res = await request(`${url}${path}`, {
    method,
    headers: body === undefined ? authHeaders() : { 'content-type': 'application/json', ...authHeaders() },
    body: body === undefined ? undefined : JSON.stringify(body),
    headersTimeout: 60_000,
    bodyTimeout: 60_000,
  });
  const text = await res.body.text();
  if (res.statusCode !== expected)
    throw new Error(`${method} ${path} answered ${res.statusCode}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as T;
}

function fmtMs(ms: number): string {
  return Number.isFinite(ms) ? `${ms.toFixed(1)} ms` : '—';
}
