import { percentiles } from '../stats.js';
import { QuietKeys } from '../limits.js';
import { sleep } from '../time.js';
import { measureRate, rateShape } from '../rate-accuracy.js';
import { afterT, FloodWatch, W6_SHAPE } from '../w6-noisy-neighbour.js';
import { w2Shape } from '../w2-herd.js';
import type { RunFigures } from '../workload.js';
import { addJobs, chooseBullmqDueMs, delayedJob, onEmptyDb, startFleet, verifyCompleted } from './bullmq.js';
import type { PeerContext } from './shapes.js';

/**
 * Flow control on BullMQ with what its open-source version has: a global concurrency and a
 * global rate limit per queue (`setGlobalConcurrency`, `setGlobalRateLimit`). Per-key limits
 * (groups) are BullMQ Pro's, so W6's family becomes one queue-wide limit of 50: the nearest a
 * BullMQ OSS user gets without a queue and workers per customer.
 */

/**
 * W6's shape on BullMQ: 200 000 (quick 20 000) jobs due at T on one queue of global
 * concurrency 50, one worker process of 1 000 slots whose processor sleeps 5 ms; from T until
 * the flood has started, the 99 quiet keys each add one job a second (`queue.add`, carrying
 * its send time as `due_ms`). The quiet keys share the queue and its limit with the flood.
 */
export async function bullmqW6(ctx: PeerContext): Promise<RunFigures> {
  const { count } = w2Shape(ctx.quick);
  const queueName = 'w6';
  return onEmptyDb(ctx, queueName, async (queue) => {
    await queue.setGlobalConcurrency(W6_SHAPE.keyConcurrency);
    const fleet = await startFleet(ctx, queueName, W6_SHAPE.slots, {
      handlerSleepMs: W6_SHAPE.handlerSleepMs,
      streamLags: true,
    });
    const quiet = new QuietKeys({
      keys: W6_SHAPE.quietKeys,
      send: async (key, sentMs) => {
        await queue.add(queueName, { due_ms: sentMs, key });
      },
    });
    try {
      const dueMs = await chooseBullmqDueMs(ctx, queueName, count);
      const submitted = await addJobs(queue, count, () => delayedJob(queueName, {}, dueMs));
      const notes: string[] = [];
      const gapMs = dueMs - submitted.lastAnsweredMs;
      if (gapMs < 2_000) notes.push(`INVALID: submission ended only ${(gapMs / 1000).toFixed(1)} s before T`);
      await sleep(Math.max(0, dueMs - Date.now()));
      quiet.start(dueMs);
      const flood = new FloodWatch(fleet, dueMs);
      const drainMs = await flood.untilDrained(count);
      const sent = await quiet.stop();
      if (sent.failed > 0) notes.push(`${sent.failed} quiet adds failed (last: ${sent.lastError})`);
      const [a50, a99] = percentiles(quiet.answerMs, [50, 99]);
      notes.push(`quiet adds answered in p50 ${a50} ms, p99 ${a99} ms`);
      const total = count + sent.accepted;
      await fleet.until((f) => f.reported >= total, 120_000, `${total} BullMQ W6 results`);
      flood.take();
      await fleet.stop();
      flood.take();
      if (flood.lags.length > 0) notes.push(afterT(flood.starts, flood.lags));
      if (flood.lags.length !== sent.accepted)
        notes.push(`worker saw ${flood.lags.length} quiet starts for ${sent.accepted} added`);
      const [p50, p99, max] = percentiles(flood.lags, [50, 99, 100]) as [number, number, number];
      const check = await verifyCompleted(queue, total);
      return {
        values: {
          quietP50Ms: p50,
          quietP99Ms: p99,
          quietMaxMs: max,
          drainS: drainMs / 1000,
          drainRate: (count / drainMs) * 1000,
        },
        notes: [...notes, ...check.notes],
        verified: check.verified,
      };
    } catch (error) {
      fleet.kill();
      await quiet.stop();
      throw error;
    }
  });
}

/** RATE (bench/rate-accuracy.ts) on BullMQ: its global rate limit, the jobs added with the worker running. */
export async function bullmqRate(ctx: PeerContext): Promise<RunFigures> {
  const shape = rateShape(ctx.quick);
  const queueName = 'rate';
  return onEmptyDb(ctx, queueName, async (queue) => {
    await queue.setGlobalRateLimit(shape.limit, 1000);
    const fleet = await startFleet(ctx, queueName, shape.slots, { streamLags: true });
    try {
      await addJobs(queue, shape.waiting, () => ({ name: queueName, data: { due_ms: Date.now() } }));
      return await measureRate(fleet, shape, ctx.log);
    } finally {
      fleet.kill();
    }
  });
}
