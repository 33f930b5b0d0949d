import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniqueType } from '../support/tasks.js';
import { TOLERANCE_MS, fencedActors, pickVictim, startCluster, type ProcessCluster } from '../support/cluster.js';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.js';
import { TEST_POSTGRES_URL } from '../support/nodes.js';
import { sleep } from '../support/waits.js';
import { TestWorker, expectEachRanOnce, lagStats, submitBatch } from '../support/cluster-worker.js';

/**
 * A node whose partitions the others took over while it still held them — frozen with
 * SIGSTOP for longer than the failure timeout, or cut off from Postgres (its membership)
 * while it still reaches Redis — writes nothing once it acts again: fencing stops what its
 * stale wheels would fire or write until it has rejoined and the ring hands it partitions
 * back. No task runs twice, and the fence is seen to act: the node counts and logs the
 * refused writes of its stale wheels, and which write each was.
 */

const PAUSE_MS = 10_000;
/** The node started with its Postgres behind a proxy, so that it can be cut off from it alone. */
const CUT = 'n3';

describe('a cluster node whose partitions moved on while it held them', () => {
  let cluster: ProcessCluster;
  let proxy: FaultProxy;

  beforeAll(async () => {
    const pg = new URL(TEST_POSTGRES_URL);
    proxy = await startFaultProxy({ target: { host: pg.hostname, port: Number(pg.port || 5432) } });
    cluster = await startCluster({
      nodes: 3,
      partitions: 16,
      label: 'pause',
      nodeArgs: { [CUT]: ['--postgres-url', proxy.url(TEST_POSTGRES_URL)] },
    });
  });
  afterAll(async () => {
    await cluster?.close();
    await proxy?.close();
  });

  it('runs every task once across a 10 s pause, and the resumed node’s stale activations are fenced', async () => {
    const before = await cluster.status('n1');
    const victim = pickVictim(before);
    const survivors = cluster.ids().filter((id) => id !== victim);
    const itsPartitions = before.partitions.filter((p) => p.owner === victim).map((p) => p.partition);
    const staleBefore = await cluster.metric(victim, 'wheelhouse_stale_epoch_total');

    // Due from 1 s to 14 s from now: during the pause, and after it while the node rejoins.
    const type = uniqueType('pause');
    const base = Date.now() + 1000;
    const tasks = Array.from({ length: 150 }, (_, i) => ({
      task_type: type,
      payload: { i },
      schedule: { type: 'delayed', due_time: new Date(base + Math.round((i * 13_000) / 149)).toISOString() },
    }));
    const submitted = await submitBatch(cluster, 'n1', tasks);
    const worker = new TestWorker(cluster, { types: [type], targets: survivors }).start();
    let stoppedAtMs = 0;
    let contAtMs = 0;
    try {
      cluster.stop(victim);
      stoppedAtMs = Date.now();
      const takeover = await cluster.waitForRing(survivors, PAUSE_MS - 1000);
      console.log(
        `[pause] ${victim} (${itsPartitions.length} partitions) stopped; survivors hold its partitions ${takeover.atMs - stoppedAtMs} ms later`,
      );
      const during = takeover.statuses[0]!;
      for (const p of itsPartitions) {
        const was = before.partitions.find((x) => x.partition === p)!;
        const now = during.partitions.find((x) => x.partition === p)!;
        expect(now.epoch!).toBeGreaterThan(was.epoch!);
      }
      await sleep(Math.max(0, stoppedAtMs + PAUSE_MS - Date.now())); // real time is the subject: the SIGSTOP lasts PAUSE_MS

      cluster.cont(victim);
      contAtMs = Date.now();
      worker.setTargets(cluster.ids());
      const ring = await cluster.waitForRing(cluster.ids(), 30_000);
      console.log(
        `[pause] ${victim} resumed after ${contAtMs - stoppedAtMs} ms; ring of 3 settled with every partition held by its owner ${ring.atMs - contAtMs} ms later`,
      );

      await worker.waitFor(
        submitted.map((t) => t.taskId),
        30_000,
      );
      await sleep(1000); // real time is the subject: the resumed process's stale fires would come within this window
    } finally {
      await worker.stop();
    }
    expectEachRanOnce(worker, submitted);

    // The fence itself. Each of its wheels that held a task falling due while it was stopped
    // woke up under an epoch the new owner has since passed: its first write was refused
    // (stale_epoch), counted, logged, and stopped it. After a pause that long its verify (a
    // take from its buckets, due every second) is always among the first timers to fire, so
    // the write refused here is the bucket store's take or a snapshot — the Postgres and
    // bucket fences. The ready-queue push's fence is the next test's. Being declared out does
    // not stand in for this: with the wheels unfenced it is declared out all the same.
    const stale = (await cluster.metric(victim, 'wheelhouse_stale_epoch_total')) - staleBefore;
    const log = cluster.node(victim).proc.output();
    const declaredOut = /declared out of the cluster/.test(log);
    const fencedWheels = [
      ...new Set(
        fencedActors(log)
          .filter((a) => a.kind === 'wheel')
          .map((a) => Number(a.key)),
      ),
    ].sort((a, b) => a - b);
    const firingWhileStopped = [
      ...new Set(
        submitted
          .filter((t) => itsPartitions.includes(t.partition) && t.dueMs > stoppedAtMs && t.dueMs < contAtMs)
          .map((t) => t.partition),
      ),
    ];
    const handedOff = await cluster.metric(victim, 'wheelhouse_actors_handed_off_total');
    console.log(
      `[pause] ${victim} after SIGCONT: wheelhouse_stale_epoch_total +${stale}; fenced wheel partitions [${fencedWheels.join(', ')}], ` +
        `with tasks due while stopped [${firingWhileStopped.sort((a, b) => a - b).join(', ')}], its [${itsPartitions.join(', ')}]; log "declared out": ${declaredOut}; handed off ${handedOff}`,
    );
    expect(firingWhileStopped.length).toBeGreaterThan(0);
    expect(
      firingWhileStopped.filter((p) => !fencedWheels.includes(p)),
      cluster.tails(),
    ).toEqual([]);
    expect(fencedWheels.filter((p) => !itsPartitions.includes(p))).toEqual([]);
    expect(stale).toBeGreaterThanOrEqual(fencedWheels.length);

    const onVictim = submitted.filter((t) => itsPartitions.includes(t.partition));
    const duePaused = onVictim.filter((t) => t.dueMs < contAtMs);
    const dueAfter = onVictim.filter((t) => t.dueMs >= contAtMs);
    const lagPaused = lagStats(worker, duePaused);
    const lagAfter = lagStats(worker, dueAfter);
    const all = lagStats(worker, submitted);
    console.log(
      `[pause] start − due on ${victim}'s partitions: due during the pause (${duePaused.length}) max ${lagPaused.max} ms ` +
        `(failure timeout ${cluster.failureTimeoutMs} + 1000 + tolerance ${TOLERANCE_MS}); due after SIGCONT (${dueAfter.length}) max ${lagAfter.max} ms; all ${submitted.length}: max ${all.max} ms`,
    );
    expect(lagPaused.max).toBeLessThanOrEqual(cluster.failureTimeoutMs + 1000 + TOLERANCE_MS);
    // What fell due well before SIGCONT was run by the new owners, not by the resumed node.
    const starts = worker.firstStarts();
    const lateForCont = duePaused.filter(
      (t) => t.dueMs < contAtMs - TOLERANCE_MS && starts.get(t.taskId)!.atMs >= contAtMs,
    );
    expect(lateForCont.map((t) => t.taskId)).toEqual([]);
  });

  it('refuses the ready-queue pushes of a node cut off from Postgres, once its partitions have moved on', async () => {
    const survivors = cluster.ids().filter((id) => id !== CUT);

    /**
     * One cut: tasks due every 5 ms for 8 s, then CUT's Postgres goes silent for PAUSE_MS.
     * With no heartbeat the others declare it out and take its partitions over, raising their
     * fences in Redis; it still reaches Redis, and its wheels go on ticking with their old
     * epochs, a push every ~80 ms each. Every task still runs once. Answers CUT's wheels
     * whose first refused write was a push.
     */
    const cutOnce = async (round: number): Promise<number[]> => {
      const before = await cluster.status('n1');
      const itsPartitions = before.partitions.filter((p) => p.owner === CUT).map((p) => p.partition);
      expect(itsPartitions.length).toBeGreaterThan(0);
      const type = uniqueType('cut');
      const base = Date.now() + 500;
      const tasks = Array.from({ length: 1600 }, (_, i) => ({
        task_type: type,
        schedule: { type: 'delayed', due_time: new Date(base + i * 5).toISOString() },
      }));
      const submitted = await submitBatch(cluster, 'n1', tasks);
      const worker = new TestWorker(cluster, { types: [type], targets: survivors }).start();
      const cutAtMs = Date.now();
      try {
        const cut = proxy.blackhole(PAUSE_MS, { release: 'drop' });
        const takeover = await cluster.waitForRing(survivors, PAUSE_MS - 1000);
        console.log(
          `[pause] cut ${round}: ${CUT} (${itsPartitions.length} partitions) cut off from Postgres; survivors hold its partitions ${takeover.atMs - cutAtMs} ms later`,
        );
        await cut;
        worker.setTargets(cluster.ids());
        await cluster.waitForRing(cluster.ids(), 30_000);
        await worker.waitFor(
          submitted.map((t) => t.taskId),
          30_000,
        );
      } finally {
        await worker.stop();
      }
      expectEachRanOnce(worker, submitted);

      const fenced = fencedActors(cluster.node(CUT).proc.output()).filter(
        (a) => a.kind === 'wheel' && a.atMs >= cutAtMs && /\(([a-zA-Z.]+)\)\.$/.test(a.reason),
      );
      const refusedBy = (a: { reason: string }): string => /\(([a-zA-Z.]+)\)\.$/.exec(a.reason)![1]!;
      console.log(
        `[pause] cut ${round}: ${CUT}'s wheels fenced by ${fenced.map((a) => `${a.key} (${refusedBy(a)})`).join(', ')}; its partitions [${itsPartitions.join(', ')}]`,
      );
      expect(fenced.filter((a) => !itsPartitions.includes(Number(a.key)))).toEqual([]);
      return fenced.filter((a) => refusedBy(a) === 'ready.push').map((a) => Number(a.key));
    };

    // Which write of a wheel meets the fence first is a race its verify (a take from its
    // buckets, once a second) sometimes wins, in every wheel at once when the process stalls;
    // a push is refused in nearly every cut, and a cut is tried again at most twice. With the
    // push script's fence off, no cut ever shows one.
    let pushRefused: number[] = [];
    for (let round = 1; round <= 3 && pushRefused.length === 0; round++) pushRefused = await cutOnce(round);
    expect(pushRefused.length, cluster.tails()).toBeGreaterThan(0);
  });
});
