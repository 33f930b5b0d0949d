import { randomBytes } from 'node:crypto';
import { alive, currentMiB, type BenchNode } from './node-process.js';
import { percentiles, spaced } from './stats.js';
import type { CronInstanceRow } from './stores.js';
import { deleteTasks, submitTasks } from './submit.js';
import { sleep, waitFor } from './time.js';
import { WorkerFleet } from './worker-process.js';
import { workerTraffic, type RunContext, type RunFigures, type Workload } from './workload.js';

/**
 * W4: cron. Part A: per-second schedules with idle workers — does every fire time run, once,
 * on time? Part B: many per-minute schedules on one node — how fast they register, what they
 * cost in memory, and how long the herd at the top of the minute takes to start.
 */
const PER_SECOND_SCHEDULES = 1_000;
const PER_MINUTE_SCHEDULES = 100_000;
const PER_MINUTE_SCHEDULES_QUICK = 10_000;
const WINDOW_MS = 120_000;
const WINDOW_MS_QUICK = 20_000;
const CONCURRENCY = 1000;
/**
 * Long-polls per worker process, at least: 1 000 instances fall due in the same millisecond
 * every second, and one poller claims them in two sequential 500-row statements (p99 ~80 ms);
 * four claim in parallel (p99 ~30 ms, one quick run each, same machine).
 */
const POLLERS = 4;
/** Fire times this close to either end of the window are left out (registration, DELETEs). */
const EDGE_MS = 2_000;
/** After the DELETEs, how long instances still pending or running may take to finish. */
const SETTLE_LIMIT_MS = 30_000;
/** How long after the minute boundary part B waits for every instance to start. */
const HERD_LIMIT_MS = 120_000;
/**
 * Part B registers at once when this much of the current minute is left, else just after the
 * minute turns, so that no schedule fires before the last one is registered.
 */
const REGISTER_HEADROOM_MS = 45_000;
const REGISTER_HEADROOM_MS_QUICK = 15_000;
/** After the herd's last result, before the "after the herd" RSS sample. */
const AFTER_HERD_MS = 2_000;
const SAMPLE_EVERY_MS = 250;
const PROGRESS_LOG_EVERY_MS = 10_000;

interface PartFigures {
  values: Record<string, number>;
  notes: string[];
  verified: boolean;
}

