import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniqueType } from '../support/tasks.js';
import { startCluster, type ProcessCluster } from '../support/cluster.js';
import { eventually } from '../support/waits.js';
import { TestWorker, duplicates, lagStats, missing, submitBatch } from '../support/cluster-worker.js';

/**
 * Two nodes, one of whose clocks runs 3 s ahead (`--test-clock-offset-seconds 3`). A node reads
 * time as the database does (AlignedClock), so the fast one, n2, neither hands out tasks 3 s
 * early nor writes lease expiries 3 s late. Both halves work through n2, the node whose clock
 * is wrong: through n1 alone nothing depends on n2's clock (a take and a claim filter on the
 * claiming node's now, and a lease is held by the node that claimed it). Measured on this
 * machine's one clock, which the database shares.
 */
const OFFSET_SECONDS = 3;

describe('a node whose clock runs 3 s ahead', () => {
  let cluster: ProcessCluster;

  beforeAll(async () => {
    cluster = await startCluster({
      nodes: 2,
      partitions: 16,
      label: 'skew',
      extraArgs: ['--retry-base-seconds', '0'],
      nodeArgs: { n2: ['--test-clock-offset-seconds', String(OFFSET_SECONDS)] },
    });
  });
  afterAll(async () => {
    await cluster?.close();
  });

  it("fires its partitions' tasks on time, and hands out none early through it", async () => {
    const status = await cluster.status('n1');
    const onFast = status.partitions.filter((p) => p.owner === 'n2').length;
    expect(onFast).toBeGreaterThan(0);
    const type = uniqueType('skew-fire');
    const base = Date.now() + 3_000;
    const tasks = Array.from({ length: 160 }, (_, i) => ({
      task_type: type,
      schedule: { type: 'delayed', due_time: new Date(base + i * 10).toISOString() },
    }));
    const submitted = await submitBatch(cluster, 'n1', tasks);
    // Claimed through the fast node: its wheels' pushes, its take and its claim all go by its
    // clock, so a clock not aligned on the database's starts tasks 3 s early here.
    const worker = new TestWorker(cluster, { types: [type], targets: ['n2'] }).start();
    try {
      await worker.waitFor(
        submitted.map((t) => t.taskId),
        20_000,
        'every task',
      );
    } finally {
      await worker.stop();
    }
    const counts = worker.counts();
    expect(
      missing(
        counts,
        submitted.map((t) => t.taskId),
      ),
    ).toEqual([]);
    expect(duplicates(counts)).toEqual([]);
    const starts = worker.firstStarts();
    const early = submitted.filter((t) => starts.get(t.taskId)!.atMs < t.dueMs - 50);
    const lag = lagStats(worker, submitted);
    console.log(
      `[skew] ${onFast} of 16 partitions on the fast node; start − due p50 ${lag.p50} ms, max ${lag.max} ms; ${early.length} early`,
    );
    expect(early).toEqual([]);
    expect(lag.max).toBeLessThanOrEqual(1_000);
  });

  it('holds its leases to the expiry it tells the worker, and hands each on when it runs out', async () => {
    const type = uniqueType('skew-lease');
    const leaseMs = 4_000;
    const submitted = await submitBatch(
      cluster,
      'n1',
      Array.from({ length: 40 }, () => ({ task_type: type, timeout_seconds: leaseMs / 1000 })),
    );
    const ids = submitted.map((t) => t.taskId);
    // Claimed through n2 by a worker that never reports: n2 holds the leases (a lease lives on
    // the node that claimed it) and writes their expiries; a second worker takes what comes back.
    const vanishing = new TestWorker(cluster, {
      types: [type],
      targets: ['n2'],
      hold: () => true,
      workerId: 'w-holds',
    }).start();
    try {
      await vanishing.waitFor(ids, 15_000, 'first claims');
    } finally {
      await vanishing.stop();
    }
    const claims = vanishing.firstStarts();
    const held = await cluster.api<{ actors: { key: string }[] }>(
      'n1',
      'GET',
      `/admin/actors?kind=lease&node=n2&limit=1000`,
    );
    expect(held.status).toBe(200);
    const onFast = ids.filter((id) => held.body.actors.some((a) => a.key === id));
    expect(onFast.length).toBeGreaterThan(5);
    // The expiry told with the task is the claim plus the lease, on the database's clock: a
    // worker that heartbeats by it is in time (3 s late, it would lose every lease).
    const told = onFast.map((id) => claims.get(id)!.leaseExpiresMs - claims.get(id)!.atMs).sort((a, b) => a - b);
    const second = new TestWorker(cluster, { types: [type], targets: ['n1', 'n2'], workerId: 'w-next' }).start();
    try {
      await eventually(
        () => (ids.every((id) => second.counts().has(id)) ? true : undefined),
        leaseMs + 10_000,
        'every task handed out again',
      );
    } finally {
      await second.stop();
    }
    const again = second.firstStarts();
    const lags = onFast.map((id) => again.get(id)!.atMs - claims.get(id)!.atMs).sort((a, b) => a - b);
    console.log(
      `[skew] ${onFast.length} leases held by the fast node: expiry told ${told[0]}…${told.at(-1)} ms after the answer, handed on ${lags[0]}…${lags.at(-1)} ms after their claim (lease ${leaseMs} ms)`,
    );
    expect(told.at(-1)).toBeLessThanOrEqual(leaseMs + 250);
    expect(told[0]).toBeGreaterThanOrEqual(leaseMs - 2_000);
    expect(lags[0]).toBeGreaterThanOrEqual(leaseMs - 250);
    expect(lags.at(-1)).toBeLessThanOrEqual(leaseMs + 2_000);
    expect(onFast.map((id) => again.get(id)!.attempt)).toEqual(onFast.map(() => 2));
  });
});
