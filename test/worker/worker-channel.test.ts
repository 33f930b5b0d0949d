import { afterEach, describe, expect, it } from 'vitest';
import {
  createWorker,
  LeaseLostError,
  TaskCancelledError,
  WorkerStoppedError,
  type TaskContext,
  type Worker,
  type WorkerOptions,
} from '../../src/worker/index.js';
import { sleep } from '../support/waits.js';
import { gate, startFakeNode, task, until, type FakeNode } from './fake-channel-node.js';

/**
 * The SDK's side of the worker channel, against a scripted fake node (`fake-channel-node.ts`):
 * what `hello` says, that the SDK never runs more tasks than the credit it granted and
 * grants a slot again with its result, that results finishing together share a frame, cancel
 * and lease_lost, resume and resend after a reconnect, the second URL when the first refuses,
 * the HTTP fallback on 404, and stop({ timeoutMs }). The real node's side is in
 * test/e2e/worker-channel.test.ts.
 */

const nodes: FakeNode[] = [];
const workers: Worker[] = [];

afterEach(async () => {
  // Nodes first: a worker whose socket is gone stops without waiting for acks.
  await Promise.all(nodes.splice(0).map((n) => n.close()));
  await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 0 })));
});

async function fakeNode(options: Parameters<typeof startFakeNode>[0] = {}): Promise<FakeNode> {
  const node = await startFakeNode(options);
  nodes.push(node);
  return node;
}

function worker(options: Partial<WorkerOptions> & Pick<WorkerOptions, 'handler'>): Worker {
  const w = createWorker({ taskTypes: ['fake.type'], workerId: 'w-1', onError: () => undefined, ...options });
  workers.push(w);
  w.start();
  return w;
}

/** Handlers that hold until released by task id. */
function heldHandlers() {
  const gates = new Map<string, ReturnType<typeof gate>>();
  const contexts = new Map<string, TaskContext>();
  let running = 0;
  let maxRunning = 0;
  return {
    contexts,
    get maxRunning() {
      return maxRunning;
    },
    release(taskId: string) {
      const g = gates.get(taskId) ?? gate();
      gates.set(taskId, g);
      g.open();
    },
    handler: async (t: TaskContext): Promise<void> => {
      contexts.set(t.taskId, t);
      running++;
      maxRunning = Math.max(maxRunning, running);
      const g = gates.get(t.taskId) ?? gate();
      gates.set(t.taskId, g);
      try {
        await g.promise;
      } finally {
        running--;
      }
    },
  };
}

/** A worker of held handlers on a fake node that has welcomed it. */
async function welcomedHeld() {
  const node = await fakeNode();
  const held = heldHandlers();
  const w = worker({ url: node.url, handler: held.handler });
  const conn = await node.accept();
  await conn.next('hello');
  conn.welcome();
  return { held, w, conn };
}

