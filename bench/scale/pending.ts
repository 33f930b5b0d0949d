import { scrapeMetrics, metric } from '../cluster-nodes.js';
import { currentMiB, runNames, startBenchNode } from '../node-process.js';
import { describeSizes, mib, tableSizes, walPosition } from '../pg-sizes.js';
import { startRedisProcess } from '../redis-process.js';
import { submitTasks } from '../submit.js';
import { sleep, waitFor } from '../time.js';
import { WorkerFleet } from '../worker-process.js';
import type { ScaleContext, ScalePart } from './types.js';

/**
 * Scale part 1: N delayed tasks pending at once on one node, due over 24 h starting an hour
 * from now (so none falls due while the part runs), on a private redis-server. Measures the
 * submit rate, the node's RSS, Redis memory and Postgres sizes per pending task, then flushes
 * that Redis and times the rebuild: until every wheel partition has rebuilt in full from
 * Postgres (`wheelhouse_partition_rebuilds_total` up by the partition count), and whether a
 * task submitted right after the flush, due a minute later, starts on time.
 */
const SPREAD_MS = 24 * 3_600_000;
const FIRST_DUE_AFTER_MS = 3_600_000;
const PROBE_DELAY_MS = 60_000;
/** "On time" for the probe: docs/design.md, Guarantees — due tasks start within about a second. */
const PROBE_ON_TIME_MS = 1_000;
const REBUILD_LIMIT_MS = 20 * 60_000;
const PARTITIONS = 64;
const PROGRESS_EVERY = 500_000;
const SCRAPE_TIMEOUT_MS = 60_000;

/** Full rebuilds of wheel partitions so far. The scrape may wait on a node busy rebuilding: a generous timeout. */
async function rebuilds(url: string): Promise<number> {
  return metric(await scrapeMetrics(url, SCRAPE_TIMEOUT_MS), 'wheelhouse_partition_rebuilds_total');
}

