import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/worker/index.js';
import { RingPlacement } from '../../src/runtime/ring.js';
import { startCluster, type ProcessCluster } from '../support/cluster.js';
import { submitBatch } from '../support/cluster-worker.js';
import { Poller, RunningCount, dropLeasesHttp, dropSocket, sdkWorker } from '../support/limit-workers.js';
import { TEST_POSTGRES_URL } from '../support/nodes.js';
import { maxInWindow } from '../../bench/stats.js';
import { uniqueType } from '../support/tasks.js';
import { eventually, sleep } from '../support/waits.js';

/**
 * Flow control across three node processes on Postgres + Redis (issue 28, "What it must show"
 * item 1; docs/decisions/0023-flow-control.md): a key's tasks never run more at once than its
 * concurrency — counted by the workers, all in this process, on both paths (SDK channel, SDK
 * and raw HTTP long-poll) and connected to different nodes — while the node that holds the
 * keys' actors is paused past the failure timeout (its actors activate elsewhere at epoch + 1
 * while the old activation is still in memory, and wakes up) or killed, and while workers drop
 * their leases. Every task still succeeds. And a rate is kept across the nodes, and used.
 */

/** How long a run may take before the test gives up (the bound "the run completes within"). */
const RUN_BOUND_MS = 60_000;
/** How long the rate is measured, from the first start, ms. */
const RATE_RUN_MS = 8_000;

/**
 * Both worker paths ran tasks: the channel and the HTTP long-poll (the SDK's or the raw pollers').
 * Not each of the three clients: with limits of 1 and 5 the few claimable tasks go to whoever
 * polls first, and in one run of 165 tasks the SDK's HTTP worker got none (the raw pollers, on
 * the same path, got 79).
 */
function expectBothPaths(count: RunningCount): void {
  const paths = [...count.byPath.keys()];
  expect(paths).toContain('channel');
  expect(paths.some((p) => p.startsWith('http-'))).toBe(true);
}