export const w4Cron: Workload = {
  id: 'W4',
  title: 'cron',
  definitions: [
    `W4 A: ${spaced(PER_SECOND_SCHEDULES)} cron schedules \`* * * * * *\` (every second) registered with one POST /api/tasks/batch, left firing for ` +
      `${WINDOW_MS / 1000} s (quick: ${WINDOW_MS_QUICK / 1000} s; --cron-window-seconds) with an idle worker process (${CONCURRENCY} slots, at least ${POLLERS} long-polls, no-op), ` +
      'then each one DELETEd. Counted from Postgres over the fire times from the first whole second after registration + 2 s to the ' +
      'last whole second before the DELETEs − 2 s (the edges are left out: the first fires race registration, the last ones the DELETEs): ' +
      'expected = schedules × seconds; fired = (schedule, fire time) pairs with an instance a worker claimed (started_at set); ' +
      'duplicates = claims beyond the first (attempts − 1, summed) plus instances beyond the first for one (schedule, fire time); ' +
      "lateness = the instance's first claim (started_at, or an earlier attempt's in executions; node clock) − its nominal fire_time. " +
      'Node max RSS over part A.',
    `W4 B: ${spaced(PER_MINUTE_SCHEDULES)} (quick: ${spaced(PER_MINUTE_SCHEDULES_QUICK)}) cron schedules ` +
      '`* * * * *` (every minute) registered on a fresh node with POST /api/tasks/batch (1 000 a request, 4 in parallel), starting at ' +
      `once when ${REGISTER_HEADROOM_MS / 1000} s (quick: ${REGISTER_HEADROOM_MS_QUICK / 1000} s) of the minute are left, else just after ` +
      'the minute turns; registered/s = N / (first request → last answer). All N then fire at the next minute boundary M and an idle ' +
      `worker process (${CONCURRENCY} slots) runs them: herd = last first claim (Postgres started_at) − M. RSS after registration and ` +
      `after the herd (${AFTER_HERD_MS / 1000} s after the worker's last result was accepted) are single samples; the 512 MiB bar is on the ` +
      'largest sample over all of part B. The schedules are not deleted; the node is stopped and its schema dropped.',
  ],
  metrics: [
    {
      key: 'firedPct',
      label: 'A: fired / expected',
      unit: '%',
      digits: 3,
      bar: { op: '>=', value: 100, reference: 'BullMQ 100 %' },
    },
    { key: 'duplicates', label: 'A: duplicate fires', unit: 'fires', digits: 0, bar: { op: '<=', value: 0 } },
    { key: 'p50Ms', label: 'A: start − fire time p50', unit: 'ms', digits: 1 },
    {
      key: 'p99Ms',
      label: 'A: start − fire time p99',
      unit: 'ms',
      digits: 1,
      bar: { op: '<=', value: 50, reference: 'BullMQ p99 382 ms' },
    },
    { key: 'maxMs', label: 'A: start − fire time max', unit: 'ms', digits: 1 },
    { key: 'rssMiB', label: 'A: node max RSS', unit: 'MiB', digits: 0 },
    { key: 'registerRate', label: 'B: schedules registered', unit: '/s', digits: 0 },
    { key: 'rssRegisteredMiB', label: 'B: node RSS after registration', unit: 'MiB', digits: 0 },
    { key: 'rssAfterHerdMiB', label: 'B: node RSS after the herd', unit: 'MiB', digits: 0 },
    { key: 'rssPeakMiB', label: 'B: node max RSS', unit: 'MiB', digits: 0, bar: { op: '<=', value: 512 } },
    { key: 'herdS', label: 'B: minute boundary → all started', unit: 's', digits: 3 },
  ],
  async run(ctx: RunContext): Promise<RunFigures> {
    const a = await perSecond(ctx, ctx.cronWindowMs ?? (ctx.quick ? WINDOW_MS_QUICK : WINDOW_MS));
    const b = await perMinute(ctx, ctx.quick ? PER_MINUTE_SCHEDULES_QUICK : PER_MINUTE_SCHEDULES);
    return {
      values: { ...a.values, ...b.values },
      notes: [...a.notes.map((n) => `A: ${n}`), ...b.notes.map((n) => `B: ${n}`)],
      verified: a.verified && b.verified,
    };
  },
};

