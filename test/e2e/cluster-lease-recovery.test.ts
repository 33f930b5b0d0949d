import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RingPlacement } from '../../src/runtime/ring.js';
import { uniqueType } from '../support/tasks.js';
import { TEST_POSTGRES_URL } from '../support/nodes.js';
import { TOLERANCE_MS, startCluster, type ProcessCluster } from '../support/cluster.js';
import { eventually } from '../support/waits.js';
import { TestWorker, duplicates, missing, submitBatch } from '../support/cluster-worker.js';

/**
 * A worker vanishes with claimed tasks (it never heartbeats nor completes them), and a node
 * that holds lease actors `("lease", task_id)` dies with SIGKILL. A lease lives on the node
 * whose poll claimed its task (`placement: 'holder'`), not on the ring's owner: each node
 * holds exactly the leases of the tasks it handed out. Nothing will ever send the victim's
 * leases another message: the survivors that the ring names must take them over from the task
 * rows, so that each lease still runs out on time and its task is handed out again — once, as
 * attempt 2, within `timeout_seconds` + the failure timeout of its claim. (Leases held by the
 * survivors expire where they are: the control group.)
 *
 * The bound is what tells the mechanism from a slower net: a sweep of expired leases after a
 * grace period would also bring the tasks back, but later than this.
 *
 * Retries have no backoff here (`--retry-base-seconds 0`), so a task is due again the moment
 * its lease runs out.
 */

const TASKS = 90;
/** The tasks' `timeout_seconds`: long enough to claim them all and kill before any runs out. */
const LEASE_SECONDS = 4;
const LEASE_MS = LEASE_SECONDS * 1000;

