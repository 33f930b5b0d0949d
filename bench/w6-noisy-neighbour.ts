import { appendFileSync } from 'node:fs';
import { declareLimit, QuietKeys } from './limits.js';
import { percentiles } from './stats.js';
import { submitTasks } from './submit.js';
import { sleep } from './time.js';
import { w2Shape } from './w2-herd.js';
import { CpuWindow } from './w1-throughput.js';
import { WorkerFleet } from './worker-process.js';
import { verifyAllSucceeded, workerTraffic, type RunContext, type RunFigures, type Workload } from './workload.js';

/**
 * W6: a noisy neighbour. One key of a family floods (W2's herd, all due at T) under a
 * concurrency limit while 99 other keys of the family each submit a task a second: do the
 * quiet keys still start at once, and what does serving them cost the flood?
 */
const TASK_TYPE = 'bench.w6';
const FAMILY = 'customer:*';
const FLOOD_KEY = 'customer:0';
/**
 * W6's shape, shared with its BullMQ side (bench/peers/bullmq-flow.ts).
 * - `keyConcurrency`: the family's concurrency: every `customer:<x>` runs at most this many at once.
 * - `handlerSleepMs`: each handler sleeps this long: with no-op handlers the flood's rate under
 *   concurrency 50 is 50 / (the node's permit round trip), which measures the round trip rather
 *   than the limit; with 5 ms the limit alone allows at most 50 / 5 ms = 10 000/s.
 * - `slots`: per worker process (W2's): far more than the limit.
 * - `sampleEveryMs`: how often the harness samples the flood's progress.
 * - `drainLimitMs`: the flood must drain within this long after T.
 */
export const W6_SHAPE = {
  quietKeys: Array.from({ length: 99 }, (_, i) => `customer:${i + 1}`) as readonly string[],
  keyConcurrency: 50,
  handlerSleepMs: 5,
  slots: 1000,
  sampleEveryMs: 10,
  drainLimitMs: 300_000,
} as const;
const {
  quietKeys: QUIET_KEYS,
  keyConcurrency: KEY_CONCURRENCY,
  handlerSleepMs: HANDLER_SLEEP_MS,
  slots: SLOTS,
  sampleEveryMs: SAMPLE_EVERY_MS,
  drainLimitMs: DRAIN_LIMIT_MS,
} = W6_SHAPE;

type Phase = 'limited' | 'alone' | 'unlimited';

interface PhaseFigures {
  /** T → the sample at which the flood's last handler had started, ms. */
  drainMs: number;
  quietLagsMs: number[];
  quietAccepted: number;
  rssMiB: number;
  notes: string[];
  verified: boolean;
}

/** Alternates which of the two limited phases goes first, run by run. */
let runIndex = 0;