/** Part A: per-second schedules over a window, then deleted; everything counted from Postgres. */
async function perSecond(ctx: RunContext, windowMs: number): Promise<PartFigures> {
  const taskType = `bench.w4.second.${randomBytes(4).toString('hex')}`;
  const node = await ctx.startNode();
  const fleet = await WorkerFleet.start(ctx.workers, {
    url: node.url,
    taskType,
    concurrency: CONCURRENCY,
    pollers: Math.max(ctx.pollers, POLLERS),
  });
  try {
    node.rss.reset();
    const ids: string[] = [];
    const schedule = { type: 'cron', cron_expression: '* * * * * *' };
    const registered = await submitTasks(node.url, PER_SECOND_SCHEDULES, () => ({ task_type: taskType, schedule }), {
      onCreated: (from, created) => created.forEach((id, k) => (ids[from + k] = id)),
    });
    const fromMs = Math.ceil(registered.lastAnsweredMs / 1000) * 1000 + EDGE_MS;
    ctx.log(
      `W4 A: ${PER_SECOND_SCHEDULES} per-second schedules registered in ${registered.lastAnsweredMs - registered.firstSubmitMs} ms; ` +
        `letting them fire for ${windowMs / 1000} s`,
    );
    await watch(ctx, node, fleet, registered.lastAnsweredMs + windowMs);

    const toMs = Math.floor(Date.now() / 1000) * 1000 - EDGE_MS;
    const deleted = await deleteTasks(node.url, ids);
    ctx.log(`W4 A: ${ids.length} schedules deleted in ${deleted.lastAnsweredMs - deleted.firstSentMs} ms`);
    const notes: string[] = [];
    if (deleted.alreadyGone > 0) notes.push(`${deleted.alreadyGone} DELETEs answered 404/409`);
    const unsettled = await settle(ctx, node, taskType);
    if (unsettled > 0)
      notes.push(`${unsettled} instances still pending or running ${SETTLE_LIMIT_MS / 1000} s after the DELETEs`);
    const rssMiB = node.rss.maxMiB;
    const results = await fleet.stop();
    notes.push(workerTraffic(results));

    const rows = await ctx.stores.cronInstances(node.schema, taskType, fromMs, toMs);
    const seconds = Math.max(0, (toMs - fromMs) / 1000 + 1);
    const expected = PER_SECOND_SCHEDULES * seconds;
    const t = tally(rows);
    const [p50, p99, max] = percentiles(t.lateMs, [50, 99, 100]) as [number, number, number];
    notes.push(
      `window ${iso(fromMs)} … ${iso(toMs)} (${seconds} fire times, first and last ${EDGE_MS / 1000} s of the run left out): ` +
        `expected ${expected}, ${t.instances} instances for ${t.pairs} (schedule, fire time) pairs of ${t.schedules} schedules, ` +
        `${t.firedPairs} pairs claimed; statuses ${JSON.stringify(t.byStatus)}`,
    );
    notes.push(perFireTime(rows));
    notes.push(`the ${ids.length} DELETEs took ${deleted.lastAnsweredMs - deleted.firstSentMs} ms (16 in parallel)`);
    notes.push(...t.oddities);
    if (t.extraClaims > 0 || t.extraInstances > 0)
      notes.push(`duplicates: ${t.extraClaims} repeated claims, ${t.extraInstances} extra instance rows`);
    if (t.firedPairs < expected) {
      notes.push(
        `missed: ${expected - t.pairs} fire times have no instance, ${t.pairs - t.firedPairs} instances were never claimed`,
      );
    }
    const succeeded = t.byStatus.succeeded ?? 0;
    const verified = t.firedPairs === expected && t.pairs === expected && succeeded === t.instances;
    if (!verified) {
      const message = `MISMATCH: expected ${expected} fire times run once each and succeeded; ${t.firedPairs} were claimed, ${succeeded} of ${t.instances} instances succeeded`;
      ctx.log(`!!! ${message}`);
      notes.push(message);
    }
    await node.stop();
    return {
      values: {
        firedPct: expected === 0 ? Number.NaN : (t.firedPairs / expected) * 100,
        duplicates: t.extraClaims + t.extraInstances,
        p50Ms: p50,
        p99Ms: p99,
        maxMs: max,
        rssMiB,
      },
      notes,
      verified,
    };
  } catch (error) {
    fleet.kill();
    throw error;
  }
}

