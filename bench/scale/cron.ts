import { randomBytes } from 'node:crypto';
import { currentMiB, alive, runNames, startBenchNode } from '../node-process.js';
import { describeSizes, mib, tableSizes } from '../pg-sizes.js';
import { startRedisProcess } from '../redis-process.js';
import { percentiles } from '../stats.js';
import { submitTasks } from '../submit.js';
import { sleep, waitFor } from '../time.js';
import { WorkerFleet } from '../worker-process.js';
import type { ScaleContext, ScalePart } from './types.js';

/**
 * Scale part 2: a million cron schedules on one node — a tenth every minute, the rest hourly at
 * a minute of their own, in several zones (two with half-hour offsets) — and the minute
 * boundary after registration, where every per-minute schedule fires at once beside the
 * hourly ones due then. Measures the node's RSS throughout (bar 512 MiB) and how long after
 * the boundary the last per-minute instance started (W4 B's "minute boundary → all started").
 */
const ZONES = ['UTC', 'America/New_York', 'Europe/Berlin', 'Asia/Kolkata', 'Australia/Adelaide'];
const PER_MINUTE_SHARE = 10;
const CONCURRENCY = 1000;
const POLLERS = 4;
const HERD_LIMIT_MS = 180_000;
const SETTLE_LIMIT_MS = 60_000;
const PROGRESS_EVERY = 100_000;
/** After the boundary, when every per-minute schedule has written its next instance (wakes at 30–54 s). */
const WAKES_DONE_MS = 58_000;

const nextMinute = (ms: number): number => Math.floor(ms / 60_000) * 60_000 + 60_000;

