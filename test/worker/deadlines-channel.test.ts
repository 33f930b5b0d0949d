import { afterEach, describe, expect, it } from 'vitest';
import {
  createWorker,
  LeaseLostError,
  TaskTimeoutError,
  type TaskContext,
  type Worker,
  type WorkerOptions,
} from '../../src/worker/index.js';
import { sleep } from '../support/waits.js';
import { gate, startFakeNode, task, until, type FakeNode } from './fake-channel-node.js';

/**
 * Execution deadlines in the SDK on the channel, against a fake node that speaks the contract
 * of ../notes/DEADLINES-WIRE.md frame by frame (the node's side is not built yet): a task's
 * `deadline_at` aborts a handler that hangs with a `TaskTimeoutError` and frees its slot at
 * once, with no result; `extendDeadline` sends `extend_seconds` at once and moves the deadline
 * to the `extended` answer's; a node that sends no `deadline_at` gets the old behaviour.
 * Deadlines are real and short (300 ms): the SDK's timers race real sockets here.
 */

const nodes: FakeNode[] = [];
const workers: Worker[] = [];

afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.close()));
  await Promise.all(workers.splice(0).map((w) => w.stop({ timeoutMs: 0 })));
});

async function welcomedSocket(options: Partial<WorkerOptions> & Pick<WorkerOptions, 'handler'>) {
  const node = await startFakeNode();
  nodes.push(node);
  const w = createWorker({
    url: node.url,
    taskTypes: ['fake.type'],
    workerId: 'w-1',
    onError: () => undefined,
    ...options,
  });
  workers.push(w);
  w.start();
  const conn = await node.accept();
  const hello = await conn.next('hello');
  conn.welcome();
  return { w, conn, hello };
}

/** The moment a handler's signal was aborted, and why. */
interface Abort {
  reason: unknown;
  atMs: number;
}

function watchAbort(signal: AbortSignal, into: (abort: Abort) => void): void {
  signal.addEventListener('abort', () => into({ reason: signal.reason as unknown, atMs: Date.now() }), { once: true });
}

/** A deadline `ms` from now, to the millisecond (as `deadline_at` carries it). */
function inMs(ms: number): Date {
  return new Date(Date.now() + ms);
}