/** Part B: many per-minute schedules on a fresh node, and the herd they make at the next minute. */
async function perMinute(ctx: RunContext, count: number): Promise<PartFigures> {
  const taskType = `bench.w4.minute.${randomBytes(4).toString('hex')}`;
  const node = await ctx.startNode();
  const fleet = await WorkerFleet.start(ctx.workers, {
    url: node.url,
    taskType,
    concurrency: CONCURRENCY,
    pollers: Math.max(ctx.pollers, POLLERS),
  });
  try {
    node.rss.reset();
    const notes: string[] = [`node RSS idle, before registering: ${currentMiB(node).toFixed(0)} MiB`];
    const headroomMs = ctx.quick ? REGISTER_HEADROOM_MS_QUICK : REGISTER_HEADROOM_MS;
    const leftMs = nextMinute(Date.now()) - Date.now();
    if (leftMs < headroomMs) {
      ctx.log(`W4 B: waiting ${(leftMs / 1000).toFixed(1)} s for the minute to turn before registering`);
      await sleep(leftMs + 500);
    }
    const schedule = { type: 'cron', cron_expression: '* * * * *' };
    const registered = await submitTasks(node.url, count, () => ({ task_type: taskType, schedule }));
    const registerMs = registered.lastAnsweredMs - registered.firstSubmitMs;
    const rssRegisteredMiB = currentMiB(node);
    if (registered.retried > 0)
      notes.push(`${registered.retried} submit requests were answered 429/503 and sent again`);
    const boundaryMs = nextMinute(registered.lastAnsweredMs);
    ctx.log(
      `W4 B: ${count} per-minute schedules registered in ${(registerMs / 1000).toFixed(1)} s, node RSS ${rssRegisteredMiB.toFixed(0)} MiB; ` +
        `they fire at ${iso(boundaryMs)}`,
    );
    if (nextMinute(registered.firstSubmitMs) < boundaryMs) {
      const early = await ctx.stores.cronStatusCounts(node.schema, taskType, registered.firstSubmitMs, boundaryMs - 1);
      notes.push(
        `registration crossed a minute boundary: instances that fired before ${iso(boundaryMs)}: ${JSON.stringify(early)}`,
      );
    }

    const untilBoundaryMs = boundaryMs - Date.now() - 1_000;
    if (untilBoundaryMs > 0) await sleep(untilBoundaryMs);
    const startedBefore = fleet.started;
    const herdDone = async (): Promise<boolean> => !alive(node) || fleet.started >= startedBefore + count;
    if (!(await waitFor(herdDone, boundaryMs + HERD_LIMIT_MS - Date.now(), SAMPLE_EVERY_MS))) {
      notes.push(
        `the herd did not finish: ${fleet.started - startedBefore} of ${count} started ${HERD_LIMIT_MS / 1000} s after the boundary`,
      );
    }
    const allSucceeded = async (): Promise<boolean> =>
      !alive(node) ||
      (fleet.reported >= fleet.started &&
        ((await ctx.stores.cronStatusCounts(node.schema, taskType, boundaryMs, boundaryMs)).succeeded ?? 0) >= count);
    await waitFor(allSucceeded, SETTLE_LIMIT_MS, SAMPLE_EVERY_MS);
    await sleep(AFTER_HERD_MS);
    const rssAfterHerdMiB = currentMiB(node);
    if (!alive(node)) {
      const message = `the node process died after registration; its last output:\n${node.output()}`;
      ctx.log(`!!! ${message}`);
      notes.push(message);
    }
    const rssPeakMiB = node.rss.maxMiB;
    const results = await fleet.stop();
    notes.push(workerTraffic(results));

    const t = tally(await ctx.stores.cronInstances(node.schema, taskType, boundaryMs, boundaryMs));
    const [p50, p99, max] = percentiles(t.lateMs, [50, 99, 100]) as [number, number, number];
    notes.push(
      `herd at ${iso(boundaryMs)}: ${t.instances} instances of ${count} schedules, ${t.firedPairs} claimed; start − fire time ` +
        `p50 ${fmtMs(p50)}, p99 ${fmtMs(p99)}, max ${fmtMs(max)}; statuses ${JSON.stringify(t.byStatus)}`,
    );
    notes.push(...t.oddities);
    if (t.extraClaims > 0 || t.extraInstances > 0)
      notes.push(`duplicates: ${t.extraClaims} repeated claims, ${t.extraInstances} extra instance rows`);
    const succeeded = t.byStatus.succeeded ?? 0;
    const verified = t.firedPairs === count && t.pairs === count && succeeded === t.instances;
    if (!verified) {
      const message = `MISMATCH: expected ${count} instances at ${iso(boundaryMs)} run once each and succeeded; ${t.firedPairs} were claimed, ${succeeded} of ${t.instances} succeeded`;
      ctx.log(`!!! ${message}`);
      notes.push(message);
    }
    return {
      values: {
        registerRate: (count / registerMs) * 1000,
        rssRegisteredMiB,
        rssAfterHerdMiB,
        rssPeakMiB,
        herdS: t.firedPairs === count ? max / 1000 : Number.NaN,
      },
      notes,
      verified,
    };
  } catch (error) {
    fleet.kill();
    throw error;
  }
}

interface Tally {
  instances: number;
  /** Distinct (schedule, fire time) pairs among the instances. */
  pairs: number;
  /** Pairs with at least one claimed instance. */
  firedPairs: number;
  schedules: number;
  /** Instance rows beyond the first for one (schedule, fire time). */
  extraInstances: number;
  /** Claims beyond the first, summed over instances. */
  extraClaims: number;
  byStatus: Record<string, number>;
  /** First claim − fire time of every claimed instance, ms. */
  lateMs: number[];
  /** Anything that should not happen at all, as notes. */
  oddities: string[];
}

