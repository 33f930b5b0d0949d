import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { RawWorker } from '../support/raw-worker.js';
import { uniqueType } from '../support/tasks.js';
import { eventually, waitForEvent } from '../support/waits.js';

/**
 * The worker channel of one node (API.md, "Workers as remote actors"), through a raw WebSocket
 * client: hello and welcome, credits, results and acks, the one heartbeat that keeps a
 * worker's leases, a closed socket's leases running out, resume, cancel pushed, bad frames.
 */
describe.each(BACKENDS)('the worker channel on %s', (backend) => {
  let c: TestCluster;
  const open: RawWorker[] = [];
  beforeAll(async () => {
    // The safety net waits a minute: a lease that runs out sooner was expired by its actor.
    c = await startTestNode(backend, {
      retryBaseSeconds: 0.05,
      retryMaxSeconds: 0.05,
      safetyNetGraceSeconds: 60,
      workerHeartbeatSeconds: 0.5,
    });
  });
  afterAll(async () => {
    for (const w of open) w.terminate();
    await c?.cleanup();
  });

  const submit = async (type: string, n: number, extra: Record<string, unknown> = {}): Promise<string[]> => {
    const res = await api<{ tasks: { task_id: string }[] }>(c.url, 'POST', '/api/tasks/batch', {
      tasks: Array.from({ length: n }, () => ({ task_type: type, ...extra })),
    });
    expect(res.status).toBe(201);
    return res.body.tasks.map((t) => t.task_id);
  };
  const hello = async (type: string, credits: number, extra: Record<string, unknown> = {}) => {
    const made = await RawWorker.hello(c.url, {
      worker_id: `w-${randomUUID()}`,
      task_types: [type],
      credits,
      ...extra,
    });
    open.push(made.worker);
    return made;
  };
  const status = async (taskId: string) =>
    (await api<{ status: string; attempts: number }>(c.url, 'GET', `/api/tasks/${taskId}`)).body;

  it('welcomes a worker with the node id and the heartbeat', async () => {
    const { welcome } = await hello(uniqueType('welcome'), 0);
    expect(welcome).toEqual({ type: 'welcome', node_id: c.node.options.nodeId, heartbeat_ms: 500, resumed: [] });
  });

  it('sends nothing to a worker that grants no credit, and what it grants once it does', async () => {
    const type = uniqueType('nocredit');
    const { worker: idle } = await hello(type, 0);
    const ids = await submit(type, 3);
    // Another worker with credit gets all three: they were there to be taken all along.
    const { worker: busy } = await hello(type, 3);
    expect((await busy.received(3)).map((t) => t.task_id).sort()).toEqual([...ids].sort());
    expect(idle.tasks).toEqual([]);
    idle.send({ type: 'credit', n: 2 });
    const more = await submit(type, 2);
    expect((await idle.received(2)).map((t) => t.task_id).sort()).toEqual([...more].sort());
    expect(busy.tasks).toHaveLength(3);
  });

  it('never has more tasks in flight than the credits granted, over any interleaving of credits and results', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(fc.record({ credit: fc.integer({ min: 1, max: 4 }) }), fc.record({ finish: fc.nat(3) })), {
          minLength: 1,
          maxLength: 12,
        }),
        async (steps) => {
          const type = uniqueType('credits');
          const total = 12;
          await submit(type, total);
          const { worker } = await hello(type, 0);
          let granted = 0;
          let over = '';
          worker.ws.on('message', () => {
            if (worker.tasks.length > granted)
              over = `${worker.tasks.length} tasks received, ${granted} credits granted`;
          });
          let finished = 0;
          for (const step of steps) {
            if ('credit' in step) {
              granted += step.credit;
              worker.send({ type: 'credit', n: step.credit });
            } else {
              const done = worker.tasks.slice(finished, finished + step.finish);
              finished += done.length;
              if (done.length > 0) {
                const acks = await worker.results(
                  done.map((t) => ({ task_id: t.task_id, lease_token: t.lease_token })),
                );
                expect(acks.every((a) => a.ok)).toBe(true);
              }
            }
            // Every credit is used as far as there are tasks, and never past it.
            await worker.received(Math.min(granted, total));
            expect(over).toBe('');
          }
          worker.terminate();
        },
      ),
      // A credit returned per result (instead of consumed per task) fails about one sequence
      // in three here; 30 of up to 12 steps catch it in every run (6 of up to 8 missed it in
      // 2 backend runs of 10), for about 2 s more per backend.
      { numRuns: 30 },
    );
  });

  it('records results and answers them with acks; a wrong token or a lease never pushed here is refused', async () => {
    const type = uniqueType('results');
    const [a, b] = await submit(type, 2);
    const { worker } = await hello(type, 1);
    const [task] = await worker.received(1);
    // The other task is polled over HTTP: its lease is not this socket's.
    const polled = await api<{ tasks: { task_id: string; lease_token: string }[] }>(
      c.url,
      'POST',
      '/api/workers/poll',
      {
        worker_id: 'w-http',
        task_types: [type],
        max_tasks: 1,
        wait_ms: 5000,
      },
    );
    const other = polled.body.tasks[0]!;
    expect([a, b]).toContain(other.task_id);
    const acks = await worker.results([
      { task_id: task!.task_id, lease_token: 'lt2.' + '0'.repeat(32) },
      { task_id: other.task_id, lease_token: other.lease_token },
    ]);
    expect(acks.map((ack) => [ack.task_id, ack.ok, ack.error?.code])).toEqual([
      [task!.task_id, false, 'lease_lost'],
      [other.task_id, false, 'lease_lost'],
    ]);
    expect((await status(task!.task_id)).status).toBe('running');
    expect((await status(other.task_id)).status).toBe('running');
    expect(
      await worker.results([{ task_id: task!.task_id, lease_token: task!.lease_token, result: { n: 1 } }]),
    ).toEqual([{ task_id: task!.task_id, ok: true }]);
    expect((await status(task!.task_id)).status).toBe('succeeded');
    // A second result for the same lease is refused.
    expect((await worker.results([{ task_id: task!.task_id, lease_token: task!.lease_token }]))[0]?.ok).toBe(false);
  });

  it('stores the latest progress and the result a worker sends over its socket', async () => {
    const type = uniqueType('progress');
    const id = (await submit(type, 1))[0]!;
    const { worker } = await hello(type, 1);
    const [task] = await worker.received(1);
    const read = async () =>
      (await api<{ status: string; progress: unknown; result: unknown }>(c.url, 'GET', `/api/tasks/${id}`)).body;
    worker.send({
      type: 'progress',
      updates: [
        { task_id: id, lease_token: task!.lease_token, progress: { done: 1 } },
        { task_id: id, lease_token: task!.lease_token, progress: { done: 2 } },
      ],
    });
    await eventually(async () => ((await read()).progress === null ? undefined : true));
    expect((await read()).progress).toEqual({ done: 2 });
    // A wrong token's progress is dropped: the stored value stays.
    worker.send({
      type: 'progress',
      updates: [{ task_id: id, lease_token: 'lt2.' + '1'.repeat(32), progress: { done: 99 } }],
    });
    expect(await worker.results([{ task_id: id, lease_token: task!.lease_token, result: { sent: 3 } }])).toEqual([
      { task_id: id, ok: true },
    ]);
    expect(await read()).toMatchObject({ status: 'succeeded', progress: { done: 2 }, result: { sent: 3 } });
  });

  it('closes a socket whose result is over maxResultBytes, naming the field, and records nothing', async () => {
    const type = uniqueType('bigresult');
    const id = (await submit(type, 1))[0]!;
    const { worker } = await hello(type, 1);
    const [task] = await worker.received(1);
    worker.send({
      type: 'results',
      results: [{ task_id: id, lease_token: task!.lease_token, status: 'succeeded', result: 'x'.repeat(70_000) }],
    });
    const error = await worker.next('error');
    expect(error.error).toMatchObject({ code: 'validation_failed' });
    expect(error.error.message).toMatch(/results\[0\]\.result.*maxResultBytes/);
    expect((await status(id)).status).toBe('running');
  });

  it("keeps all of a worker's leases alive while its socket lives (one heartbeat per worker), up to each deadline", async () => {
    const type = uniqueType('keep');
    await submit(type, 2, { timeout_seconds: 1, max_timeout_seconds: 10 });
    const { worker } = await hello(type, 2);
    const tasks = await worker.received(2);
    // The worker moves the deadlines on (the socket alone never would); the leases stay 1 s long.
    worker.send({
      type: 'progress',
      updates: tasks.map((t) => ({ task_id: t.task_id, lease_token: t.lease_token, extend_seconds: 6 })),
    });
    await worker.until(
      () => (worker.frames.some((f) => (f.type as string) === 'extended') ? true : undefined),
      'extended',
    );
    // Three leases' worth of time: without the node's heartbeat they would have run out.
    const expired = waitForEvent(c.node.events, 'lease:expired', () => true, 3_000).then(
      () => 'expired',
      () => 'kept',
    );
    expect(await expired).toBe('kept');
    const acks = await worker.results(tasks.map((t) => ({ task_id: t.task_id, lease_token: t.lease_token })));
    expect(acks.map((a) => a.ok)).toEqual([true, true]);
    expect(worker.frames.some((f) => f.type === 'lease_lost')).toBe(false);
  });

  it('lets the leases of a closed socket run out: the task runs again and the old result is refused', async () => {
    const type = uniqueType('closed');
    const [id] = await submit(type, 1, { timeout_seconds: 1 });
    const { worker: first } = await hello(type, 1);
    const [task] = await first.received(1);
    const expired = waitForEvent(c.node.events, 'lease:expired', (e) => e.taskId === id, 10_000);
    first.terminate();
    await expired;
    const { worker: second } = await hello(type, 1);
    const [again] = await second.received(1, 15_000);
    expect(again).toMatchObject({ task_id: id, attempt: 2 });
    // The first attempt's token: refused over HTTP, and on the socket that now holds the task.
    const late = await api<{ error: { code: string } }>(c.url, 'POST', `/api/tasks/${id}/complete`, {
      lease_token: task!.lease_token,
      status: 'succeeded',
    });
    expect(late.status).toBe(409);
    expect((await second.results([{ task_id: id!, lease_token: task!.lease_token }]))[0]?.ok).toBe(false);
    expect((await second.results([{ task_id: id!, lease_token: again!.lease_token }]))[0]?.ok).toBe(true);
  });

  it('resumes the leases a new socket names within the lease: the same attempt completes', async () => {
    const type = uniqueType('resume');
    const [id, lostId] = await submit(type, 2, { timeout_seconds: 5 });
    const { worker: first } = await hello(type, 2);
    const tasks = await first.received(2);
    const mine = tasks.find((t) => t.task_id === id)!;
    const lost = tasks.find((t) => t.task_id === lostId)!;
    first.terminate();
    await first.closed;
    const { worker: second, welcome } = await hello(type, 0, {
      resume: [
        { task_id: id, lease_token: mine.lease_token },
        { task_id: lostId, lease_token: 'lt2.' + 'f'.repeat(32) },
      ],
    });
    expect(welcome.resumed).toEqual([id]);
    expect(await second.results([{ task_id: id!, lease_token: mine.lease_token }])).toEqual([
      { task_id: id, ok: true },
    ]);
    const history = await api<{ executions: { attempt: number; status: string }[] }>(
      c.url,
      'GET',
      `/api/tasks/${id}/history`,
    );
    expect(history.body.executions).toMatchObject([{ attempt: 1, status: 'succeeded' }]);
    // The one not resumed runs out: it was the first socket's, which is gone.
    void lost;
  });

  it('pushes a cancel to the worker running the task, not to another', async () => {
    const type = uniqueType('cancel');
    const [id] = await submit(type, 1); // a 60 s lease: the next heartbeat is 20 s away
    const { worker } = await hello(type, 1);
    const { worker: bystander } = await hello(type, 0);
    await worker.received(1);
    const res = await api(c.url, 'DELETE', `/api/tasks/${id}`);
    expect(res.status).toBe(200);
    expect(await worker.next('cancel', 5_000)).toEqual({ type: 'cancel', task_ids: [id] });
    expect(bystander.frames.filter((f) => f.type === 'cancel')).toEqual([]);
  });

  it('answers a malformed frame with an error frame naming the problem, then closes; the node lives on', async () => {
    const cases: [unknown, string, RegExp][] = [
      ['not json', 'malformed_json', /./],
      [{ type: 'credit', n: 1 }, 'validation_failed', /first frame must be hello/],
      [{ type: 'hello', worker_id: 'w', task_types: [], credits: 1 }, 'validation_failed', /task_types/],
      [{ type: 'hello', worker_id: 'w', task_types: ['a'], credits: -1 }, 'validation_failed', /credits/],
      [{ type: 'nope' }, 'validation_failed', /type/],
      [[1, 2], 'validation_failed', /object/],
    ];
    for (const [frame, code, message] of cases) {
      const w = await RawWorker.connect(c.url);
      open.push(w);
      w.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
      const error = await w.next('error');
      expect(error.error.code, JSON.stringify(frame)).toBe(code);
      expect(error.error.message).toMatch(message);
      expect((await w.closed).code).toBe(1008);
    }
    const { worker } = await hello(uniqueType('after'), 1);
    worker.send({ type: 'results', results: [{ task_id: 'x', lease_token: 't', status: 'succeeded' }] });
    expect((await worker.next('error')).error.message).toMatch(/task_id/);
    expect((await api(c.url, 'GET', '/healthz')).status).toBe(200);
  });

  it('closes a worker that says goodbye once its leases are settled', async () => {
    const type = uniqueType('goodbye');
    await submit(type, 1);
    const { worker } = await hello(type, 1);
    const [task] = await worker.received(1);
    worker.send({ type: 'goodbye' });
    await worker.results([{ task_id: task!.task_id, lease_token: task!.lease_token }]);
    expect((await worker.closed).code).toBe(1000);
  });

  it('refuses the upgrade without a WebSocket handshake', async () => {
    const res = await api<{ error: { code: string } }>(c.url, 'GET', '/api/workers/connect');
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_failed');
  });

  // Last: it restarts the node.
  it('closes its sockets with 1001 when the node shuts down, and their leases resume on the next node', async () => {
    const type = uniqueType('shutdown');
    const [id] = await submit(type, 1, { timeout_seconds: 30 });
    const { worker } = await hello(type, 1);
    const [task] = await worker.received(1);
    await c.restart();
    expect((await worker.closed).code).toBe(1001);
    const { worker: again, welcome } = await hello(type, 0, {
      resume: [{ task_id: id, lease_token: task!.lease_token }],
    });
    expect(welcome.resumed).toEqual([id]);
    expect((await again.results([{ task_id: id!, lease_token: task!.lease_token }]))[0]?.ok).toBe(true);
  });
});
