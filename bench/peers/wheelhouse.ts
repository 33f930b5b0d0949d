import { submitTasks } from '../submit.js';
import { onOneNode, w1Count, W1_CONCURRENCY } from '../w1-throughput.js';
import { w2Herd } from '../w2-herd.js';
import { w3Precision } from '../w3-precision.js';
import { WorkerFleet } from '../worker-process.js';
import {
  verifyAllSucceeded,
  workerTraffic,
  type RunContext,
  type RunFigures,
  type WithRunContext,
} from '../workload.js';

/**
 * Wheelhouse's side of the peer comparison: `npm run bench`'s own W1 (one node), W2 and W3,
 * and W1's processing rate once every task is enqueued, each on a fresh node.
 */
const W1_TASK_TYPE = 'bench.w1';

export async function oursW1(withContext: WithRunContext): Promise<RunFigures> {
  const whileSubmitting = await withContext((ctx) => onOneNode(ctx, w1Count(ctx.quick)));
  const afterEnqueue = await withContext((ctx) => processEnqueued(ctx, w1Count(ctx.quick)));
  return {
    values: {
      rate: whileSubmitting.values.rate ?? Number.NaN,
      submitRate: whileSubmitting.values.submitRate ?? Number.NaN,
      processRate: afterEnqueue.values.processRate ?? Number.NaN,
    },
    notes: [...whileSubmitting.notes, ...afterEnqueue.notes.map((n) => `once enqueued: ${n}`)],
    verified: whileSubmitting.verified && afterEnqueue.verified,
  };
}

export function oursW2(withContext: WithRunContext): Promise<RunFigures> {
  return withContext((ctx) => w2Herd.run(ctx));
}

export function oursW3(withContext: WithRunContext): Promise<RunFigures> {
  return withContext((ctx) => w3Precision.run(ctx));
}

/**
 * W1 the way BullMQ usually reports it: N immediate tasks submitted while no worker runs (they
 * wait in the ready queue), then the worker process started; N ÷ (first handler start → last
 * result accepted).
 */
async function processEnqueued(ctx: RunContext, count: number): Promise<RunFigures> {
  const node = await ctx.startNode();
  const submitted = await submitTasks(node.url, count, () => ({ task_type: W1_TASK_TYPE }));
  const notes: string[] = [];
  if (submitted.retried > 0) notes.push(`${submitted.retried} submit requests were answered 429/503 and sent again`);
  const fleet = await WorkerFleet.start(ctx.workers, {
    url: node.url,
    taskType: W1_TASK_TYPE,
    concurrency: W1_CONCURRENCY,
    pollers: ctx.pollers,
  });
  try {
    await fleet.until((f) => f.reported >= count, 60_000 + count, `${count} enqueued W1 results`);
    const results = await fleet.stop();
    const firstStartMs = Math.min(...results.map((r) => r.firstStartMs).filter((ms) => Number.isFinite(ms)));
    const lastMs = Math.max(...results.map((r) => r.lastReportedMs));
    const check = await verifyAllSucceeded(ctx, node, W1_TASK_TYPE, count);
    return {
      values: { processRate: (count / (lastMs - firstStartMs)) * 1000 },
      notes: [...notes, ...check.notes, workerTraffic(results)],
      verified: check.verified,
    };
  } catch (error) {
    fleet.kill();
    throw error;
  }
}