function tally(rows: readonly CronInstanceRow[]): Tally {
  const pairs = new Set<string>();
  const firedPairs = new Set<string>();
  const schedules = new Set<string>();
  const byStatus: Record<string, number> = {};
  const lateMs: number[] = [];
  let extraClaims = 0;
  let offGrid = 0;
  let claimedWithoutStart = 0;
  for (const row of rows) {
    const pair = `${row.scheduleId}@${row.fireMs}`;
    pairs.add(pair);
    schedules.add(row.scheduleId);
    byStatus[row.status] = (byStatus[row.status] ?? 0) + 1;
    extraClaims += Math.max(0, row.attempts - 1);
    if (row.fireMs % 1000 !== 0) offGrid++;
    if (row.lateMs !== null) {
      firedPairs.add(pair);
      lateMs.push(row.lateMs);
    } else if (row.attempts > 0) {
      claimedWithoutStart++;
    }
  }
  const oddities: string[] = [];
  if (offGrid > 0) oddities.push(`ODD: ${offGrid} instances have a fire_time that is not a whole second`);
  if (claimedWithoutStart > 0)
    oddities.push(`ODD: ${claimedWithoutStart} instances have attempts > 0 but no started_at`);
  const negative = lateMs.filter((ms) => ms < 0).length;
  if (negative > 0)
    oddities.push(`ODD: ${negative} instances were claimed before their fire time (min ${fmtMs(Math.min(...lateMs))})`);
  return {
    instances: rows.length,
    pairs: pairs.size,
    firedPairs: firedPairs.size,
    schedules: schedules.size,
    extraInstances: rows.length - pairs.size,
    extraClaims,
    byStatus,
    lateMs,
    oddities,
  };
}

/**
 * Where part A's lateness comes from: for each fire time, the first and the last claim of its
 * instances. A late first claim is the wheel (or the schedule actors) firing late; a wide gap
 * between first and last is the claim path working through one second's instances.
 */
function perFireTime(rows: readonly CronInstanceRow[]): string {
  const byFire = new Map<number, { first: number; last: number }>();
  for (const row of rows) {
    if (row.lateMs === null) continue;
    const f = byFire.get(row.fireMs);
    if (f === undefined) byFire.set(row.fireMs, { first: row.lateMs, last: row.lateMs });
    else {
      f.first = Math.min(f.first, row.lateMs);
      f.last = Math.max(f.last, row.lateMs);
    }
  }
  const firsts = [...byFire.values()].map((f) => f.first);
  const lasts = [...byFire.values()].map((f) => f.last);
  const [first50, first100] = percentiles(firsts, [50, 100]) as [number, number];
  const [last50, last100] = percentiles(lasts, [50, 100]) as [number, number];
  return (
    `per fire time (${byFire.size}): first claim − fire time p50 ${fmtMs(first50)}, max ${fmtMs(first100)}; ` +
    `last claim − fire time p50 ${fmtMs(last50)}, max ${fmtMs(last100)}`
  );
}

/** Waits until `untilMs`, logging the worker's progress now and then. */
async function watch(ctx: RunContext, node: BenchNode, fleet: WorkerFleet, untilMs: number): Promise<void> {
  let lastLogMs = Date.now();
  let lastStarted = fleet.started;
  while (Date.now() < untilMs) {
    await sleep(Math.min(SAMPLE_EVERY_MS * 4, untilMs - Date.now()));
    if (!alive(node)) throw new Error('W4 A: the node process died while the schedules fired');
    if (Date.now() - lastLogMs >= PROGRESS_LOG_EVERY_MS) {
      const started = fleet.started;
      ctx.log(
        `W4 A: ${started} instances started (${(((started - lastStarted) / (Date.now() - lastLogMs)) * 1000).toFixed(0)}/s)`,
      );
      lastLogMs = Date.now();
      lastStarted = started;
    }
  }
}

/** After the DELETEs: waits until no instance is pending or running; returns how many still are. */
async function settle(ctx: RunContext, node: BenchNode, taskType: string): Promise<number> {
  let open = 0;
  const all = async (): Promise<boolean> => {
    const counts = await ctx.stores.cronStatusCounts(node.schema, taskType, 0, Date.now() + 86_400_000);
    open = (counts.pending ?? 0) + (counts.running ?? 0);
    return open === 0;
  };
  await waitFor(all, SETTLE_LIMIT_MS, SAMPLE_EVERY_MS);
  return open;
}

/** The first whole minute strictly after `ms`. */
function nextMinute(ms: number): number {
  return Math.floor(ms / 60_000) * 60_000 + 60_000;
}

function iso(ms: number): string {
  return new Date(ms).toISOString().slice(11, 23);
}

function fmtMs(ms: number): string {
  return Number.isFinite(ms) ? `${ms.toFixed(0)} ms` : '—';
}
