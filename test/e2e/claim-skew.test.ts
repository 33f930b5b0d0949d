import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/runtime/clock.js';
import { MAX_CLOCK_SKEW_MS } from '../../src/services/dispatcher.js';
import { dagClient, type DagClient } from '../support/dags.js';
import { BACKENDS, api, startTestNode, type BackendName, type TestCluster } from '../support/nodes.js';
import { uniqueType } from '../support/tasks.js';

/**
 * A ready entry is claimed on the clock of the wheel that fired it. In a cluster the owner of a
 * task's partition may run a little ahead of the node a worker polls (or push between that
 * node reading its clock and taking): the claim must not refuse — and drop — such an entry,
 * which would leave its task pending with nothing left to fire it. It must still refuse an
 * entry further ahead than any tolerated skew.
 */
describe.each(BACKENDS)('claiming entries fired by a node whose clock runs ahead, on %s', (backend: BackendName) => {
  let c: TestCluster;
  let w: DagClient;
  const clock = new FakeClock();
  beforeAll(async () => {
    c = await startTestNode(backend, { logLevel: process.env.TEST_LOG ?? 'silent' }, { clock });
    w = dagClient(() => c.url);
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  const submitDue = async (type: string, inMs: number): Promise<string> => {
    const due = new Date(clock.now() + inMs).toISOString();
    const res = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', {
      task_type: type,
      schedule: { type: 'delayed', due_time: due },
    });
    expect(res.status).toBe(201);
    return res.body.task_id;
  };

  it('claims an entry due up to the skew bound ahead of this clock, and refuses (without losing) one further ahead', async () => {
    const type = uniqueType('skew');
    const near = await submitDue(type, 400);
    const far = await submitDue(type, MAX_CLOCK_SKEW_MS + 4_000);
    // What another node's wheel, its clock 400 ms ahead, pushes for `near`; and a stray entry for `far`.
    await c.node.backend.ready.push([
      { taskId: near, taskType: type, priority: 5, dueMs: clock.now() + 400 },
      { taskId: far, taskType: type, priority: 5, dueMs: clock.now() + MAX_CLOCK_SKEW_MS + 4_000 },
    ]);
    await clock.advance(0);
    const first = await w.poll([type], 10, 0);
    expect(first.map((t) => t.task_id)).toEqual([near]);
    expect((await api<{ status: string }>(c.url, 'GET', `/api/tasks/${far}`)).body.status).not.toBe('running');
    // `far` still fires at its own due time from its partition's wheel.
    await clock.advance(MAX_CLOCK_SKEW_MS + 4_000);
    let got: string[] = [];
    for (let i = 0; i < 100 && got.length === 0; i++) {
      await clock.advance(10);
      got = (await w.poll([type], 10, 0)).map((t) => t.task_id);
    }
    expect(got).toEqual([far]);
  });
});
