import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniqueType } from '../support/tasks.js';
import { pickVictim, startCluster, type ProcessCluster } from '../support/cluster.js';
import { sleep } from '../support/waits.js';
import { TestWorker } from '../support/cluster-worker.js';

/**
 * Cron schedules on a node frozen (SIGSTOP) past the failure timeout: the others take them
 * over, the node comes back, is declared out, drops its actors and takes back what the ring
 * gives it. Every schedule must go on firing. A schedule every 5 s sleeps on the wheel between
 * fires (the wake path); one every second stays awake with a timer. The nemesis saw a
 * 5-second schedule silent for 245 s after its node was stopped for 9 s (docs/benchmarks.md,
 * "The nemesis", item 6).
 */

const PAUSE_MS = 10_000;
const SCHEDULES = 12;

describe('cron schedules on a node paused past its failure timeout', () => {
  let cluster: ProcessCluster;

  beforeAll(async () => {
    cluster = await startCluster({ nodes: 3, partitions: 16, label: 'pausecron' });
  });
  afterAll(async () => {
    await cluster?.close();
  });

  it('all fire again within a few intervals of the node rejoining', async () => {
    const type = uniqueType('pausecron');
    for (let s = 0; s < SCHEDULES; s++) {
      const r = await cluster.api(cluster.ids()[s % 3]!, 'POST', '/api/tasks', {
        task_type: type,
        payload: { s },
        schedule: { type: 'cron', cron_expression: s % 4 === 0 ? '* * * * * *' : '*/5 * * * * *' },
      });
      expect(r.status).toBe(201);
    }
    const worker = new TestWorker(cluster, { types: [type], targets: cluster.ids() }).start();
    try {
      await sleep(6_000); // real time is the subject: the schedules fire before the pause
      const victim = pickVictim(await cluster.status('n1'));
      const survivors = cluster.ids().filter((id) => id !== victim);
      cluster.stop(victim);
      worker.setTargets(survivors);
      await sleep(PAUSE_MS);
      cluster.cont(victim);
      worker.setTargets(cluster.ids());
      await cluster.waitForRing(cluster.ids(), 30_000);
      const settledMs = Date.now();
      await sleep(25_000); // real time: five intervals of the slowest schedule
      const starts = new Map<number, number[]>();
      for (const a of worker.assignments) {
        const s = (a.payload as { s: number }).s;
        starts.set(s, [...(starts.get(s) ?? []), a.atMs]);
      }
      const silent: string[] = [];
      for (let s = 0; s < SCHEDULES; s++) {
        const after = (starts.get(s) ?? []).filter((t) => t >= settledMs).sort((a, b) => a - b);
        const every = s % 4 === 0 ? 1_000 : 5_000;
        // From the ring settling, a fire at least every two intervals (and one in the last two).
        const marks = [settledMs, ...after, Date.now()];
        const longest = Math.max(...marks.slice(1).map((t, i) => t - marks[i]!));
        if (longest > 2 * every + 1_000) silent.push(`schedule ${s} (every ${every} ms): silent ${longest} ms`);
      }
      expect(silent, cluster.tails()).toEqual([]);
    } finally {
      await worker.stop();
    }
  }, 120_000);
});