describe('a cluster node killed while it holds the leases of claimed tasks', () => {
  let cluster: ProcessCluster;

  beforeAll(async () => {
    cluster = await startCluster({
      nodes: 3,
      partitions: 16,
      label: 'lease',
      extraArgs: ['--retry-base-seconds', '0'],
    });
  });
  afterAll(async () => {
    await cluster?.close();
  });

  it('hands each of its leased tasks out again once, as attempt 2, within the lease + the failure timeout', async () => {
    const before = await cluster.status('n1');
    const type = uniqueType('lease');
    const submitted = await submitBatch(
      cluster,
      'n1',
      Array.from({ length: TASKS }, (_, i) => ({ task_type: type, payload: { i }, timeout_seconds: LEASE_SECONDS })),
    );
    const ids = submitted.map((t) => t.taskId);

    // Claimed through every node by a worker that then vanishes: no heartbeat, no result.
    const vanishing = new TestWorker(cluster, {
      types: [type],
      targets: cluster.ids(),
      hold: () => true,
      waitMs: 200,
      maxTasks: 10, // many small polls, so that every node hands some out
      workerId: 'w-vanishing',
    }).start();
    try {
      await vanishing.waitFor(ids, 15_000, 'first claims');
    } finally {
      await vanishing.stop();
    }
    const claims = vanishing.firstStarts();
    expect(vanishing.assignments.length).toBe(TASKS);
    expect(vanishing.assignments.every((a) => a.attempt === 1)).toBe(true);
    const leaseHolder = new Map(vanishing.assignments.map((a) => [a.taskId, a.node]));
    const leasesOf = (node: string): string[] => ids.filter((id) => leaseHolder.get(id) === node);

    // Each node holds the leases of the tasks its polls claimed, wherever the ring would put
    // them (the grant is a told message: wait for it).
    for (const node of cluster.ids()) {
      const held = await eventually(
        async () => {
          // Asked of n1: the list is the cluster's, `node=` picks one node's.
          const r = await cluster.api<{ actors: { key: string; node: string }[] }>(
            'n1',
            'GET',
            `/admin/actors?kind=lease&node=${node}&limit=10000`,
          );
          const keys = r.body.actors.filter((a) => a.node === node && ids.includes(a.key)).map((a) => a.key);
          return keys.length >= leasesOf(node).length ? keys : undefined;
        },
        5_000,
        `${node} to hold the leases of the ${leasesOf(node).length} tasks it handed out`,
      );
      expect(held.sort(), `leases held by ${node}`).toEqual(leasesOf(node).sort());
    }
    // Not the ring's doing: the ring would have put most of them on another node.
    const ring = new RingPlacement(before.ring.nodes, { vnodesPerNode: before.ring.vnodes_per_node });
    const offRing = ids.filter((id) => ring.ownerOf('lease', id) !== leaseHolder.get(id));
    expect(offRing.length).toBeGreaterThan(TASKS / 3);
    // Inspected through a node that neither holds it nor owns it by the ring, a lease is found
    // where it is held, passive until a heartbeat or its expiry needs its actor.
    const third = offRing.find((id) => leaseHolder.get(id) !== 'n1' && ring.ownerOf('lease', id) !== 'n1');
    if (third !== undefined) {
      const found = await cluster.api<{ node: string; state: { passive?: boolean } }>(
        'n1',
        'GET',
        `/admin/actors/lease/${third}`,
      );
      expect(found.status).toBe(200);
      expect(found.body.node).toBe(leaseHolder.get(third));
      expect(found.body.state.passive).toBe(true);
    }

    // The victim: the node (other than n1, which the test talks to) that handed out the most.
    const victim = cluster
      .ids()
      .filter((id) => id !== 'n1')
      .sort((x, y) => leasesOf(y).length - leasesOf(x).length)[0]!;
    const survivors = cluster.ids().filter((id) => id !== victim);
    const onVictim = leasesOf(victim);
    expect(onVictim.length, `leases on ${victim}`).toBeGreaterThanOrEqual(TASKS / 5);

    const firstClaimMs = Math.min(...[...claims.values()].map((a) => a.atMs));
    const lastClaimMs = Math.max(...[...claims.values()].map((a) => a.atMs));
    await cluster.kill9(victim);
    const killedAtMs = Date.now();
    console.log(
      `[lease] ${TASKS} tasks claimed in ${lastClaimMs - firstClaimMs} ms (${onVictim.length} leases on ${victim}); ` +
        `killed ${victim} ${killedAtMs - lastClaimMs} ms after the last claim, ${firstClaimMs + LEASE_MS - killedAtMs} ms before the first lease runs out`,
    );
    // Killed after the first lease ran out, the victim could have expired some itself.
    expect(killedAtMs, 'the kill came too late to test lease recovery').toBeLessThan(firstClaimMs + LEASE_MS - 500);

    const rescuer = new TestWorker(cluster, {
      types: [type],
      targets: survivors,
      waitMs: 200,
      workerId: 'w-rescuer',
    }).start();
    const pool = new pg.Pool({ connectionString: TEST_POSTGRES_URL, max: 1 });
    try {
      const ring = await cluster.waitForRing(survivors, cluster.failureTimeoutMs + 10_000);
      const ringChanges = ring.statuses[0]!.ring_changes - before.ring_changes;
      console.log(
        `[lease] ring over [${survivors.join(', ')}] settled ${ring.atMs - killedAtMs} ms after the kill (failure timeout ${cluster.failureTimeoutMs} ms; ` +
          `ring changes on ${ring.statuses[0]!.node_id}: +${ringChanges})`,
      );
      await rescuer.waitFor(ids, LEASE_MS + cluster.failureTimeoutMs + 5_000, 'tasks handed out again');
      // Every result recorded: the tasks are final, so nothing more can be handed out.
      await eventually(
        async () => {
          const { rows } = await pool.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM ${cluster.schema}.tasks WHERE id = ANY($1::uuid[]) AND status = 'succeeded'`,
            [ids],
          );
          return rows[0]!.n === TASKS ? true : undefined;
        },
        10_000,
        'every task succeeded',
      );
      await rescuer.stop();

      const counts = rescuer.counts();
      expect(missing(counts, ids)).toEqual([]);
      expect(duplicates(counts)).toEqual([]);
      expect(rescuer.refused).toEqual([]);
      expect(rescuer.assignments.filter((a) => a.attempt !== 2).map((a) => `${a.taskId} attempt ${a.attempt}`)).toEqual(
        [],
      );

      // Lag: hand-out again − claim.
      const again = rescuer.firstStarts();
      const lagOf = (id: string): number => again.get(id)!.atMs - claims.get(id)!.atMs;
      const bound = LEASE_MS + cluster.failureTimeoutMs + TOLERANCE_MS;
      const stats = (group: string[]): string => {
        const lags = group.map(lagOf).sort((x, y) => x - y);
        return `p50 ${lags[Math.floor(lags.length / 2)]} ms, max ${lags[lags.length - 1]} ms`;
      };
      const elsewhere = ids.filter((id) => !onVictim.includes(id));
      const changesSince = (await cluster.status(survivors[0]!)).ring_changes - before.ring_changes;
      console.log(
        `[lease] handed out again − claim: leases on ${victim} (${onVictim.length}) ${stats(onVictim)}; on the survivors (${elsewhere.length}) ${stats(elsewhere)} ` +
          `(bound: lease ${LEASE_MS} + failure timeout ${cluster.failureTimeoutMs} + tolerance ${TOLERANCE_MS} = ${bound} ms; ring changes since the start: +${changesSince})`,
      );
      const late = ids
        .filter((id) => lagOf(id) > bound)
        .map((id) => `${id} (lease on ${leaseHolder.get(id)}) ${lagOf(id)} ms`);
      expect(late).toEqual([]);

      // Postgres: attempt 1 timed out, attempt 2 (the task row's) succeeded, no attempt 3.
      const tasks = await pool.query<{ id: string; status: string; attempts: number }>(
        `SELECT id, status, attempts FROM ${cluster.schema}.tasks WHERE id = ANY($1::uuid[])`,
        [ids],
      );
      expect(tasks.rows.filter((t) => t.status !== 'succeeded' || t.attempts !== 2)).toEqual([]);
      const executions = await pool.query<{ task_id: string; attempt: number; status: string; started_ms: number }>(
        `SELECT task_id, attempt, status, (extract(epoch FROM started_at) * 1000)::float8 AS started_ms
           FROM ${cluster.schema}.executions WHERE task_id = ANY($1::uuid[]) ORDER BY task_id, attempt`,
        [ids],
      );
      // Not before its lease ran out: the lease was honoured, not dropped with the node. Timed
      // from the lease's own start (the node's clock at the claim, which the lease's expiry is
      // counted from), not from the claim's answer reaching the worker: on a loaded machine that
      // answer has arrived ~280 ms after the lease began. The hand-out again is timed when it
      // arrived, so it can only look later than it was.
      const leaseStart = new Map(executions.rows.map((e) => [e.task_id, e.started_ms]));
      const early = ids
        .map((id) => ({ id, held: again.get(id)!.atMs - leaseStart.get(id)! }))
        .filter((e) => e.held < LEASE_MS - 50)
        .map((e) => `${e.id} ${Math.round(e.held)} ms`);
      expect(early).toEqual([]);
      expect(executions.rows.filter((e) => e.attempt !== 1 || e.status !== 'timed_out')).toEqual([]);
      expect(executions.rows.map((e) => e.task_id).sort()).toEqual([...ids].sort());
      const history = await cluster.api<{ executions: { attempt: number; status: string }[] }>(
        survivors[0]!,
        'GET',
        `/api/tasks/${onVictim[0]}/history`,
      );
      expect(history.body.executions.map((e) => `${e.attempt} ${e.status}`).sort()).toEqual([
        '1 timed_out',
        '2 succeeded',
      ]);
    } finally {
      await rescuer.stop();
      await pool.end();
    }
  });
});
