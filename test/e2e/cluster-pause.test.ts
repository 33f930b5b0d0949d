import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniqueType } from '../support/tasks.js';
import { TOLERANCE_MS, pickVictim, startCluster, type ProcessCluster } from '../support/cluster.js';
import { sleep } from '../support/waits.js';
import { TestWorker, duplicates, lagStats, missing, submitBatch } from '../support/cluster-worker.js';

/**
 * A node frozen with SIGSTOP for longer than the failure timeout, then resumed: the others
 * take its partitions over meanwhile, and when it wakes, with its timers all late and its
 * wheels still full, fencing stops what it would fire or write (its activations are stale)
 * until it has rejoined and the ring hands it partitions back. No task runs twice, and the
 * fence is seen to act: the resumed node counts and logs refused writes of its stale wheels.
 */

const PAUSE_MS = 10_000;

/** The actors a node's log says were fenced (its warn line for a refused stale write). */
function fencedActors(log: string): { kind: string; key: string }[] {
  const actors: { kind: string; key: string }[] = [];
  for (const line of log.split('\n')) {
    // The tail of the output may start mid-line: only whole JSON lines count.
    if (!line.startsWith('{') || !line.includes('a stale activation was fenced')) continue;
    const entry = JSON.parse(line) as { actor?: { kind?: string; key?: string } };
    if (entry.actor?.kind !== undefined && entry.actor.key !== undefined)
      actors.push({ kind: entry.actor.kind, key: entry.actor.key });
  }
  return actors;
}

describe('a cluster node paused with SIGSTOP', () => {
  let cluster: ProcessCluster;

  beforeAll(async () => {
    cluster = await startCluster({ nodes: 3, partitions: 16, label: 'pause' });
  });
  afterAll(async () => {
    await cluster?.close();
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
    const counts = worker.counts();
    expect(
      missing(
        counts,
        submitted.map((t) => t.taskId),
      ),
    ).toEqual([]);
    expect(duplicates(counts)).toEqual([]);
    expect(worker.refused).toEqual([]);

    // The fence itself. Each of its wheels that held a task falling due while it was stopped
    // woke up with a late tick, under an epoch the new owner has since passed: its push to the
    // ready queue was refused (stale_epoch), counted, logged, and stopped it. Being declared
    // out does not stand in for this: with the pushes unfenced it is declared out all the same.
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
});