describe('flow control across a cluster of three node processes', () => {
  let cluster: ProcessCluster;
  let db: pg.Pool;
  const workers: Worker[] = [];
  const pollers: Poller[] = [];

  beforeAll(async () => {
    cluster = await startCluster({
      nodes: 3,
      partitions: 8,
      label: 'limits',
      // A lease that runs out is due again at once: the dropped leases come back on time.
      extraArgs: ['--retry-base-seconds', '0'],
    });
    db = new pg.Pool({ connectionString: TEST_POSTGRES_URL, max: 2 });
  }, 60_000);
  afterEach(async () => {
    await Promise.all(pollers.splice(0).map((p) => p.stop()));
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 100 })));
  });
  afterAll(async () => {
    await db?.end();
    await cluster?.close();
  });

  /** A limit name starting with `base` whose actor the ring puts on `node`. */
  const keyOn = async (node: string, base: string): Promise<string> => {
    const status = await cluster.status('n1');
    const ring = new RingPlacement(status.ring.nodes, { vnodesPerNode: status.ring.vnodes_per_node });
    for (let i = 0; ; i++) if (ring.ownerOf('limit', `${base}-${i}`) === node) return `${base}-${i}`;
  };
  const declare = async (name: string, body: Record<string, unknown>): Promise<void> => {
    const r = await cluster.api('n1', 'PUT', `/api/limits/${name}`, body);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
  };
  /** Tasks of `type` taking part in `keys` (stored sorted; the payload tells the worker which). */
  const tasksOf = (type: string, n: number, keys: string[], timeoutSeconds: number): Record<string, unknown>[] =>
    Array.from({ length: n }, () => ({
      task_type: type,
      limits: keys,
      payload: { keys },
      timeout_seconds: timeoutSeconds,
    }));
  const epochs = async (keys: string[]): Promise<Map<string, number>> => {
    const { rows } = await db.query<{ key: string; epoch: string }>(
      `SELECT key, epoch FROM ${cluster.schema}.actor_snapshots WHERE kind = 'limit' AND key = ANY($1::text[])`,
      [keys],
    );
    return new Map(rows.map((r) => [r.key, Number(r.epoch)]));
  };
  /** Waits until every task succeeded; answers how many attempts they took in all. */
  const allSucceeded = async (ids: string[], what: string): Promise<number> =>
    eventually(
      async () => {
        const { rows } = await db.query<{ n: number; attempts: number }>(
          `SELECT count(*)::int AS n, coalesce(sum(attempts), 0)::int AS attempts FROM ${cluster.schema}.tasks
           WHERE id = ANY($1::uuid[]) AND status = 'succeeded'`,
          [ids],
        );
        return rows[0]!.n === ids.length ? rows[0]!.attempts : undefined;
      },
      RUN_BOUND_MS,
      what,
      200,
    ).catch(async (error: unknown) => {
      const { rows } = await db.query<{ status: string; n: number }>(
        `SELECT status, count(*)::int AS n FROM ${cluster.schema}.tasks WHERE id = ANY($1::uuid[]) GROUP BY status`,
        [ids],
      );
      // Why each task still waits, as the node explains it and as its row says.
      const { rows: left } = await db.query<{ id: string }>(
        `SELECT id, status, attempts, limits, due_time, updated_at FROM ${cluster.schema}.tasks
         WHERE id = ANY($1::uuid[]) AND status <> 'succeeded' LIMIT 5`,
        [ids],
      );
      const why = await Promise.all(
        left.map(async (row) => ({
          row,
          explain: (await cluster.api(cluster.ids()[0]!, 'GET', `/api/tasks/${row.id}/explain`)).body,
        })),
      );
      throw new Error(
        `${String(error)}: ${JSON.stringify(rows)}\n${JSON.stringify(why, null, 1)}\n${cluster.tails(2_000)}`,
      );
    });
  /** Workers on every path, spread over the nodes; `home` is where the keys' actors are. */
  const startWorkers = (count: RunningCount, types: string[], home: string, others: string[]): void => {
    const url = (id: string): string => cluster.node(id).url;
    workers.push(
      // A channel worker on the keys' node that moves to the others when it goes.
      sdkWorker(count, { urls: [url(home), ...others.map(url)], transport: 'channel', types }),
      sdkWorker(count, { urls: [url(others[0]!)], transport: 'channel', types }),
      sdkWorker(count, { urls: [url(others[1]!)], transport: 'http', types }),
    );
    pollers.push(
      // Polls waiting in the keys' node's sockets through a pause, answered when it wakes up.
      new Poller(cluster, count, { types, targets: [home], sticky: true, loops: 3, waitMs: 1_000 }).start(),
      new Poller(cluster, count, { types, targets: others, loops: 2 }).start(),
    );
  };
  const report = (label: string, count: RunningCount, keys: Record<string, string>): string =>
    `[limits-cluster] ${label}: max running ${Object.entries(keys)
      .map(([name, key]) => `${name} ${count.max.get(key) ?? 0}`)
      .join(', ')}; handler runs by path ${JSON.stringify(Object.fromEntries(count.byPath))}`;

  /** The figures of the rate run, for the two tests that read them. */
  let rateRun: { maxInWindow: number; used: number; limit: number; burst: number } | null = null;

  it('keeps a rate of 100 starts a second across the nodes', async () => {
    const type = uniqueType('limrate');
    const key = `${type}-rate`;
    const rate = { limit: 100, period_seconds: 1, burst: 0 };
    await declare(key, { rate });
    await submitBatch(cluster, 'n1', tasksOf(type, 2_000, [key], 60));
    const count = new RunningCount();
    const work = (): Promise<void> => sleep(5); // real time is the subject: a short task
    const url = (id: string): string => cluster.node(id).url;
    workers.push(
      sdkWorker(count, { urls: [url('n1')], transport: 'channel', types: [type], work }),
      sdkWorker(count, { urls: [url('n2')], transport: 'http', types: [type], work }),
    );
    pollers.push(new Poller(cluster, count, { types: [type], targets: ['n3'], loops: 2, work }).start());
    // A stretch of RATE_RUN_MS from the first start, with far more waiting than it allows.
    const first = await eventually(() => count.starts[0]?.atMs, 10_000, 'a first start');
    await sleep(Math.max(0, first + RATE_RUN_MS + 1_000 - Date.now())); // real time is the subject: a rate over time
    await Promise.all(pollers.splice(0).map((p) => p.stop()));
    await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 100 })));
    // The starts the nodes recorded (the claim's time) within the stretch, and those the workers saw.
    const { rows } = await db.query<{ ms: number }>(
      `SELECT (extract(epoch FROM started_at) * 1000)::float8 AS ms FROM ${cluster.schema}.tasks
       WHERE task_type = $1 AND started_at IS NOT NULL`,
      [type],
    );
    const nodeStarts = rows.map((r) => r.ms).sort((a, b) => a - b);
    const from = nodeStarts[0] as number;
    const inRun = nodeStarts.filter((ms) => ms < from + RATE_RUN_MS);
    const workerStarts = count.starts.map((s) => s.atMs).sort((a, b) => a - b);
    // GCRA: one start every period / limit, and `burst` + 1 at once at the beginning.
    const allowed = Math.floor(RATE_RUN_MS / ((rate.period_seconds * 1000) / rate.limit)) + rate.burst;
    const used = inRun.length / allowed;
    rateRun = { maxInWindow: maxInWindow(nodeStarts, 1_000), used, limit: rate.limit, burst: rate.burst };
    console.log(
      `[limits-cluster] rate ${rate.limit}/${rate.period_seconds}s burst ${rate.burst}, 2000 waiting: ${inRun.length} starts in the first ${RATE_RUN_MS} ms ` +
        `(${nodeStarts.length} in all); most in any 1 s window: ${rateRun.maxInWindow} (node-side start times), ${maxInWindow(workerStarts, 1_000)} (worker-side); ` +
        `allowed ${allowed}, used ${(used * 100).toFixed(1)} %; handler runs by path ${JSON.stringify(Object.fromEntries(count.byPath))}`,
    );
    expect(inRun.length).toBeGreaterThan(0);
    // The key grants at most limit + burst in any window of its own clock (the unit test of
    // RateWindow), and every claim, on whichever node, records the grant's instant as the start:
    // the node-side start times keep the bound (+ 1 for the window's edge read back through a
    // float). The workers' clocks see the hop from the grant to the socket as well; not bounded.
    expect(rateRun.maxInWindow).toBeLessThanOrEqual(rate.limit + rate.burst + 1);
  });

  it('uses at least 95 % of the starts the rate allows', () => {
    expect(rateRun).not.toBeNull();
    expect(rateRun!.used).toBeGreaterThanOrEqual(0.95);
  });

  it('never runs more of a key at once than its concurrency while the keys’ node is paused past the failure timeout', async () => {
    const victim = 'n3';
    const others = ['n1', 'n2'];
    const type = uniqueType('limpause');
    const one = await keyOn(victim, `${type}-one`);
    const five = await keyOn(victim, `${type}-five`);
    await declare(one, { concurrency: 1 });
    await declare(five, { concurrency: 5 });
    // Leases longer than the pause: what the paused node's workers finished is recorded when it
    // wakes up, and its permits go back to the old activation, which then has room again.
    const submitted = await submitBatch(cluster, 'n1', [
      ...tasksOf(type, 30, [one], 20),
      ...tasksOf(type, 120, [five], 20),
      ...tasksOf(type, 15, [five, one], 20),
    ]);
    const ids = submitted.map((t) => t.taskId);
    const count = new RunningCount();
    startWorkers(count, [type], victim, others);

    await eventually(() => (count.finished.size >= 30 ? true : undefined), 30_000, 'a start');
    const before = await epochs([one, five]);
    cluster.stop(victim);
    const stoppedAtMs = Date.now();
    await cluster.waitForRing(others, 15_000);
    // Its actors activate on the survivors (the grants ask them), at epoch + 1.
    await eventually(
      async () => {
        const now = await epochs([one, five]);
        return [one, five].every((k) => (now.get(k) ?? 0) > (before.get(k) ?? 0)) ? now : undefined;
      },
      15_000,
      'the keys’ actors to activate on a survivor',
    );
    await sleep(Math.max(0, stoppedAtMs + cluster.failureTimeoutMs + 2_500 - Date.now())); // real time is the subject: the SIGSTOP lasts past the failure timeout
    const finishedAtCont = count.finished.size;
    cluster.cont(victim);
    console.log(
      `[limits-cluster] paused ${victim} (the actors of ${one}, ${five}) for ${Date.now() - stoppedAtMs} ms; ` +
        `${finishedAtCont - 30} tasks finished meanwhile; epochs ${JSON.stringify(Object.fromEntries(before))} → ${JSON.stringify(Object.fromEntries(await epochs([one, five])))}`,
    );
    const attempts = await allSucceeded(ids, 'every task to succeed');
    console.log(`${report('pause', count, { one, five })}; ${ids.length} tasks, ${attempts} attempts`);
    expect(count.max.get(one)).toBe(1);
    expect(count.max.get(five)).toBeLessThanOrEqual(5);
    expect(count.max.get(five)).toBeGreaterThan(1);
    expectBothPaths(count);
    await cluster.waitForRing(cluster.ids(), 30_000);
  });

  it('never runs more of a key at once than its concurrency while the keys’ node is killed and workers drop leases', async () => {
    const victim = 'n2';
    const others = ['n1', 'n3'];
    const type = uniqueType('limkill');
    const one = await keyOn(victim, `${type}-one`);
    const five = await keyOn(victim, `${type}-five`);
    await declare(one, { concurrency: 1 });
    await declare(five, { concurrency: 5 });
    // Leases of 3 s: the dropped ones come back within the run. The key of 1 runs its 120 one
    // at a time (20–100 ms each): work is left at the kill, after the leases dropped before it
    // (with 40, one run in three had finished everything before the kill).
    const submitted = await submitBatch(cluster, 'n1', [
      ...tasksOf(type, 120, [one], 3),
      ...tasksOf(type, 150, [five], 3),
      ...tasksOf(type, 20, [five, one], 3),
    ]);
    const ids = submitted.map((t) => t.taskId);
    const count = new RunningCount();
    startWorkers(count, [type], victim, others);

    const dropped: string[] = [];
    dropped.push(...(await dropLeasesHttp(cluster, 'n3', [type], 3)));
    dropped.push(...(await dropSocket(cluster.node('n1').url, [type], 3)));
    await eventually(() => (count.finished.size >= 50 ? true : undefined), 30_000, 'some progress');
    const before = await epochs([one, five]);
    await cluster.kill9(victim);
    const killedAtMs = Date.now();
    const leftAtKill = ids.length - count.finished.size;
    // Timed from the kill on its own: the wait for the keys below must not count (a run whose
    // tasks had all finished before the kill waited its 45 s and printed "55 s").
    const done = allSucceeded(ids, 'every task to succeed').then((attempts) => ({
      attempts,
      afterMs: Date.now() - killedAtMs,
    }));
    dropped.push(...(await dropLeasesHttp(cluster, 'n1', [type], 3)));
    await cluster.waitForRing(others, 15_000);
    // The keys' actors are woken on a survivor when the ring drops the victim, if they held
    // anything there; keys with nothing left (every task done before the kill) gave their rows
    // up and have nothing to wake for. Printed, not failed: what this case asserts is below —
    // never over the limit, every task done.
    const woken = eventually(
      async () => {
        const now = await epochs([one, five]);
        return [one, five].every((k) => (now.get(k) ?? 0) > (before.get(k) ?? 0)) ? now : undefined;
      },
      45_000,
      'the keys’ actors to activate on a survivor',
    ).catch(async () => {
      console.log('[limits-cluster] the keys’ actors had not activated on a survivor 45 s after the kill');
      return epochs([one, five]);
    });
    // Or every task is done first (nothing left for the keys to wake for): the epochs then.
    const settled = done.then(
      () => epochs([one, five]),
      () => epochs([one, five]), // its error is thrown below
    );
    const after = await Promise.race([woken, settled]);
    const { attempts, afterMs } = await done;
    console.log(
      `[limits-cluster] killed ${victim} (the actors of ${one}, ${five}) with ${leftAtKill} of ${ids.length} tasks not yet run; epochs ` +
        `${JSON.stringify(Object.fromEntries(before))} → ${JSON.stringify(Object.fromEntries(after))}; ${dropped.length} leases dropped; ` +
        `every task succeeded ${afterMs} ms after the kill`,
    );
    console.log(`${report('kill', count, { one, five })}; ${ids.length} tasks, ${attempts} attempts`);
    expect(leftAtKill).toBeGreaterThan(0);
    expect(dropped.length).toBeGreaterThan(0);
    expect(count.max.get(one)).toBe(1);
    expect(count.max.get(five)).toBeLessThanOrEqual(5);
    expect(count.max.get(five)).toBeGreaterThan(1);
    expectBothPaths(count);
  });
});
