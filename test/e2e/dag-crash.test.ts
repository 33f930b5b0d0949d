import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres } from '../../src/store/db.js';
import { SqlTaskStore } from '../../src/store/task-store.js';
import { dagClient, idsOf } from '../support/dags.js';
import { BACKENDS, TEST_POSTGRES_URL, api, type BackendName } from '../support/nodes.js';
import {
  dropTestStores,
  kill9,
  nodeArgs,
  requireBuiltCli,
  startProcess,
  type NodeProcess,
} from '../support/processes.js';
import { tokenDigest, uniqueType } from '../support/tasks.js';

/**
 * The crash between the steps with a real process: the node runs as the built CLI and is
 * killed with SIGKILL right after it answered a predecessor's result, while it is telling
 * that predecessor's 2 000 dependents (one actor each, reconciled in batches, then the
 * outbox row cleared). Some may have been released, some not; after a restart on the same
 * data every one of them runs, and exactly once. On Postgres a second predecessor's result
 * is also written while no node runs at all (its statement, outbox row included, run by
 * the test), so the restarted node must deliver it from the outbox.
 *
 * On Postgres only by default: on the embedded backend each process start opens PGlite
 * (10–17 s for the two starts on a busy 2-core machine), and the in-process test above covers
 * the same recovery there. `DAG_SIGKILL_ALL=1` runs it on both.
 */
const SIGKILL_BACKENDS: BackendName[] = process.env.DAG_SIGKILL_ALL ? BACKENDS : ['postgres'];

describe.each(SIGKILL_BACKENDS)('DAGs across a SIGKILL of the node process, on %s', (backend: BackendName) => {
  const suffix = randomBytes(4).toString('hex');
  const schema = `dagcrash_${suffix}`;
  const prefix = `dagcrash${suffix}`;
  let dataDir = '';
  const running: NodeProcess[] = [];
  const args = (): string[] => nodeArgs(backend, schema, prefix, dataDir);

  beforeAll(() => {
    requireBuiltCli();
    dataDir = mkdtempSync(join(tmpdir(), 'wheelhouse-dagcrash-'));
  });
  afterAll(async () => {
    for (const p of running) await kill9(p);
    if (backend === 'postgres') await dropTestStores(schema, prefix);
    if (dataDir !== '') rmSync(dataDir, { recursive: true, force: true });
  });

  it('runs every dependent exactly once when the node is killed while it tells them', async () => {
    const n = 2000;
    const type = uniqueType('sigkill');
    const first = await startProcess(args());
    running.push(first);
    const w1 = dagClient(() => first.url);
    const submitted = await w1.submitDag({
      tasks: [
        { ref: 'p', task_type: type, payload: 'p' },
        { ref: 'p2', task_type: type, payload: 'p2', timeout_seconds: 600 },
        { ref: 'after-p2', task_type: `${type}.late`, depends_on: ['p2'] },
        ...Array.from({ length: n }, (_, i) => ({ ref: `x${i}`, task_type: `${type}.dep`, depends_on: ['p'] })),
      ],
    });
    expect(submitted.status).toBe(201);
    const dependents = submitted.body.tasks
      .filter((t) => t.ref.startsWith('x'))
      .map((t) => t.task_id)
      .sort();
    const roots = await w1.take([type], 2);
    const p = roots.find((t) => t.payload === 'p')!;
    const p2 = roots.find((t) => t.payload === 'p2')!;
    const answered = await api(first.url, 'POST', `/api/tasks/${p.task_id}/complete`, {
      lease_token: p.lease_token,
      status: 'succeeded',
    });
    expect(answered.status).toBe(200);
    await kill9(first);

    if (backend === 'postgres') {
      const db = openPostgres({ url: TEST_POSTGRES_URL, schema, poolSize: 1 });
      try {
        const [written] = await new SqlTaskStore(db).complete(
          [
            {
              taskId: p2.task_id,
              tokenDigest: tokenDigest(p2.lease_token),
              outcome: 'succeeded',
              error: null,
              retryable: true,
            },
          ],
          Date.now(),
          { baseMs: 1000, maxMs: 1000 },
        );
        expect(written).toMatchObject({ status: 'succeeded', notifyDependents: true });
      } finally {
        await db.close();
      }
    }

    const second = await startProcess(args());
    running.push(second);
    const w2 = dagClient(() => second.url);
    const handedOut = new Map<string, number>();
    const deadline = Date.now() + 90_000;
    while (handedOut.size < n) {
      if (Date.now() > deadline) throw new Error(`${handedOut.size} of ${n} dependents handed out`);
      const tasks = await w2.poll([`${type}.dep`], 500, 1000);
      for (const t of tasks) {
        expect(t.attempt).toBe(1);
        handedOut.set(t.task_id, (handedOut.get(t.task_id) ?? 0) + 1);
      }
      await w2.complete(tasks);
    }
    expect(await w2.poll([`${type}.dep`], 100, 500)).toEqual([]);
    expect([...handedOut.keys()].sort()).toEqual(dependents);
    expect([...handedOut.values()].every((k) => k === 1)).toBe(true);

    if (backend !== 'postgres') {
      // The lease taken before the kill is still this worker's: its result goes through the new node.
      await w2.complete([p2]);
    }
    const [late] = await w2.take([`${type}.late`], 1);
    expect(late).toMatchObject({ task_id: idsOf(submitted.body)['after-p2'], attempt: 1 });
    await w2.complete([late!]);
    expect(await w2.poll([`${type}.late`], 10, 300)).toEqual([]);
    expect((await w2.waitDagDone(submitted.body.dag_id)).counts).toEqual({ succeeded: n + 3 });
    if (backend === 'postgres') {
      const metrics = await api<string>(second.url, 'GET', '/metrics');
      const replayed = /^wheelhouse_dag_events_replayed_total (\d+)/m.exec(metrics.body);
      expect(Number(replayed?.[1])).toBeGreaterThanOrEqual(1);
    }
  });
});
