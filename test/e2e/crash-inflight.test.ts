import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TOLERANCE_MS } from '../support/cluster.js';
import { eventually } from '../support/waits.js';
import { api, type BackendName } from '../support/nodes.js';
import { seedPgliteDir } from '../support/pglite-dirs.js';
import {
  dropTestStores,
  kill9,
  nodeArgs,
  requireBuiltCli,
  startProcess,
  type NodeProcess,
} from '../support/processes.js';

/**
 * A crash with work in flight: a worker claims tasks and vanishes (no heartbeat, no result),
 * and the node, which holds their leases in memory only, is killed with SIGKILL. A new process
 * on the same data must take the leases over from the task rows, so that each still runs out
 * on time and its task is handed out again — once, as attempt 2, within a tolerance of the
 * later of its lease running out and the node being ready again.
 *
 * The lease outlasts the restart (the embedded node, PGlite, takes seconds to come back), so
 * the restarted node must arm each lease and fire it when it runs out: a net that found
 * expired leases only after a grace period would come too late.
 *
 * Retries have no backoff here (`--retry-base-seconds 0`), so a task is due again the moment
 * its lease runs out.
 */
requireBuiltCli();

const TASKS = 20;
/** The tasks' `timeout_seconds`, longer than the node's restart on each backend (2–3 s and 4–8 s on a loaded 2-core machine). */
const LEASE_SECONDS: Record<BackendName, number> = { postgres: 6, embedded: 12 };
/**
 * From the later of the lease end and the node being ready to the task handed out again, ms.
 * PGlite runs in the node's own thread on one connection, so the embedded node expires the
 * leases and serves the claims one statement at a time (up to ~700 ms on a loaded machine).
 */
const TOLERANCE: Record<BackendName, number> = { postgres: TOLERANCE_MS, embedded: 2 * TOLERANCE_MS };

interface Polled {
  tasks: { task_id: string; lease_token: string; attempt: number }[];
}