export async function pendingAtScale(ctx: ScaleContext, count: number): Promise<ScalePart> {
  const redis = await startRedisProcess();
  const names = runNames();
  ctx.track(names);
  const node = await startBenchNode(names, ['--redis-url', redis.url, ...ctx.nodeFlags]);
  const notes: string[] = [];
  try {
    const idleMiB = currentMiB(node);
    const redisBefore = await redis.usedMemory();
    const walBefore = await walPosition(ctx.stores.pg);
    node.rss.reset();
    const firstDueMs = Date.now() + FIRST_DUE_AFTER_MS;
    let nextLog = PROGRESS_EVERY;
    const started = Date.now();
    const submitted = await submitTasks(
      node.url,
      count,
      (i) => ({
        task_type: 'scale.pending',
        payload: { n: i },
        // Spread evenly, interleaved: every batch touches the whole day, as producers would.
        schedule: {
          type: 'delayed',
          due_time: new Date(firstDueMs + ((i * 7_919) % count) * (SPREAD_MS / count)).toISOString(),
        },
      }),
      {
        parallel: 4,
        onCreated: (from) => {
          if (from + 1000 < nextLog) return;
          nextLog += PROGRESS_EVERY;
          const s = (Date.now() - started) / 1000;
          ctx.log(
            `scale pending: ${from + 1000} submitted in ${s.toFixed(0)} s, node RSS ${currentMiB(node).toFixed(0)} MiB`,
          );
        },
      },
    );
    const submitS = (submitted.lastAnsweredMs - submitted.firstSubmitMs) / 1000;
    const walBytes = Number((await walPosition(ctx.stores.pg)) - walBefore);
    await sleep(5_000); // the last far entries reach their buckets
    const rssPeakMiB = node.rss.maxMiB;
    const rssAfterMiB = currentMiB(node);
    const redisAfter = await redis.usedMemory();
    const sizes = await tableSizes(ctx.stores.pg, names.schema, true);
    const tasks = sizes.find((s) => s.table === 'tasks');
    ctx.log(
      `scale pending: ${count} submitted in ${submitS.toFixed(0)} s; RSS peak ${rssPeakMiB.toFixed(0)} MiB; Redis ${mib(redisAfter - redisBefore)} MiB`,
    );
    notes.push(`node RSS idle before submitting ${idleMiB.toFixed(0)} MiB, after ${rssAfterMiB.toFixed(0)} MiB`);
    notes.push(...describeSizes(sizes));
    for (const line of describeSizes(sizes, 1)) ctx.log(`scale pending: ${line}`);
    ctx.log(
      `scale pending: WAL ${(walBytes / count).toFixed(0)} bytes per task; node RSS after ${rssAfterMiB.toFixed(0)} MiB`,
    );
    if (submitted.retried > 0) notes.push(`${submitted.retried} submit requests answered 429/503 and were sent again`);

    // Redis lost: everything the node keeps there goes at once.
    const fleet = await WorkerFleet.start(1, { url: node.url, taskType: 'scale.probe', concurrency: 10, pollers: 1 });
    const rebuiltBefore = await rebuilds(node.url);
    await redis.client.flushall();
    const flushedMs = Date.now();
    const probeDueMs = flushedMs + PROBE_DELAY_MS;
    await submitTasks(node.url, 1, () => ({
      task_type: 'scale.probe',
      payload: { due_ms: probeDueMs },
      schedule: { type: 'delayed', due_time: new Date(probeDueMs).toISOString() },
    }));
    const rebuilt = async (): Promise<boolean> =>
      (await rebuilds(node.url).catch(() => rebuiltBefore)) - rebuiltBefore >= PARTITIONS;
    const allRebuilt = await waitFor(rebuilt, REBUILD_LIMIT_MS, 250);
    const rebuildS = (Date.now() - flushedMs) / 1000;
    ctx.log(
      `scale pending: Redis flushed; ${allRebuilt ? 'every partition rebuilt' : 'NOT every partition rebuilt'} after ${rebuildS.toFixed(1)} s`,
    );
    const redisRebuilt = await redis.usedMemory();
    await fleet.until((f) => f.reported >= 1, Math.max(probeDueMs - Date.now(), 0) + 120_000, 'the probe task');
    const [result] = await fleet.stop();
    const probeLagMs = result?.lagsMs?.[0] ?? Number.NaN;
    const rssEndMiB = node.rss.maxMiB;
    notes.push(`Redis after the rebuild: ${mib(redisRebuilt)} MiB (before the flush ${mib(redisAfter)} MiB)`);
    notes.push(
      `probe due ${PROBE_DELAY_MS / 1000} s after the flush started ${probeLagMs.toFixed(0)} ms after its due time`,
    );
    const verified = allRebuilt && probeLagMs <= PROBE_ON_TIME_MS && rssEndMiB <= 512;
    return {
      title: `${count.toLocaleString('en-US')} pending delayed tasks over 24 h, one node`,
      values: {
        pending: count,
        submitPerS: count / submitS,
        rssPeakMiB: Math.max(rssPeakMiB, rssEndMiB),
        redisBytesPerTask: (redisAfter - redisBefore) / count,
        redisMiB: (redisAfter - redisBefore) / 1024 / 1024,
        pgBytesPerTask: (tasks?.totalBytes ?? Number.NaN) / count,
        pgTasksMiB: (tasks?.totalBytes ?? Number.NaN) / 1024 / 1024,
        walBytesPerTask: walBytes / count,
        rebuildS,
        rebuildPerS: count / rebuildS,
        probeLagMs,
      },
      notes,
      verified,
      sizes,
    };
  } finally {
    await node.stop();
    await ctx.stores.pg.query(`DROP SCHEMA IF EXISTS "${names.schema}" CASCADE`).catch(() => undefined);
    ctx.untrack(names);
    await redis.stop();
  }
}