export async function schedulesAtScale(ctx: ScaleContext, count: number): Promise<ScalePart> {
  const redis = await startRedisProcess();
  const names = runNames();
  ctx.track(names);
  const node = await startBenchNode(names, ['--redis-url', redis.url, ...ctx.nodeFlags]);
  const run = randomBytes(3).toString('hex');
  const minuteType = `scale.cron.minute.${run}`;
  const hourlyType = `scale.cron.hourly.${run}`;
  const perMinute = Math.round(count / PER_MINUTE_SHARE);
  const hourly = count - perMinute;
  const fleets = await Promise.all(
    [minuteType, hourlyType].map((taskType) =>
      WorkerFleet.start(1, { url: node.url, taskType, concurrency: CONCURRENCY, pollers: POLLERS }),
    ),
  );
  const notes: string[] = [];
  try {
    notes.push(`node RSS idle, before registering: ${currentMiB(node).toFixed(0)} MiB`);
    node.rss.reset();
    const started = Date.now();
    let nextLog = PROGRESS_EVERY;
    const progress = (done: number): void => {
      if (done < nextLog) return;
      nextLog += PROGRESS_EVERY;
      ctx.log(
        `scale cron: ${done} schedules registered in ${((Date.now() - started) / 1000).toFixed(0)} s, node RSS ${currentMiB(node).toFixed(0)} MiB`,
      );
    };
    // Hourly first: the per-minute ones, registered last, make the measured boundary's herd.
    const hourlyOut = await submitTasks(
      node.url,
      hourly,
      (i) => ({
        task_type: hourlyType,
        schedule: { type: 'cron', cron_expression: `${i % 60} * * * *`, timezone: ZONES[i % ZONES.length] },
      }),
      { onCreated: (from) => progress(from + 1000) },
    );
    const minuteOut = await submitTasks(
      node.url,
      perMinute,
      (i) => ({
        task_type: minuteType,
        schedule: { type: 'cron', cron_expression: '* * * * *', timezone: ZONES[i % ZONES.length] },
      }),
      { onCreated: (from) => progress(hourly + from + 1000) },
    );
    const registerS = (minuteOut.lastAnsweredMs - hourlyOut.firstSubmitMs) / 1000;
    const rssRegisteredMiB = currentMiB(node);
    const rssRegisterPeakMiB = node.rss.maxMiB;
    const boundaryMs = nextMinute(minuteOut.lastAnsweredMs);
    ctx.log(
      `scale cron: ${count} schedules registered in ${registerS.toFixed(0)} s, RSS ${rssRegisteredMiB.toFixed(0)} MiB (peak ${rssRegisterPeakMiB.toFixed(0)}); herd at ${new Date(boundaryMs).toISOString()}`,
    );
    const [minuteFleet] = fleets as [WorkerFleet, WorkerFleet];
    await sleep(Math.max(boundaryMs - Date.now() - 1_000, 0));
    const startedBefore = minuteFleet.started;
    const herdDone = async (): Promise<boolean> => !alive(node) || minuteFleet.started >= startedBefore + perMinute;
    const herdFinished = await waitFor(herdDone, boundaryMs + HERD_LIMIT_MS - Date.now(), 250);
    const settled = async (): Promise<boolean> =>
      !alive(node) ||
      ((await ctx.stores.cronStatusCounts(node.schema, minuteType, boundaryMs, boundaryMs)).succeeded ?? 0) >=
        perMinute;
    await waitFor(settled, SETTLE_LIMIT_MS, 500);
    await sleep(2_000);
    const rssAfterHerdMiB = currentMiB(node);
    // Then the wave of wakes: each schedule, read back into memory, writes its next instance
    // 30–60 s after the fire (cron-times.ts `handleAt`, spread 30 s). RSS is sampled through it.
    await sleep(Math.max(boundaryMs + WAKES_DONE_MS - Date.now(), 0));
    const rssAfterWakesMiB = currentMiB(node);
    const rssPeakMiB = node.rss.maxMiB;
    for (const fleet of fleets) await fleet.stop();

    const rows = await ctx.stores.cronInstances(node.schema, minuteType, boundaryMs, boundaryMs);
    const hourlyRows = await ctx.stores.cronInstances(node.schema, hourlyType, boundaryMs, boundaryMs);
    const lates = rows.flatMap((r) => (r.lateMs === null ? [] : [r.lateMs]));
    const hourlyLates = hourlyRows.flatMap((r) => (r.lateMs === null ? [] : [r.lateMs]));
    const pairs = new Set(rows.map((r) => r.scheduleId)).size;
    const [p50, p99, max] = percentiles(lates, [50, 99, 100]) as [number, number, number];
    const hourlyMax = hourlyLates.length > 0 ? Math.max(...hourlyLates) : Number.NaN;
    const redisMiB = (await redis.usedMemory()) / 1024 / 1024;
    const sizes = await tableSizes(ctx.stores.pg, names.schema, true);
    notes.push(
      `herd: ${rows.length} per-minute instances of ${perMinute} schedules (${lates.length} started) and ${hourlyRows.length} hourly ones (${hourlyLates.length} started) due at the boundary`,
      `per-minute start − fire time p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms, max ${max.toFixed(0)} ms; hourly ones at the boundary max ${hourlyMax.toFixed(0)} ms`,
      `node RSS after registration ${rssRegisteredMiB.toFixed(0)} MiB, after the herd ${rssAfterHerdMiB.toFixed(0)} MiB, after the wakes that wrote the next instances (58 s after the boundary) ${rssAfterWakesMiB.toFixed(0)} MiB; Redis ${redisMiB.toFixed(1)} MiB`,
      ...describeSizes(sizes, 3),
    );
    if (!herdFinished) notes.push(`the herd did not finish within ${HERD_LIMIT_MS / 1000} s`);
    const duplicates = rows.length - pairs + rows.reduce((n, r) => n + Math.max(0, r.attempts - 1), 0);
    const verified = herdFinished && lates.length === perMinute && duplicates === 0 && rssPeakMiB <= 512;
    ctx.log(
      `scale cron: herd max ${max.toFixed(0)} ms, RSS peak ${rssPeakMiB.toFixed(0)} MiB, Redis ${mib(redisMiB * 1024 * 1024)} MiB`,
    );
    return {
      title: `${count.toLocaleString('en-US')} cron schedules (${perMinute.toLocaleString('en-US')} per minute, the rest hourly; ${ZONES.length} zones), one node`,
      values: {
        schedules: count,
        registerPerS: count / registerS,
        rssPeakMiB,
        rssAfterHerdMiB,
        herdFires: rows.length + hourlyRows.length,
        herdS: lates.length === perMinute ? max / 1000 : Number.NaN,
        herdP99Ms: p99,
        duplicates,
        redisMiB,
      },
      notes,
      verified,
    };
  } catch (error) {
    for (const fleet of fleets) fleet.kill();
    throw error;
  } finally {
    await node.stop();
    await ctx.stores.pg.query(`DROP SCHEMA IF EXISTS "${names.schema}" CASCADE`).catch(() => undefined);
    ctx.untrack(names);
    await redis.stop();
  }
}