describe.each(['postgres', 'embedded'] as BackendName[])(
  'a node killed with SIGKILL while its tasks are claimed, on %s',
  (backend) => {
    const id = randomBytes(4).toString('hex');
    const schema = `crashinf_${id}`;
    const prefix = `crashinf${id}`;
    const dataDir = mkdtempSync(join(tmpdir(), 'wheelhouse-crash-inflight-'));
    const args = [...nodeArgs(backend, schema, prefix, dataDir), '--retry-base-seconds', '0'];
    const running: NodeProcess[] = [];
    const leaseMs = LEASE_SECONDS[backend] * 1000;

    // Each test starts from an initialized, unmigrated data directory (test/support/pglite-dirs.ts).
    beforeEach(async () => {
      if (backend === 'embedded') await seedPgliteDir(dataDir);
    });

    afterEach(async () => {
      for (const p of running) if (p.child.exitCode === null && p.child.signalCode === null) await kill9(p);
      running.length = 0;
      if (backend === 'postgres') await dropTestStores(schema, prefix);
      rmSync(dataDir, { recursive: true, force: true });
    });

    it('hands each claimed task out again once, as attempt 2, when its lease runs out after the restart', async () => {
      const type = 'crash.inflight';
      const poll = (url: string, waitMs: number): Promise<{ status: number; body: Polled }> =>
        api<Polled>(url, 'POST', '/api/workers/poll', {
          worker_id: 'w',
          task_types: [type],
          max_tasks: 100,
          wait_ms: waitMs,
        });

      const first = await startProcess(args);
      running.push(first);
      const submitted = await api<{ tasks: { task_id: string }[] }>(first.url, 'POST', '/api/tasks/batch', {
        tasks: Array.from({ length: TASKS }, (_, i) => ({
          task_type: type,
          payload: { i },
          timeout_seconds: LEASE_SECONDS[backend],
        })),
      });
      expect(submitted.status).toBe(201);
      const ids = submitted.body.tasks.map((t) => t.task_id).sort();

      // Claimed by a worker that then vanishes.
      const claimedAtMs = new Map<string, number>();
      const claimDeadline = Date.now() + 10_000;
      while (claimedAtMs.size < TASKS && Date.now() < claimDeadline) {
        const polled = await poll(first.url, 500);
        expect(polled.status).toBe(200);
        for (const t of polled.body.tasks) {
          expect(t.attempt).toBe(1);
          expect(claimedAtMs.has(t.task_id), `${t.task_id} claimed twice`).toBe(false);
          claimedAtMs.set(t.task_id, Date.now());
        }
      }
      expect([...claimedAtMs.keys()].sort()).toEqual(ids);

      await kill9(first);
      const killedAtMs = Date.now();
      const firstClaimMs = Math.min(...claimedAtMs.values());
      // Killed after a lease ran out, the node could have expired it itself.
      expect(killedAtMs, 'the kill came too late to test lease recovery').toBeLessThan(firstClaimMs + leaseMs - 500);
      const second = await startProcess(args);
      running.push(second);
      await eventually(
        async () => ((await api(second.url, 'GET', '/readyz')).status === 200 ? true : undefined),
        30_000,
        'the restarted node to be ready',
        20,
      );
      const readyAtMs = Date.now();

      // The test is the worker now: whatever comes is completed at once.
      const handedOut: { taskId: string; attempt: number; atMs: number }[] = [];
      const results: boolean[] = [];
      const deadline = Math.max(firstClaimMs + leaseMs, readyAtMs) + 8_000;
      while (new Set(handedOut.map((a) => a.taskId)).size < TASKS && Date.now() < deadline) {
        const polled = await poll(second.url, 500);
        expect(polled.status).toBe(200);
        const atMs = Date.now();
        if (polled.body.tasks.length === 0) continue;
        for (const t of polled.body.tasks) handedOut.push({ taskId: t.task_id, attempt: t.attempt, atMs });
        const done = await api<{ results: { ok: boolean }[] }>(second.url, 'POST', '/api/workers/complete', {
          results: polled.body.tasks.map((t) => ({
            task_id: t.task_id,
            lease_token: t.lease_token,
            status: 'succeeded',
          })),
        });
        expect(done.status).toBe(200);
        results.push(...done.body.results.map((r) => r.ok));
      }
      const never = ids.filter((i) => !handedOut.some((a) => a.taskId === i));
      expect(
        never,
        `${never.length} of ${TASKS} claimed tasks never handed out again within ${deadline - readyAtMs} ms of the restart`,
      ).toEqual([]);
      // Each once (every result was taken, so the tasks are final and nothing more can come), as attempt 2.
      expect(handedOut.map((a) => a.taskId).sort()).toEqual(ids);
      expect(results.every((ok) => ok)).toBe(true);
      expect(handedOut.filter((a) => a.attempt !== 2)).toEqual([]);

      // In time: within the tolerance of the later of its lease running out and the node being ready again.
      const lags = handedOut.map((a) => {
        const leaseEndMs = claimedAtMs.get(a.taskId)! + leaseMs;
        return { ...a, lagMs: a.atMs - (leaseEndMs - leaseMs), overMs: a.atMs - Math.max(leaseEndMs, readyAtMs) };
      });
      const maxLag = Math.max(...lags.map((l) => l.lagMs));
      const maxOver = Math.max(...lags.map((l) => l.overMs));
      const restartMs = readyAtMs - killedAtMs;
      console.log(
        `[crash-inflight:${backend}] killed ${killedAtMs - firstClaimMs} ms after the claims, ready again ${restartMs} ms later ` +
          `(${firstClaimMs + leaseMs - readyAtMs} ms before the first lease ran out); handed out again − claim: max ${maxLag} ms (lease ${leaseMs} ms); ` +
          `− max(lease end, ready): max ${maxOver} ms (tolerance ${TOLERANCE[backend]} ms)`,
      );
      expect(lags.filter((l) => l.overMs > TOLERANCE[backend])).toEqual([]);
      // Not before its lease ran out (the claim is timed when its answer arrived, a little after the lease started).
      expect(lags.filter((l) => l.lagMs < leaseMs - 250)).toEqual([]);

      // The record: attempt 1 timed out, attempt 2 succeeded, no attempt 3.
      for (const taskId of ids) {
        const task = await api<{ status: string; attempts: number }>(second.url, 'GET', `/api/tasks/${taskId}`);
        expect({ status: task.body.status, attempts: task.body.attempts }).toEqual({
          status: 'succeeded',
          attempts: 2,
        });
        const history = await api<{ executions: { attempt: number; status: string }[] }>(
          second.url,
          'GET',
          `/api/tasks/${taskId}/history`,
        );
        expect(history.body.executions.map((e) => `${e.attempt} ${e.status}`).sort()).toEqual([
          '1 timed_out',
          '2 succeeded',
        ]);
      }
    });
  },
);