export const w6NoisyNeighbour: Workload = {
  id: 'W6',
  title: 'noisy neighbour',
  definitions: [
    `W6: the family \`${FAMILY}\` is declared with concurrency ${KEY_CONCURRENCY}. Key \`${FLOOD_KEY}\` floods: N = 200 000 (quick: 20 000) ` +
      'tasks naming it, all due at T, submitted as W2 submits its herd (T from a calibrated submission rate; the calibration tasks ' +
      `name \`customer:calibration\`). From T until the flood has drained, ${QUIET_KEYS.length} quiet keys \`customer:1\` … ` +
      `\`customer:${QUIET_KEYS.length}\` each submit one immediate task a second (POST /api/tasks, one task a request, the keys ` +
      'spread evenly over each second). Every task has the same task type (one ready queue) and runs on one worker process of ' +
      `${SLOTS} slots whose handlers sleep ${HANDLER_SLEEP_MS} ms, so concurrency ${KEY_CONCURRENCY} binds on the handlers ` +
      `(at most ${KEY_CONCURRENCY} / ${HANDLER_SLEEP_MS} ms = ${(KEY_CONCURRENCY / HANDLER_SLEEP_MS) * 1000} starts/s) and not only on the node's round trip.`,
    "W6 quiet-key start lag: handler start − Date.now() just before the task's submit request was sent (so it includes the submit " +
      "request), over every quiet task submitted during the flood, each key's first task (its key's activation) included.",
    'W6 flood drain: T → the first 10 ms sample at which the worker had started every flood task (started − quiet tasks started); ' +
      'drain rate = N / drain time. "Without quiet keys": the same flood on a fresh node in the same run with no quiet keys; the ' +
      'two go in alternating order run by run; ratio = drain rate with / without.',
    'W6 "no limit declared" (today\'s behaviour): the same flood and quiet keys with no limit declared and none named; the flood ' +
      "then runs at the node's full speed and a quiet task waits behind the flood's entries in the ready queue.",
  ],
  metrics: [
    { key: 'quietP50Ms', label: 'quiet keys: start lag p50', unit: 'ms', digits: 1 },
    { key: 'quietP99Ms', label: 'quiet keys: start lag p99', unit: 'ms', digits: 1, bar: { op: '<=', value: 50 } },
    { key: 'quietMaxMs', label: 'quiet keys: start lag max', unit: 'ms', digits: 1 },
    { key: 'quietTasks', label: 'quiet tasks measured', unit: 'tasks', digits: 0 },
    { key: 'drainS', label: 'flood drain, with quiet keys', unit: 's', digits: 2 },
    { key: 'drainRate', label: 'flood drain rate, with quiet keys', unit: '/s', digits: 0 },
    { key: 'aloneRate', label: 'flood drain rate, without quiet keys', unit: '/s', digits: 0 },
    {
      key: 'ratio',
      label: 'drain rate with / without quiet keys',
      unit: '×',
      digits: 3,
      bar: { op: '>=', value: 0.8 },
    },
    { key: 'todayP99Ms', label: 'no limit declared: quiet start lag p99', unit: 'ms', digits: 1 },
    { key: 'todayMaxMs', label: 'no limit declared: quiet start lag max', unit: 'ms', digits: 1 },
    { key: 'todayDrainS', label: 'no limit declared: flood drain', unit: 's', digits: 2 },
    { key: 'rssMiB', label: 'node max RSS, with quiet keys', unit: 'MiB', digits: 0 },
  ],
  async run(ctx: RunContext): Promise<RunFigures> {
    const order: Phase[] = runIndex++ % 2 === 0 ? ['limited', 'alone'] : ['alone', 'limited'];
    const figures = new Map<Phase, PhaseFigures>();
    for (const phase of [...order, 'unlimited' as const]) figures.set(phase, await runPhase(ctx, phase));
    const limited = figures.get('limited') as PhaseFigures;
    const alone = figures.get('alone') as PhaseFigures;
    const today = figures.get('unlimited') as PhaseFigures;
    const { count } = w2Shape(ctx.quick);
    const [p50, p99, max] = percentiles(limited.quietLagsMs, [50, 99, 100]) as [number, number, number];
    const [todayP99, todayMax] = percentiles(today.quietLagsMs, [99, 100]) as [number, number];
    const drainRate = (count / limited.drainMs) * 1000;
    const aloneRate = (count / alone.drainMs) * 1000;
    return {
      values: {
        quietP50Ms: p50,
        quietP99Ms: p99,
        quietMaxMs: max,
        quietTasks: limited.quietLagsMs.length,
        drainS: limited.drainMs / 1000,
        drainRate,
        aloneRate,
        ratio: drainRate / aloneRate,
        todayP99Ms: todayP99,
        todayMaxMs: todayMax,
        todayDrainS: today.drainMs / 1000,
        rssMiB: limited.rssMiB,
      },
      notes: [
        `order: ${order.join(', ')}, unlimited`,
        ...[...figures].flatMap(([phase, f]) => f.notes.map((n) => `${phase}: ${n}`)),
      ],
      verified: [...figures.values()].every((f) => f.verified),
    };
  },
};

