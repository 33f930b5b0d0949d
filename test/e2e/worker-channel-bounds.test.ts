import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { FakeClock } from '../../src/runtime/clock.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { RawWorker } from '../support/raw-worker.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * The worker channel's bounds, no weaker than the long-poll's (security review N8): sockets and
 * polls share one budget, a hello resumes at most 1 000 leases, a socket that never says hello
 * is closed, and a socket whose claims keep finding nothing is rechecked less and less often.
 */
describe.each(BACKENDS)('the worker channel within the long-poll bounds, on %s', (backend) => {
  let c: TestCluster;
  const open: RawWorker[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, { pollMaxConcurrent: 2, pollMaxWaitSeconds: 30, workerHelloTimeoutSeconds: 0.3 });
  });
  afterEach(() => {
    for (const w of open.splice(0)) w.terminate();
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  const hello = async (type: string): Promise<RawWorker> => {
    const { worker } = await RawWorker.hello(c.url, { worker_id: `w-${randomUUID()}`, task_types: [type], credits: 1 });
    open.push(worker);
    return worker;
  };
  const poll = (type: string, waitMs: number) =>
    api<{ error?: { code: string; message: string } }>(c.url, 'POST', '/api/workers/poll', {
      worker_id: `p-${randomUUID()}`,
      task_types: [type],
      wait_ms: waitMs,
    });

  it('counts sockets and long-polls against one budget (pollMaxConcurrent)', async () => {
    const type = uniqueType('budget');
    const a = await hello(type);
    await hello(type);
    // Two sockets fill a budget of two: a poll is refused...
    const refused = await poll(type, 0);
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatchObject({ code: 'too_many_polls' });
    expect(refused.body.error?.message).toMatch(/2 worker sockets.*pollMaxConcurrent/);
    // ...and, one socket gone, a waiting poll and the other socket fill it: a socket is refused.
    a.close();
    await a.closed;
    const waiting = poll(type, 5_000);
    const third = await RawWorker.connect(c.url);
    open.push(third);
    const error = await third.next('error');
    expect(error.error.code).toBe('too_many_sockets');
    expect(error.error.message).toMatch(/1 worker sockets and 1 long-polls.*pollMaxConcurrent/);
    expect((await third.closed).code).toBe(1013);
    // The poll's answer frees its slot again.
    await api(c.url, 'POST', '/api/tasks', { task_type: type });
    expect((await waiting).status).toBe(200);
  });

  it('refuses a hello that resumes more than 1 000 leases', async () => {
    const worker = await RawWorker.connect(c.url);
    open.push(worker);
    worker.send({
      type: 'hello',
      worker_id: `w-${randomUUID()}`,
      task_types: [uniqueType('resume')],
      credits: 1,
      resume: Array.from({ length: 1_001 }, () => ({
        task_id: randomUUID(),
        lease_token: `lt2.${randomBytes(16).toString('hex')}`,
      })),
    });
    const error = await worker.next('error');
    expect(error.error.code).toBe('validation_failed');
    expect(error.error.message).toMatch(/resume/);
    expect((await worker.closed).code).toBe(1008);
  });

  it('closes a socket that has not said hello within workerHelloTimeoutSeconds, and only such a socket', async () => {
    const talker = await hello(uniqueType('hello-deadline'));
    const silent = await RawWorker.connect(c.url);
    open.push(silent);
    const error = await silent.next('error', 5_000);
    expect(error.error).toMatchObject({ code: 'validation_failed' });
    expect(error.error.message).toMatch(/hello.*workerHelloTimeoutSeconds/);
    expect((await silent.closed).code).toBe(1008);
    // The socket that said hello, opened before, is past the same deadline and still open.
    expect(talker.ws.readyState).toBe(talker.ws.OPEN);
  });
});

describe.each(BACKENDS)('the periodic recheck of a socket that finds nothing, on %s', (backend) => {
  const clock = new FakeClock();
  let c: TestCluster;
  const open: RawWorker[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, {}, { clock });
  });
  afterAll(async () => {
    for (const w of open) w.terminate();
    await c?.cleanup();
  });

  it('backs off the recheck of a socket whose claims find nothing, and a push still reaches it at once', async () => {
    const type = uniqueType('recheck');
    // Every take of this type's queue, and when it settled.
    const ready = c.node.backend.ready;
    let takes = 0;
    let inFlight = 0;
    const take = ready.take.bind(ready);
    const spy = vi.spyOn(ready, 'take').mockImplementation(async (...args) => {
      const mine = args[0].includes(type);
      if (mine) {
        takes++;
        inFlight++;
      }
      try {
        return await take(...args);
      } finally {
        if (mine) inFlight--;
      }
    });
    try {
      const { worker } = await RawWorker.hello(c.url, {
        worker_id: `w-${randomUUID()}`,
        task_types: [type],
        credits: 1,
      });
      open.push(worker);
      const settled = async (): Promise<void> => {
        await new Promise((resolve) => setImmediate(resolve)); // the claim's turn
        await eventually(() => (inFlight === 0 ? true : undefined));
      };
      await settled();
      const first = takes;
      expect(first).toBeGreaterThan(0);
      // Thirty seconds, a second at a time: at most a recheck at 1, 2, 4, 8 s and every 8 s
      // after, where an unbacked recheck looks every second.
      for (let s = 0; s < 30; s++) {
        await clock.advance(1_000);
        await settled();
      }
      const rechecks = takes - first;
      expect(rechecks).toBeGreaterThan(2);
      expect(rechecks).toBeLessThanOrEqual(8);
      // A push is not held back by the backoff.
      const submitted = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', { task_type: type });
      await clock.advance(0);
      const [task] = await worker.received(1);
      expect(task!.task_id).toBe(submitted.body.task_id);
    } finally {
      spy.mockRestore();
    }
  });
});
