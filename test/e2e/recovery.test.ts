import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/runtime/clock.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { pollNext, type PolledTask } from '../support/fake-clock-poll.js';
import { quiescent } from '../support/waits.js';

/**
 * Losing the fast index or the process loses nothing: Postgres is the system of record and
 * each wheel partition rebuilds from it. Time is a FakeClock so that far buckets (minutes
 * ahead) and the cascade run in milliseconds.
 */
interface Polled {
  tasks: PolledTask[];
}

const MINUTE = 60_000;

const idsOf = (tasks: Polled['tasks']): string[] => tasks.map((t) => t.task_id).sort();
/** Nothing of `type` is ready: checked once the node has fallen quiet (no push, claim or lease in flight). */
const expectNothingReady = async (c: TestCluster, clock: FakeClock, type: string): Promise<void> => {
  await quiescent(c.node, { clock, allowReady: true });
  const r = await api<Polled>(c.url, 'POST', '/api/workers/poll', {
    worker_id: 'w',
    task_types: [type],
    max_tasks: 100,
    wait_ms: 0,
  });
  expect(r.body.tasks).toEqual([]);
};

describe.each(BACKENDS)('recovery on %s', (backend) => {
  let c: TestCluster | undefined;
  afterEach(async () => {
    await c?.cleanup();
    c = undefined;
  });

  const submitDelayed = async (url: string, type: string, dueMs: number): Promise<string> => {
    const r = await api<{ task_id: string }>(url, 'POST', '/api/tasks', {
      task_type: type,
      schedule: { type: 'delayed', due_time: new Date(dueMs).toISOString() },
    });
    expect(r.status).toBe(201);
    return r.body.task_id;
  };
  it('fires near and far tasks at their due times through the cascade', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 30, 11, 59, 30));
    c = await startTestNode(backend, { logLevel: process.env.TEST_LOG ?? 'silent' }, { clock });
    const t0 = clock.now();
    const near = await submitDelayed(c.url, 'rec.cascade', t0 + 20_000);
    const far = await submitDelayed(c.url, 'rec.cascade', t0 + 5 * MINUTE + 7);
    await clock.advance(19_999);
    await expectNothingReady(c, clock, 'rec.cascade');
    await clock.advance(1);
    expect(idsOf(await pollNext(c.url, 'rec.cascade', clock))).toEqual([near]);
    await clock.advanceTo(t0 + 5 * MINUTE + 6);
    await expectNothingReady(c, clock, 'rec.cascade');
    await clock.advance(1);
    expect(idsOf(await pollNext(c.url, 'rec.cascade', clock))).toEqual([far]);
  });

  it('fires tasks that were pending when the process restarted', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 30, 11, 0, 0));
    c = await startTestNode(backend, { logLevel: process.env.TEST_LOG ?? 'silent' }, { clock });
    const t0 = clock.now();
    const overdue = await submitDelayed(c.url, 'rec.restart', t0 + 10_000);
    const soon = await submitDelayed(c.url, 'rec.restart', t0 + 3 * MINUTE);
    const later = await submitDelayed(c.url, 'rec.restart', t0 + 90 * MINUTE);

    // Down for two minutes: the first task fell due meanwhile.
    const after = new FakeClock(t0 + 2 * MINUTE);
    await c.restart({ clock: after });
    expect(idsOf(await pollNext(c.url, 'rec.restart', after))).toEqual([overdue]);
    await after.advanceTo(t0 + 3 * MINUTE - 1);
    await expectNothingReady(c, after, 'rec.restart');
    await after.advance(1);
    expect(idsOf(await pollNext(c.url, 'rec.restart', after))).toEqual([soon]);
    await after.advanceTo(t0 + 90 * MINUTE);
    expect(idsOf(await pollNext(c.url, 'rec.restart', after))).toEqual([later]);
  });

  it('recovers a running task whose lease ran out while the process was down', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 30, 9, 0, 0));
    c = await startTestNode(backend, { logLevel: process.env.TEST_LOG ?? 'silent' }, { clock });
    const r = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', {
      task_type: 'rec.lease',
      timeout_seconds: 30,
    });
    expect(idsOf(await pollNext(c.url, 'rec.lease', clock, false))).toEqual([r.body.task_id]);
    const after = new FakeClock(clock.now() + 31_000);
    await c.restart({ clock: after });
    // The partition tells the lease on activation; its expiry sends the task back to pending.
    await after.advance(10_000);
    expect(await pollNext(c.url, 'rec.lease', after)).toEqual([
      expect.objectContaining({ task_id: r.body.task_id, attempt: 2 }),
    ]);
  });
});

describe('recovery when Redis is flushed', () => {
  let c: TestCluster | undefined;
  afterEach(async () => {
    await c?.cleanup();
    c = undefined;
  });

  it('fires pending and ready tasks after Redis lost everything', async () => {
    const clock = new FakeClock(Date.UTC(2026, 10, 30, 8, 0, 0));
    c = await startTestNode('postgres', {}, { clock });
    const t0 = clock.now();
    const submit = async (delayMs: number): Promise<string> =>
      (
        await api<{ task_id: string }>(c!.url, 'POST', '/api/tasks', {
          task_type: 'rec.flush',
          schedule: { type: 'delayed', due_time: new Date(t0 + delayMs).toISOString() },
        })
      ).body.task_id;
    const ready = await submit(0);
    const near = await submit(30_000);
    const far = await submit(10 * MINUTE);
    await clock.advance(0);

    await c.flushRedis();
    // The node notices the lost partition marks within a second and rebuilds from Postgres.
    await clock.advance(1_000);
    const url = c.url;
    expect(idsOf(await pollNext(url, 'rec.flush', clock))).toEqual([ready]);
    await clock.advanceTo(t0 + 30_000 - 1);
    await expectNothingReady(c, clock, 'rec.flush');
    await clock.advance(1);
    expect(idsOf(await pollNext(url, 'rec.flush', clock))).toEqual([near]);
    await clock.advanceTo(t0 + 10 * MINUTE - 1);
    await expectNothingReady(c, clock, 'rec.flush');
    await clock.advance(1);
    expect(idsOf(await pollNext(url, 'rec.flush', clock))).toEqual([far]);
  });
});
