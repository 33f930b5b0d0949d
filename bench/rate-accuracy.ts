import { declareLimit } from './limits.js';
import { submitTasks } from './submit.js';
import { maxInWindow } from './stats.js';
import { sleep } from './time.js';
import { WorkerFleet } from './worker-process.js';
import type { RunContext, RunFigures } from './workload.js';

/**
 * Rate accuracy (issue 28, item 2) as a workload both Wheelhouse and BullMQ run under
 * `npm run bench -- --peers --only RATE`: a rate of `limit` starts a second with `waiting`
 * tasks waiting behind it; from the first start, for `measureMs`, the most starts in any 1 s
 * window and the share of the starts the rate allows that were used. Start times are the
 * handlers' (Date.now() in the worker process) on both sides, so both carry the delivery's
 * jitter; the node's own start times are tighter (test/e2e/limits-rate.test.ts bounds those).
 */
export function rateShape(quick: boolean): {
  limit: number;
  waiting: number;
  measureMs: number;
  /** Worker slots: far more than the rate needs. */
  slots: number;
} {
  return quick
    ? { limit: 100, waiting: 2_000, measureMs: 15_000, slots: 200 }
    : { limit: 100, waiting: 10_000, measureMs: 60_000, slots: 200 };
}

export const RATE_DEFINITION =
  'RATE: a rate of 100 starts a second (period 1 s, no burst), 10 000 tasks (quick: 2 000) waiting behind it, one worker ' +
  'process of 200 slots with no-op handlers. From the first handler start, for 60 s (quick: 15 s): the most starts in any 1 s ' +
  'window (bar ≤ limit + burst = 100) and the starts counted ÷ the starts the rate allows in that time (bar ≥ 95 %). Start ' +
  "times are the handlers' own (worker process clock) on both sides. Wheelhouse: a declared limit `{rate: {limit: 100, " +
  'period_seconds: 1}}` every task names. BullMQ: `queue.setGlobalRateLimit(100, 1000)`, its open-source global rate limit.';

/**
 * Collects the fleet's streamed handler starts until `measureMs` after the first; answers the
 * figures of those inside the measured time (`waiting` tasks must outlast it).
 */
export async function measureRate(
  fleet: WorkerFleet,
  shape: ReturnType<typeof rateShape>,
  log: (line: string) => void,
): Promise<RunFigures> {
  const starts: number[] = [];
  const deadline = Date.now() + shape.measureMs + 120_000;
  let first = Number.NaN;
  while (Date.now() < deadline) {
    starts.push(...fleet.takeLags(0, Number.MAX_SAFE_INTEGER).startMs);
    if (Number.isNaN(first) && starts.length > 0) first = Math.min(...starts);
    if (!Number.isNaN(first) && Date.now() > first + shape.measureMs + 500) break;
    await sleep(100);
  }
  if (Number.isNaN(first)) throw new Error('RATE: no task started');
  const inside = starts.filter((ms) => ms < first + shape.measureMs).sort((a, b) => a - b);
  const allowed = (shape.measureMs / 1000) * shape.limit;
  const figures = { maxInWindow: maxInWindow(inside, 1000), usedPct: (inside.length / allowed) * 100 };
  log(`RATE: ${inside.length} starts in ${shape.measureMs} ms, most in 1 s ${figures.maxInWindow}`);
  const notes = inside.length >= shape.waiting ? ['INVALID: the waiting tasks ran out inside the measured time'] : [];
  return { values: figures, notes, verified: notes.length === 0 };
}

const RATE_TASK_TYPE = 'bench.rate';
const RATE_KEY = 'bench-rate';

/** Wheelhouse's side: one node, the key declared, every task naming it. */
export async function oursRate(ctx: RunContext): Promise<RunFigures> {
  const shape = rateShape(ctx.quick);
  const node = await ctx.startNode();
  await declareLimit(node.url, RATE_KEY, { rate: { limit: shape.limit, period_seconds: 1 } });
  const fleet = await WorkerFleet.start(ctx.workers, {
    url: node.url,
    taskType: RATE_TASK_TYPE,
    concurrency: shape.slots,
    pollers: ctx.pollers,
    streamLags: true,
  });
  try {
    const taskAt = (): Record<string, unknown> => ({
      task_type: RATE_TASK_TYPE,
      limits: [RATE_KEY],
      payload: { due_ms: Date.now() },
    });
    await submitTasks(node.url, shape.waiting, taskAt);
    return await measureRate(fleet, shape, ctx.log);
  } finally {
    fleet.kill();
  }
}