describe('worker SDK on the channel', () => {
  it('says hello with its id, task types, free slots as credits and the token, and resumes nothing at first', async () => {
    const node = await fakeNode();
    worker({
      url: node.url,
      token: 's3cret',
      concurrency: 7,
      taskTypes: ['a.b', 'c.d'],
      handler: async () => undefined,
    });
    const conn = await node.accept();
    expect(conn.request.headers.authorization).toBe('Bearer s3cret');
    expect(await conn.next('hello')).toEqual({
      type: 'hello',
      worker_id: 'w-1',
      task_types: ['a.b', 'c.d'],
      credits: 7,
      resume: [],
    });
  });

  it('never runs more tasks than the credit it granted, and grants a slot again with its result', async () => {
    const node = await fakeNode();
    const held = heldHandlers();
    const errors: string[] = [];
    const w = worker({
      url: node.url,
      concurrency: 3,
      handler: held.handler,
      onError: (e) => void errors.push((e as Error).message),
    });
    const conn = await node.accept();
    expect((await conn.next('hello')).credits).toBe(3);
    conn.welcome();
    const [t1, t2, t3, t4] = [task(), task(), task(), task()];
    conn.push(t1, t2, t3, t4); // one more than granted
    await until(() => w.stats.started === 3, 'three handlers');
    // The fourth is not run: it goes straight back as failed and retryable.
    const refused = await conn.next('results');
    expect(refused.results).toEqual([
      expect.objectContaining({ task_id: t4.task_id, lease_token: t4.lease_token, status: 'failed', retryable: true }),
    ]);
    expect(errors.some((m) => m.includes('beyond the credit'))).toBe(true);
    expect(conn.has('credit')).toBe(false); // every slot is still taken
    conn.ack(refused.results);

    held.release(t2.task_id);
    const done = await conn.next('results');
    expect(done.results).toEqual([{ task_id: t2.task_id, lease_token: t2.lease_token, status: 'succeeded' }]);
    expect(await conn.next('credit')).toEqual({ type: 'credit', n: 1 });
    conn.ack(done.results);

    const t5 = task();
    conn.push(t5);
    await until(() => w.stats.started === 4, 'the fifth task, on the regranted credit');
    expect(held.maxRunning).toBe(3);
    conn.autoAck = true;
    for (const t of [t1, t3, t5]) held.release(t.task_id);
    await until(() => w.stats.reported === 5, 'the results acknowledged');
    // Four handlers ran and succeeded; the refused task's result was the fifth.
    expect(w.stats).toMatchObject({ started: 4, succeeded: 4, failed: 0, running: 0, polls: 0 });
  });

  it('sends the results of tasks that finish together in one frame, with their credit, and counts the acks', async () => {
    const node = await fakeNode();
    const all = gate();
    const told = new Map<string, string>();
    const w = worker({
      url: node.url,
      concurrency: 20,
      handler: () => all.promise,
      onResult: (taskId, outcome) => told.set(taskId, outcome),
    });
    const conn = await node.accept();
    await conn.next('hello');
    conn.welcome();
    const tasks = Array.from({ length: 20 }, () => task());
    conn.push(...tasks.slice(0, 12));
    conn.push(...tasks.slice(12));
    await until(() => w.stats.running === 20, 'twenty handlers');
    all.open();
    const frame = await conn.next('results');
    expect((frame.results as unknown[]).length).toBe(20);
    expect(await conn.next('credit')).toEqual({ type: 'credit', n: 20 });
    const results = frame.results as { task_id: string }[];
    conn.send({
      type: 'acks',
      acks: results.map((r, i) => ({
        task_id: r.task_id,
        ok: i > 0,
        ...(i === 0 ? { error: { code: 'lease_lost', message: 'gone' } } : {}),
      })),
    });
    await until(() => w.stats.unreported === 0, 'the acks');
    expect(w.stats).toMatchObject({ reported: 19, discarded: 1, resultFrames: 1 });
    // Each result's own fate, as the node answered it.
    expect(told.get(results[0]!.task_id)).toBe('refused');
    expect(results.slice(1).map((r) => told.get(r.task_id))).toEqual(Array.from({ length: 19 }, () => 'accepted'));
  });

  it("sends the handler's value as the result, and the latest progress of a running task in a progress frame", async () => {
    const node = await fakeNode();
    const release = gate();
    const w = worker({
      url: node.url,
      handler: async ({ progress }) => {
        progress({ step: 1 });
        progress({ step: 2 }); // replaces the first before it is sent
        await release.promise;
        return { rows: 3 };
      },
    });
    const conn = await node.accept();
    await conn.next('hello');
    conn.welcome();
    const t = task();
    conn.push(t);
    expect(await conn.next('progress')).toEqual({
      type: 'progress',
      updates: [{ task_id: t.task_id, lease_token: t.lease_token, progress: { step: 2 } }],
    });
    release.open();
    const frame = await conn.next('results');
    expect(frame.results).toEqual([
      { task_id: t.task_id, lease_token: t.lease_token, status: 'succeeded', result: { rows: 3 } },
    ]);
    conn.ack(frame.results);
    await until(() => w.stats.reported === 1, 'the ack');
    expect(conn.all.filter((f) => f.type === 'progress')).toHaveLength(1);
  });

  it('aborts a cancelled task with TaskCancelledError and reports it; a lost lease aborts with LeaseLostError and its result is dropped', async () => {
    const node = await fakeNode();
    const reasons = new Map<string, unknown>();
    const w = worker({
      url: node.url,
      handler: async ({ taskId, signal }) => {
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
        reasons.set(taskId, signal.reason);
        throw signal.reason;
      },
    });
    const conn = await node.accept();
    await conn.next('hello');
    conn.welcome();
    const [cancelled, lost] = [task(), task()];
    conn.push(cancelled, lost);
    await until(() => w.stats.running === 2, 'both running');
    conn.send({ type: 'cancel', task_ids: [cancelled.task_id] });
    const frame = await conn.next('results');
    expect(frame.results).toEqual([
      expect.objectContaining({
        task_id: cancelled.task_id,
        status: 'failed',
        error: expect.stringMatching(/cancelled/) as unknown,
      }),
    ]);
    expect(reasons.get(cancelled.task_id)).toBeInstanceOf(TaskCancelledError);

    conn.send({ type: 'lease_lost', task_ids: [lost.task_id] });
    await until(() => w.stats.running === 0, 'the lost task to wind down');
    expect(reasons.get(lost.task_id)).toBeInstanceOf(LeaseLostError);
    expect(w.stats).toMatchObject({ leasesLost: 1, discarded: 1 });
    // Its slot comes back as credit, but no result goes with it.
    await conn.next('credit');
    expect(conn.all.filter((f) => f.type === 'results')).toHaveLength(1);
  });

  it('hands a handler that reads its signal only after a cancel, then a lost lease, a signal aborted with the first reason', async () => {
    // The signal is made when first read (RunningTask.signal): an abort before that must not be lost.
    const { held, w, conn } = await welcomedHeld();
    const [late, early] = [task(), task()];
    conn.push(late, early);
    await until(() => w.stats.running === 2, 'both running');
    const earlySignal = held.contexts.get(early.task_id)!.signal;
    expect(earlySignal.aborted).toBe(false);
    conn.send({ type: 'cancel', task_ids: [late.task_id, early.task_id] });
    conn.send({ type: 'lease_lost', task_ids: [late.task_id] });
    await until(() => earlySignal.aborted, 'the signal read before the cancel to abort');
    expect(earlySignal.reason).toBeInstanceOf(TaskCancelledError);
    const lateSignal = held.contexts.get(late.task_id)!.signal;
    expect(lateSignal.aborted).toBe(true);
    expect(lateSignal.reason).toBeInstanceOf(TaskCancelledError);
    expect(held.contexts.get(late.task_id)!.signal).toBe(lateSignal);
    held.release(late.task_id);
    held.release(early.task_id);
    await until(() => w.stats.running === 0, 'both to end');
  });
  it('after a lost socket, resumes its leases on the next one, resends unacknowledged results and counts refused ones as discarded', async () => {
    const node = await fakeNode();
    const held = heldHandlers();
    const told: [string, string][] = [];
    const w = worker({
      url: node.url,
      concurrency: 4,
      handler: held.handler,
      onResult: (taskId, outcome) => told.push([taskId, outcome]),
    });
    const first = await node.accept();
    await first.next('hello');
    first.welcome();
    const [finished, runningTask, forgotten] = [task(), task(), task()];
    first.push(finished, runningTask, forgotten);
    await until(() => w.stats.running === 3, 'three running');
    held.release(finished.task_id);
    const sent = await first.next('results'); // never acknowledged on this socket
    expect(sent.results).toEqual([expect.objectContaining({ task_id: finished.task_id })]);
    first.socket.terminate();

    const second = await node.accept();
    const hello = await second.next('hello');
    expect(hello.credits).toBe(2); // two slots still taken by the running tasks
    expect(new Set((hello.resume as { task_id: string; lease_token: string }[]).map((l) => l.task_id))).toEqual(
      new Set([finished.task_id, runningTask.task_id, forgotten.task_id]),
    );
    expect(hello.resume).toContainEqual({ task_id: runningTask.task_id, lease_token: runningTask.lease_token });
    // The node kept two of the leases: the third's task is aborted as lost.
    second.welcome({ resumed: [finished.task_id, runningTask.task_id] });
    await until(() => held.contexts.get(forgotten.task_id)?.signal.aborted === true, 'the forgotten lease lost');
    expect(held.contexts.get(forgotten.task_id)?.signal.reason).toBeInstanceOf(LeaseLostError);

    const resent = await second.next('results');
    expect(resent.results).toEqual(sent.results);
    second.ack(resent.results, false); // too late for this one after all
    held.release(runningTask.task_id);
    held.release(forgotten.task_id);
    const later = await second.next('results');
    expect(later.results).toEqual([expect.objectContaining({ task_id: runningTask.task_id, status: 'succeeded' })]);
    second.ack(later.results);
    await until(() => w.stats.unreported === 0 && w.stats.running === 0, 'everything settled');
    expect(w.stats).toMatchObject({ reconnects: 1, reported: 1, discarded: 2, leasesLost: 1 });
    // The result sent on the lost socket is told once, when the second socket answers it; the
    // lost lease's task never reported (its handler was aborted), so it is told nothing.
    expect(told).toEqual([
      [finished.task_id, 'refused'],
      [runningTask.task_id, 'accepted'],
    ]);
  });

  it('sends again, after a backoff, a result the node could not record (its store out), until the node takes it', async () => {
    const node = await fakeNode();
    const told: [string, string][] = [];
    const errors: string[] = [];
    const w = worker({
      url: node.url,
      handler: async () => undefined,
      onResult: (taskId, outcome) => told.push([taskId, outcome]),
      onError: (error) => errors.push(String(error)),
    });
    const conn = await node.accept();
    await conn.next('hello');
    conn.welcome();
    const [stored, gone] = [task(), task()];
    conn.push(stored, gone);
    const first = await conn.next('results');
    expect((first.results as { task_id: string }[]).map((r) => r.task_id).sort()).toEqual(
      [stored.task_id, gone.task_id].sort(),
    );
    const outage = { code: 'store_unavailable', message: 'The node cannot reach its database right now.' };
    conn.send({
      type: 'acks',
      acks: [
        { task_id: stored.task_id, ok: false, error: outage },
        { task_id: gone.task_id, ok: false, error: { code: 'lease_lost', message: 'gone' } },
      ],
    });
    const sentAt = Date.now();
    const second = await conn.next('results');
    expect(Date.now() - sentAt).toBeGreaterThanOrEqual(40); // the first backoff: 50–100 ms
    expect(second.results).toEqual([expect.objectContaining({ task_id: stored.task_id, status: 'succeeded' })]);
    conn.send({ type: 'acks', acks: [{ task_id: stored.task_id, ok: false, error: outage }] });
    const third = await conn.next('results');
    expect(third.results).toEqual(second.results);
    conn.ack(third.results);
    await until(() => w.stats.unreported === 0, 'the result taken');
    expect(w.stats).toMatchObject({ reported: 1, discarded: 1 });
    // Each result told once, with its final answer; the outage is said, not counted as discarded.
    expect(told).toEqual([
      [gone.task_id, 'refused'],
      [stored.task_id, 'accepted'],
    ]);
    expect(errors.filter((e) => e.includes('could not record 1 result(s) (store_unavailable)'))).toHaveLength(2);
  });

  it('resumes at most 1 000 leases in one hello (the node refuses more), and says so', async () => {
    const node = await fakeNode();
    const errors: unknown[] = [];
    const w = worker({
      url: node.url,
      concurrency: 1_005,
      handler: () => new Promise(() => undefined),
      onError: (error) => errors.push(error),
    });
    const first = await node.accept();
    await first.next('hello');
    first.welcome();
    first.push(...Array.from({ length: 1_005 }, () => task()));
    await until(() => w.stats.running === 1_005, 'all running');
    first.socket.terminate();
    const second = await node.accept();
    const hello = await second.next('hello');
    expect(hello.resume).toHaveLength(1_000);
    expect(errors.some((e) => e instanceof Error && e.message.includes('5 of 1005 leases not resumed'))).toBe(true);
  });

  it('drops a socket whose node stops answering pings, and reconnects', async () => {
    const node = await fakeNode({ autoPong: false });
    const w = worker({ url: node.url, handler: async () => undefined });
    const first = await node.accept();
    await first.next('hello');
    first.welcome({ heartbeat_ms: 100 }); // then silence: no frame, no pong
    const second = await node.accept();
    await second.next('hello');
    second.welcome();
    await until(() => w.stats.reconnects === 1, 'the reconnect counted');
  });

  it('reports and ignores a second welcome on one socket (no second watchdog, no reconnect counted)', async () => {
    const node = await fakeNode();
    const messages: string[] = [];
    const w = worker({ url: node.url, handler: async () => undefined, onError: (e) => void messages.push(String(e)) });
    const conn = await node.accept();
    await conn.next('hello');
    conn.welcome();
    conn.welcome();
    await until(() => messages.some((m) => m.includes('welcomed this socket twice')), 'the second welcome reported');
    expect(w.stats.reconnects).toBe(0);
  });

  it('connects to the next URL of the list when the first refuses', async () => {
    const gone = await fakeNode();
    const goneUrl = gone.url;
    await gone.close();
    nodes.splice(nodes.indexOf(gone), 1);
    const node = await fakeNode();
    const contexts: string[] = [];
    worker({
      urls: [goneUrl, node.url],
      handler: async () => undefined,
      onError: (_e, context) => void contexts.push(context),
    });
    const conn = await node.accept();
    await conn.next('hello');
    expect(contexts).toContain(`connecting to ${goneUrl}`);
  });

  it('after an error frame and a close, reports the error and reconnects', async () => {
    const node = await fakeNode();
    const messages: string[] = [];
    const w = worker({ url: node.url, handler: async () => undefined, onError: (e) => void messages.push(String(e)) });
    const first = await node.accept();
    await first.next('hello');
    first.welcome();
    first.send({ type: 'error', error: { code: 'unauthorized', message: 'no such key' } });
    first.socket.close();
    const second = await node.accept();
    await second.next('hello');
    second.welcome();
    expect(messages.some((m) => m.includes('unauthorized: no such key'))).toBe(true);
    await until(() => w.stats.reconnects === 1, 'the second welcome counted as a reconnect');
  });

  it('falls back to HTTP long-poll once, with one onError line, when the node answers the upgrade with 404', async () => {
    let handed = false;
    const completed: unknown[] = [];
    const node = await fakeNode({
      refuseWith: 404,
      http: (req, res) => {
        let raw = '';
        req.on('data', (c: Buffer) => (raw += c.toString()));
        req.on('end', () => {
          if (req.url === '/api/workers/poll') {
            if (handed) return; // a long-poll with nothing more to give
            handed = true;
            return res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ tasks: [task()] }));
          }
          if (req.url === '/api/workers/complete') {
            const results = (JSON.parse(raw) as { results: { task_id: string }[] }).results;
            completed.push(...results);
            return res
              .writeHead(200, { 'content-type': 'application/json' })
              .end(JSON.stringify({ results: results.map((r) => ({ task_id: r.task_id, ok: true })) }));
          }
          res.writeHead(404).end();
        });
      },
    });
    const errors: string[] = [];
    const w = worker({ url: node.url, handler: async () => undefined, onError: (e) => void errors.push(String(e)) });
    await until(() => w.stats.reported === 1, 'the task run over HTTP');
    expect(completed).toHaveLength(1);
    expect(w.stats.polls).toBeGreaterThanOrEqual(1);
    expect(node.connections).toHaveLength(0);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/404.*falls back to HTTP/);
  });

  it('stop({ timeoutMs }) says goodbye, lets a quick handler finish, aborts a stuck one after the grace, and resolves once both results are acknowledged', async () => {
    const node = await fakeNode();
    const held = heldHandlers();
    let stuckReason: unknown;
    const w = worker({
      url: node.url,
      concurrency: 2,
      handler: async (t) => {
        if (t.payload === 'stuck') {
          t.signal.addEventListener('abort', () => void (stuckReason = t.signal.reason as unknown), { once: true });
          return new Promise(() => undefined); // ignores its signal and never settles
        }
        return held.handler(t);
      },
    });
    const conn = await node.accept();
    await conn.next('hello');
    conn.welcome();
    const [quick, stuck] = [task(), task({ payload: 'stuck' })];
    conn.push(quick, stuck);
    await until(() => w.stats.running === 2, 'both running');

    let stopped = false;
    const stopAt = Date.now();
    const stopping = w.stop({ timeoutMs: 300 }).then(() => (stopped = true));
    await conn.next('goodbye');
    held.release(quick.task_id);
    const first = await conn.next('results');
    expect(first.results).toEqual([expect.objectContaining({ task_id: quick.task_id, status: 'succeeded' })]);
    const second = await conn.next('results');
    expect(Date.now() - stopAt).toBeGreaterThanOrEqual(295);
    expect(second.results).toEqual([
      expect.objectContaining({
        task_id: stuck.task_id,
        status: 'failed',
        retryable: true,
        error: expect.stringMatching(/stop grace of 300 ms/) as unknown,
      }),
    ]);
    expect(stuckReason).toBeInstanceOf(WorkerStoppedError);
    expect(conn.has('credit')).toBe(false); // no credit granted once stopping
    conn.ack(first.results);
    await until(() => w.stats.unreported === 1, 'the first ack');
    expect(stopped).toBe(false); // still waiting for the second ack
    conn.ack(second.results);
    await stopping;
    expect(w.stats).toMatchObject({ succeeded: 1, failed: 1, reported: 2, running: 0, unreported: 0 });
  });

  it('stop() without a grace waits for running handlers', async () => {
    const { held, w, conn } = await welcomedHeld();
    const t = task();
    conn.push(t);
    await until(() => w.stats.running === 1, 'running');
    let stopped = false;
    const stopping = w.stop().then(() => (stopped = true));
    await conn.next('goodbye');
    await sleep(100); // real time: a window in which a stop that did not wait would resolve
    expect(stopped).toBe(false);
    expect(held.contexts.get(t.task_id)?.signal.aborted).toBe(false);
    held.release(t.task_id);
    conn.ack((await conn.next('results')).results);
    await stopping;
    expect(w.stats).toMatchObject({ reported: 1, running: 0 });
  });

  it('does not run a task pushed after it began to close its socket: the node hands that back at once', async () => {
    const node = await fakeNode();
    let started = 0;
    const w = worker({ url: node.url, handler: async () => void started++ });
    const conn = await node.accept();
    await conn.next('hello');
    conn.welcome();
    conn.push(task()); // one that runs: the worker has been welcomed once its result comes
    conn.ack((await conn.next('results')).results);
    await until(() => w.stats.reported === 1, 'the first result acknowledged');
    // The node pushes as it reads `goodbye`: the worker's close frame is already on its way.
    const t = task();
    conn.socket.on('message', (data: Buffer) => {
      if ((JSON.parse(data.toString()) as { type: string }).type === 'goodbye') conn.push(t);
    });
    await w.stop();
    await sleep(50); // real time: a late frame would have been read by now
    expect(started).toBe(1);
    expect(w.stats).toMatchObject({ started: 1, notRun: 1, running: 0 });
  });
});