/** One phase on a fresh node: the flood, with or without quiet keys, with or without the limit. */
async function runPhase(ctx: RunContext, phase: Phase): Promise<PhaseFigures> {
  const { count, marginMs, calibrationTasks, submitTimeFactor } = w2Shape(ctx.quick);
  const limited = phase !== 'unlimited';
  const node = await ctx.startNode();
  if (limited) await declareLimit(node.url, FAMILY, { concurrency: KEY_CONCURRENCY });
  const fleet = await WorkerFleet.start(ctx.workers, {
    url: node.url,
    taskType: TASK_TYPE,
    concurrency: SLOTS,
    pollers: ctx.pollers,
    streamLags: true,
    handlerSleepMs: HANDLER_SLEEP_MS,
  });
  const quiet =
    phase === 'alone'
      ? null
      : QuietKeys.overHttp({ url: node.url, taskType: TASK_TYPE, keys: QUIET_KEYS, named: limited });
  try {
    node.rss.reset();
    const calibrationTask = {
      task_type: `${TASK_TYPE}.calibration`,
      ...(limited ? { limits: ['customer:calibration'] } : {}),
      schedule: { type: 'delayed', delay_seconds: 3_600 },
    };
    await submitTasks(node.url, calibrationTasks / 2, () => calibrationTask);
    const calibration = await submitTasks(node.url, calibrationTasks / 2, () => calibrationTask);
    const submitPerMs = calibrationTasks / 2 / (calibration.lastAnsweredMs - calibration.firstSubmitMs);
    const dueMs = Date.now() + marginMs + Math.ceil((count / submitPerMs) * submitTimeFactor);
    const task = {
      task_type: TASK_TYPE,
      ...(limited ? { limits: [FLOOD_KEY] } : {}),
      schedule: { type: 'delayed', due_time: new Date(dueMs).toISOString() },
    };
    ctx.log(`W6 ${phase}: submitting ${count} flood tasks due in ${((dueMs - Date.now()) / 1000).toFixed(1)} s`);
    const submitted = await submitTasks(node.url, count, () => task);
    const notes: string[] = [];
    const gapMs = dueMs - submitted.lastAnsweredMs;
    if (gapMs < 2_000) notes.push(`INVALID: submission ended only ${(gapMs / 1000).toFixed(1)} s before T`);
    if (submitted.retried > 0) notes.push(`${submitted.retried} submit requests were answered 429/503 and sent again`);

    await sleep(Math.max(0, dueMs - Date.now()));
    quiet?.start(dueMs);
    // The node's and the worker's CPU from T to the drain: the cost of serving the flood (and
    // the quiet keys), which a loaded machine's neighbours move less than the lags.
    const cpu = new CpuWindow([
      ['node', [node.pid]],
      ['worker', fleet.pids],
    ]);
    const flood = new FloodWatch(fleet, dueMs);
    const drainMs = await flood.untilDrained(count, () =>
      notes.push(`T → drain: ${cpu.note(count + flood.lags.length)}`),
    );
    const { lags, starts } = flood;
    const sent = quiet ? await quiet.stop() : { accepted: 0, failed: 0, lastError: '' };
    if (quiet) {
      const [a50, a99] = percentiles(quiet.answerMs, [50, 99]);
      notes.push(`quiet submits answered in p50 ${a50} ms, p99 ${a99} ms`);
    }
    if (sent.failed > 0) notes.push(`${sent.failed} quiet submits failed (last: ${sent.lastError})`);
    if (lags.length > 0) notes.push(afterT(starts, lags));
    const total = count + sent.accepted;
    await fleet.until((f) => f.reported >= total, 60_000, `${total} W6 results`);
    flood.take();
    const results = await fleet.stop();
    flood.take();
    notes.push(`${workerTraffic(results)}; ${sent.accepted} quiet tasks`);
    if (lags.length !== sent.accepted)
      notes.push(`worker saw ${lags.length} quiet starts for ${sent.accepted} submitted`);
    const check = await verifyAllSucceeded(ctx, node, TASK_TYPE, total);
    // W6_LAGS_FILE: each quiet start (ms after T) and its lag, for a look at when the slow ones start.
    if (process.env.W6_LAGS_FILE)
      appendFileSync(process.env.W6_LAGS_FILE, `${JSON.stringify({ phase, starts, lags })}\n`);
    return {
      drainMs,
      quietLagsMs: lags,
      quietAccepted: sent.accepted,
      rssMiB: node.rss.maxMiB,
      notes: [...notes, ...check.notes],
      verified: check.verified,
    };
  } catch (error) {
    fleet.kill();
    await quiet?.stop();
    throw error;
  } finally {
    // The next phase gets the machine to itself (the context stops it again, harmlessly).
    await node.stop();
  }
}

/**
 * The flood's progress from T, sampled every W6_SHAPE.sampleEveryMs: every start the workers
 * report, less the quiet tasks' (their lags come in the same progress messages as the count;
 * only quiet tasks carry `due_ms`). Shared by W6 and its BullMQ side.
 */
export class FloodWatch {
  /** The quiet tasks' start lags, ms, and when each started, ms after T. */
  readonly lags: number[] = [];
  readonly starts: number[] = [];

  constructor(
    private readonly fleet: WorkerFleet,
    private readonly dueMs: number,
  ) {}

  take(): void {
    const taken = this.fleet.takeLags(0, Number.MAX_SAFE_INTEGER);
    this.lags.push(...taken.lagMs);
    this.starts.push(...taken.startMs.map((ms) => ms - this.dueMs));
  }

  /** T → the first sample at which all `count` flood tasks had started, ms; throws past W6_SHAPE.drainLimitMs. */
  async untilDrained(count: number, onDrained: () => void = () => undefined): Promise<number> {
    while (Date.now() < this.dueMs + DRAIN_LIMIT_MS) {
      this.take();
      if (this.fleet.started - this.lags.length >= count) {
        onDrained();
        return Date.now() - this.dueMs;
      }
      await sleep(SAMPLE_EVERY_MS);
    }
    throw new Error(`W6: the flood did not drain within ${DRAIN_LIMIT_MS} ms`);
  }
}

/** How long after T the first seconds' tail lasts: the quiet starts over the bar in T's first two seconds and after. */
const FIRST_MS = 2_000;
const BAR_MS = 50;

export function afterT(starts: readonly number[], lags: readonly number[]): string {
  const first: number[] = [];
  const later: number[] = [];
  for (let i = 0; i < lags.length; i++) ((starts[i] as number) < FIRST_MS ? first : later).push(lags[i] as number);
  const over = (list: number[]): number => list.filter((ms) => ms > BAR_MS).length;
  const [laterP99] = later.length > 0 ? percentiles(later, [99]) : [Number.NaN];
  return (
    `quiet starts over ${BAR_MS} ms: ${over(first)} of ${first.length} in T's first ${FIRST_MS / 1000} s, ` +
    `${over(later)} of ${later.length} after (p99 from then on ${laterP99} ms)`
  );
}
