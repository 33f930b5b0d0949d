import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/runtime/clock.js';
import { dagClient } from '../support/dags.js';
import type { FaultProxy } from '../support/fault-proxy.js';
import { metric, pollOnFakeTime, startFaultyNode, type FaultyNode } from '../support/faulty-node.js';
import { api } from '../support/nodes.js';
import { eventually } from '../support/waits.js';
import { makeTask, uniqueType } from '../support/tasks.js';

/**
 * A blip of a store stops no duty and loses no task. One node, its Postgres and Redis behind
 * fault proxies, on a FakeClock: the fault happens at the moment a duty needs the store (a
 * cascade, a lease's expiry, a submit's bucket write), and when the store is back the duty
 * runs again and the task is handed out on time. The safety nets' grace is a minute here, so
 * what these tests see is the mechanism itself, not the net under it — and the nets find
 * nothing.
 */
const START = Date.UTC(2026, 10, 30, 10, 0, 10);
const MINUTE = 60_000;
/** One partition: every task of a test meets in the same wheel. */
const OPTIONS = {
  partitions: 1,
  failureTimeoutSeconds: 60,
  safetyNetGraceSeconds: 60,
  safetyNetSeconds: 1,
  retryBaseSeconds: 0.1,
};

describe('store faults on one node', () => {
  let c: FaultyNode | undefined;
  afterEach(async () => {
    await c?.cleanup();
    c = undefined;
  });

  async function start(): Promise<{ node: FaultyNode; clock: FakeClock; w: ReturnType<typeof dagClient> }> {
    const clock = new FakeClock(START);
    c = await startFaultyNode(OPTIONS, { clock });
    const node = c;
    return { node, clock, w: dagClient(() => node.url) };
  }

  const submitAt = async (
    node: FaultyNode,
    type: string,
    dueMs: number,
    extra: Record<string, unknown> = {},
  ): Promise<string> => {
    const r = await api<{ task_id: string }>(node.url, 'POST', '/api/tasks', {
      task_type: type,
      schedule: { type: 'delayed', due_time: new Date(dueMs).toISOString() },
      ...extra,
    });
    expect(r.status).toBe(201);
    return r.body.task_id;
  };

  /**
   * Moves fake time on to `untilMs` in steps — through the moment a duty needs the store —
   * then waits until the node has been refused by the store a few more times: the duty's
   * request failed by then (a client gives up after one failed reconnection).
   */
  const advanceWhileDown = async (clock: FakeClock, untilMs: number, store: FaultProxy): Promise<void> => {
    while (clock.now() < untilMs) await clock.advance(Math.min(1_000, untilMs - clock.now()));
    const refused = store.stats().refused;
    await eventually(
      async () => (store.stats().refused >= refused + 3 ? true : undefined),
      20_000,
      'the node to be refused by the store',
    );
  };

  const dutyFailures = (node: FaultyNode, duty: string): Promise<number> =>
    metric(node, 'wheelhouse_duty_failures_total', { duty });

  const expectNetsIdle = async (node: FaultyNode): Promise<void> => {
    for (const kind of ['lease', 'pending'])
      expect(await metric(node, 'wheelhouse_safety_net_recovered_total', { kind }), kind).toBe(0);
  };

  it('re-arms a cascade that failed (its snapshot write, Postgres down): a far task fires at its due time', async () => {
    const { node, clock } = await start();
    const type = uniqueType('cascade');
    const due = START + 3 * MINUTE + 500;
    const id = await submitAt(node, type, due);
    node.pg.dropAll();
    void node.pg.refuse();
    // Through the partition's cascades at 10:01 and 10:02; the one at 10:02 loads the minute of 10:03.
    await advanceWhileDown(clock, START + 150_000, node.pg);
    node.pg.restore();
    const got = await pollOnFakeTime(() => node.url, clock, type, due + 5_000);
    expect(got?.tasks.map((t) => t.task_id)).toEqual([id]);
    expect(got!.atMs).toBeGreaterThanOrEqual(due);
    expect(got!.atMs).toBeLessThanOrEqual(due + 1_000);
    expect(await dutyFailures(node, 'wheel.cascade')).toBeGreaterThan(0);
    await expectNetsIdle(node);
  });

  it('re-arms a lease whose expiry could not be written: the task is handed on once Postgres is back', async () => {
    const { node, clock } = await start();
    const type = uniqueType('lease');
    const id = await submitAt(node, type, START, { timeout_seconds: 5 });
    const first = await pollOnFakeTime(() => node.url, clock, type, START + 5_000);
    expect(first?.tasks).toEqual([expect.objectContaining({ task_id: id, attempt: 1 })]);
    const expiresMs = clock.now() + 5_000;
    node.pg.dropAll();
    void node.pg.refuse();
    await advanceWhileDown(clock, expiresMs + 200, node.pg);
    node.pg.restore();
    const second = await pollOnFakeTime(() => node.url, clock, type, expiresMs + 10_000);
    expect(second?.tasks).toEqual([expect.objectContaining({ task_id: id, attempt: 2 })]);
    // The expiry duty comes back within its backoff (≤ 2 s), then the retry's 0.1 s backoff.
    expect(second!.atMs).toBeLessThanOrEqual(expiresMs + 3_000);
    expect(await dutyFailures(node, 'lease.expire')).toBeGreaterThan(0);
    await expectNetsIdle(node);
  });

  it('answers 201 to a submit while Redis is down and fires the task at its due time once Redis is back', async () => {
    const { node, clock } = await start();
    const type = uniqueType('submit');
    node.redis.dropAll();
    void node.redis.refuse();
    const far = await submitAt(node, type, START + 3 * MINUTE);
    const now = await submitAt(node, `${type}.now`, START);
    expect((await node.sql<{ status: string }>('SELECT status FROM tasks WHERE id = $1', [far]))[0]?.status).toBe(
      'pending',
    );
    node.redis.restore();
    const immediate = await pollOnFakeTime(() => node.url, clock, `${type}.now`, START + 10_000);
    expect(immediate?.tasks.map((t) => t.task_id)).toEqual([now]);
    const later = await pollOnFakeTime(() => node.url, clock, type, START + 3 * MINUTE + 5_000);
    expect(later?.tasks.map((t) => t.task_id)).toEqual([far]);
    expect(later!.atMs).toBeLessThanOrEqual(START + 3 * MINUTE + 1_000);
    await expectNetsIdle(node);
  });

  it('fires the near tasks of a batch on time when the far write of the same batch failed', async () => {
    const { node, clock } = await start();
    const type = uniqueType('near');
    node.redis.dropAll();
    void node.redis.refuse();
    const r = await api<{ tasks: { task_id: string }[] }>(node.url, 'POST', '/api/tasks/batch', {
      tasks: [
        { task_type: type, schedule: { type: 'delayed', due_time: new Date(START + 2_000).toISOString() } },
        {
          task_type: `${type}.far`,
          schedule: { type: 'delayed', due_time: new Date(START + 5 * MINUTE).toISOString() },
        },
      ],
    });
    expect(r.status).toBe(201);
    node.redis.restore();
    const near = await pollOnFakeTime(() => node.url, clock, type, START + 30_000);
    expect(near?.tasks.map((t) => t.task_id)).toEqual([r.body.tasks[0]!.task_id]);
    expect(near!.atMs).toBeLessThanOrEqual(START + 3_000);
    await expectNetsIdle(node);
  });

  it('takes within a second the entries a fallback put into a minute its wheel had already loaded', async () => {
    const { node, clock } = await start();
    const type = uniqueType('fallback');
    // What a node does when the task's partition does not answer (its owner is busy or dying):
    // the row is written, and its entry goes straight into the partition's minute bucket —
    // the current minute's, which the wheel loaded at activation.
    const task = makeTask({ taskType: type, dueMs: START + 5_000, partition: 0 });
    await node.node.backend.tasks.submit([task], START);
    await node.node.backend.buckets.add(0, [
      { taskId: task.id, taskType: type, priority: task.priority, dueMs: task.dueMs },
    ]);
    const got = await pollOnFakeTime(() => node.url, clock, type, START + 30_000);
    expect(got?.tasks.map((t) => t.task_id)).toEqual([task.id]);
    expect(got!.atMs).toBeLessThanOrEqual(task.dueMs + 1_000);
    await expectNetsIdle(node);
  });

  it('answers 503 with Retry-After to a submit while Postgres is down, writing nothing; the same submit then succeeds', async () => {
    const { node } = await start();
    const type = uniqueType('pgdown');
    node.pg.dropAll();
    void node.pg.refuse();
    const body = { task_type: type, idempotency_key: 'k-1' };
    const refused = await api<{ error: { code: string } }>(node.url, 'POST', '/api/tasks', body);
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe('store_unavailable');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await node.sql('SELECT id FROM tasks WHERE task_type = $1', [type])).toEqual([]);
    node.pg.restore();
    const accepted = await eventually(
      async () => {
        const again = await api<{ task_id: string }>(node.url, 'POST', '/api/tasks', body);
        return again.status === 201 ? again.body : undefined;
      },
      10_000,
      'the submit to succeed once Postgres is back',
    );
    expect(await node.sql('SELECT id FROM tasks WHERE task_type = $1', [type])).toEqual([{ id: accepted.task_id }]);
  });
});