describe('deadlines on the channel', () => {
  it('aborts a handler that hangs at deadline_at with TaskTimeoutError, frees its slot at once for the next task, and sends no result for it', async () => {
    let abort: Abort | undefined;
    const { w, conn, hello } = await welcomedSocket({
      concurrency: 1,
      handler: async ({ payload, signal }) => {
        if (payload === 'quick') return 'done';
        watchAbort(signal, (a) => (abort = a));
        return new Promise(() => undefined); // ignores its signal and never settles
      },
    });
    expect(hello.credits).toBe(1);
    const deadline = inMs(300);
    const hung = task({ payload: 'hang', deadline_at: deadline.toISOString() });
    conn.push(hung);

    // The slot comes back as credit at the deadline, though the handler never settles.
    expect(await conn.next('credit')).toEqual({ type: 'credit', n: 1 });
    expect(abort?.atMs).toBeGreaterThanOrEqual(deadline.getTime());
    expect(abort?.reason).toBeInstanceOf(TaskTimeoutError);
    expect(abort?.reason).toMatchObject({ name: 'TaskTimeoutError', retryable: true, taskId: hung.task_id, deadline });
    expect(w.stats).toMatchObject({ running: 0, timedOut: 1, failed: 0 });

    // The node's own lease_lost at the deadline finds nothing to drop.
    conn.send({ type: 'lease_lost', task_ids: [hung.task_id] });
    const next = task({ payload: 'quick' });
    conn.push(next);
    const frame = await conn.next('results');
    expect(frame.results).toEqual([
      { task_id: next.task_id, lease_token: next.lease_token, status: 'succeeded', result: 'done' },
    ]);
    conn.ack(frame.results);
    await until(() => w.stats.reported === 1, 'the ack');
    expect(w.stats).toMatchObject({ started: 2, succeeded: 1, failed: 0, timedOut: 1, discarded: 0, leasesLost: 0 });
    expect(conn.all.filter((f) => f.type === 'results')).toHaveLength(1);
  });

  it('extendDeadline sends extend_seconds at once, resolves with the extended frame’s deadline, and the abort moves to it', async () => {
    let abort: Abort | undefined;
    const seen: { before?: Date | null; granted?: Date; after?: Date | null } = {};
    const { w, conn } = await welcomedSocket({
      handler: async (ctx) => {
        watchAbort(ctx.signal, (a) => (abort = a));
        seen.before = ctx.deadline;
        ctx.progress({ step: 1 }); // waits 250 ms for later values: the extension must not wait with it
        seen.granted = await ctx.extendDeadline(2);
        seen.after = ctx.deadline;
        return new Promise(() => undefined);
      },
    });
    const first = inMs(300);
    const t = task({ deadline_at: first.toISOString() });
    conn.push(t);

    const asked = await conn.next('progress');
    expect(asked.updates).toEqual([{ task_id: t.task_id, lease_token: t.lease_token, extend_seconds: 2 }]);
    const granted = inMs(700);
    conn.send({ type: 'extended', tasks: [{ task_id: t.task_id, deadline_at: granted.toISOString() }] });

    await until(() => abort !== undefined, 'the abort at the granted deadline');
    expect(seen).toEqual({ before: first, granted, after: granted });
    expect(abort?.atMs).toBeGreaterThanOrEqual(granted.getTime());
    expect(abort?.reason).toMatchObject({ name: 'TaskTimeoutError', taskId: t.task_id, deadline: granted });
    expect(w.stats).toMatchObject({ timedOut: 1, running: 0 });
    // The progress value went on its own, after its linger.
    expect((await conn.next('progress')).updates).toEqual([
      { task_id: t.task_id, lease_token: t.lease_token, progress: { step: 1 } },
    ]);
  });

  it('extendDeadline rejects with LeaseLostError when the node answers lease_lost instead of extended', async () => {
    let outcome: unknown;
    const { w, conn } = await welcomedSocket({
      handler: async (ctx) => {
        outcome = await ctx.extendDeadline(5).catch((error: unknown) => error);
      },
    });
    const t = task({ deadline_at: inMs(10_000).toISOString() });
    conn.push(t);
    await conn.next('progress');
    conn.send({ type: 'lease_lost', task_ids: [t.task_id] });
    await until(() => outcome !== undefined, 'the extension settled');
    expect(outcome).toBeInstanceOf(LeaseLostError);
    await until(() => w.stats.running === 0, 'the handler done');
    expect(w.stats).toMatchObject({ leasesLost: 1, discarded: 1, timedOut: 0 });
  });

  it('an extension the lost socket did not answer is sent again on the next one', async () => {
    let granted: Date | undefined;
    const node = await startFakeNode();
    nodes.push(node);
    const w = createWorker({
      url: node.url,
      taskTypes: ['fake.type'],
      onError: () => undefined,
      handler: async (ctx) => {
        granted = await ctx.extendDeadline(3);
        return 'extended';
      },
    });
    workers.push(w);
    w.start();
    const first = await node.accept();
    await first.next('hello');
    first.welcome();
    const t = task({ deadline_at: inMs(10_000).toISOString() });
    first.push(t);
    await first.next('progress');
    first.socket.terminate(); // before any answer

    const second = await node.accept();
    expect((await second.next('hello')).resume).toEqual([{ task_id: t.task_id, lease_token: t.lease_token }]);
    second.welcome({ resumed: [t.task_id] });
    const again = await second.next('progress');
    expect(again.updates).toEqual([{ task_id: t.task_id, lease_token: t.lease_token, extend_seconds: 3 }]);
    const deadline = inMs(3_000);
    second.send({ type: 'extended', tasks: [{ task_id: t.task_id, deadline_at: deadline.toISOString() }] });
    const results = await second.next('results');
    expect(results.results).toEqual([expect.objectContaining({ task_id: t.task_id, result: 'extended' })]);
    expect(granted).toEqual(deadline);
  });

  it('a node that sends no deadline_at: no deadline here, the handler runs past its lease unaborted and its result is sent', async () => {
    const release = gate();
    let context: TaskContext | undefined;
    const { w, conn } = await welcomedSocket({
      handler: async (ctx) => {
        context = ctx;
        await release.promise;
        return 'late';
      },
    });
    const leaseEnds = inMs(200); // nothing may take it for a deadline
    const t = task({ lease_expires_at: leaseEnds.toISOString() });
    conn.push(t);
    await until(() => context !== undefined, 'the handler started');
    expect(context?.deadline).toBeNull();
    await expect(context?.extendDeadline(5)).rejects.toThrow(/named no deadline/);
    await sleep(Math.max(0, leaseEnds.getTime() - Date.now()) + 200); // real time is the subject: past the lease's end
    expect(context?.signal.aborted).toBe(false);
    release.open();
    const frame = await conn.next('results');
    expect(frame.results).toEqual([
      expect.objectContaining({ task_id: t.task_id, status: 'succeeded', result: 'late' }),
    ]);
    expect(conn.all.filter((f) => f.type === 'progress')).toHaveLength(0);
    expect(w.stats).toMatchObject({ timedOut: 0, succeeded: 1 });
  });
});
