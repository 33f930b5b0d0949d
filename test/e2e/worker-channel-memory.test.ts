import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { RawWorker } from '../support/raw-worker.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * What one worker socket can make a node hold (security review N1): frames waiting behind a
 * slow one, results bigger than `maxResultBytes`, and answers to a worker that does not read
 * them. Each is measured by the node's own count of what its sockets hold
 * (`node.channel.frames`), not by the process's memory, which the test's own end of the sockets
 * shares.
 */
const FRAME_MAX = 4 * 1024 * 1024;
/** What a socket may hold read and not handled: twice the largest frame and 2 MiB. */
const QUEUE_CAP = 2 * FRAME_MAX + 2 * 1024 * 1024;

describe.each(BACKENDS)('the memory a worker socket can take, on %s', (backend) => {
  let c: TestCluster;
  const open: RawWorker[] = [];
  const gates: (() => void)[] = [];
  beforeAll(async () => {
    // A heartbeat far off: the pinger stays out of the way of a worker that stops reading.
    c = await startTestNode(backend, { workerFrameMaxBytes: FRAME_MAX, workerHeartbeatSeconds: 60 });
  });
  beforeEach(() => {
    c.node.channel.frames.peakQueuedBytes = 0;
    c.node.channel.frames.peakBufferedBytes = 0;
  });
  afterEach(() => {
    for (const open of gates.splice(0)) open();
    vi.restoreAllMocks();
    for (const w of open.splice(0)) w.terminate();
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  /** Holds every call of a worker-service method until the test lets it through. */
  const hold = (method: 'heartbeat' | 'complete'): { calls: () => number } => {
    let letThrough!: () => void;
    const gate = new Promise<void>((resolve) => (letThrough = resolve));
    gates.push(letThrough);
    const workers = c.node.services.workers;
    const original = (workers[method] as (...args: unknown[]) => Promise<unknown>).bind(workers);
    const spy = vi.spyOn(workers, method).mockImplementation((async (...args: unknown[]) => {
      await gate;
      return original(...args);
    }) as never);
    return { calls: () => spy.mock.calls.length };
  };
  const lease = (): { task_id: string; lease_token: string } => ({
    task_id: randomUUID(),
    lease_token: `lt2.${randomBytes(16).toString('hex')}`,
  });

  it("reads nothing after a result over maxResultBytes, behind a hello that resumes 1 000 leases (the review's case)", async () => {
    const resumes = hold('heartbeat');
    const worker = await RawWorker.connect(c.url);
    open.push(worker);
    worker.send({
      type: 'hello',
      worker_id: `w-${randomUUID()}`,
      task_types: [uniqueType('n1-hello')],
      credits: 0,
      resume: Array.from({ length: 1_000 }, lease),
    });
    await eventually(() => (resumes.calls() > 0 ? true : undefined));
    // Six frames of 3.4 MiB without waiting, each holding a result of 450 000 objects.
    const big = JSON.stringify({
      type: 'results',
      results: [{ ...lease(), status: 'succeeded', result: Array.from({ length: 450_000 }, () => ({ a: 1 })) }],
    });
    for (let i = 0; i < 6; i++) worker.send(big);
    const frames = c.node.channel.frames;
    // Either the node stopped reading this socket, or it read everything.
    await eventually(() => (frames.paused > 0 || frames.queuedBytes >= 6 * big.length ? true : undefined));
    expect(frames.peakQueuedBytes).toBeLessThanOrEqual(QUEUE_CAP);
    for (const letThrough of gates.splice(0)) letThrough();
    const error = await worker.next('error');
    expect(error.error.code).toBe('validation_failed');
    expect(error.error.message).toMatch(/results\[0\]\.result.*maxResultBytes/);
    expect((await worker.closed).code).toBe(1008);
    expect(frames.peakQueuedBytes).toBeLessThanOrEqual(QUEUE_CAP);
  });

  it('stops reading a socket whose frames wait behind a slow one, and handles them all once it is done', async () => {
    const type = uniqueType('n1-queue');
    const { worker } = await RawWorker.hello(c.url, { worker_id: `w-${randomUUID()}`, task_types: [type], credits: 1 });
    open.push(worker);
    const [id] = (
      await api<{ tasks: { task_id: string }[] }>(c.url, 'POST', '/api/tasks/batch', { tasks: [{ task_type: type }] })
    ).body.tasks.map((t) => t.task_id);
    const [task] = await worker.received(1);
    const results = hold('complete');
    worker.send({ type: 'results', results: [{ task_id: id, lease_token: task!.lease_token, status: 'succeeded' }] });
    await eventually(() => (results.calls() > 0 ? true : undefined));
    // Forty valid frames of 1 MiB (sixteen results of 60 KiB each, for leases this socket does not hold).
    const frame = (): string =>
      JSON.stringify({
        type: 'results',
        results: Array.from({ length: 16 }, () => ({ ...lease(), status: 'succeeded', result: 'x'.repeat(60_000) })),
      });
    const sent = Array.from({ length: 40 }, frame);
    for (const f of sent) worker.send(f);
    const total = sent.reduce((n, f) => n + f.length, 0);
    const frames = c.node.channel.frames;
    await eventually(() => (frames.paused > 0 || frames.queuedBytes >= total ? true : undefined));
    expect(frames.peakQueuedBytes).toBeLessThanOrEqual(QUEUE_CAP);
    for (const letThrough of gates.splice(0)) letThrough();
    // Slowed down, not refused: every frame is answered and the socket stays open.
    await worker.until(
      () => (worker.frames.filter((f) => f.type === 'acks').length === 41 ? true : undefined),
      '41 acks frames',
      30_000,
    );
    expect(worker.ws.readyState).toBe(worker.ws.OPEN);
    expect(frames.peakQueuedBytes).toBeLessThanOrEqual(QUEUE_CAP);
    expect((await api<{ status: string }>(c.url, 'GET', `/api/tasks/${id}`)).body.status).toBe('succeeded');
  });

  it('refuses (1008) a socket that had more than 1 000 frames read and waiting when the node stopped reading it', async () => {
    const resumes = hold('heartbeat');
    const worker = await RawWorker.connect(c.url);
    open.push(worker);
    worker.send({
      type: 'hello',
      worker_id: `w-${randomUUID()}`,
      task_types: [uniqueType('n1-count')],
      credits: 0,
      resume: [lease()],
    });
    await eventually(() => (resumes.calls() > 0 ? true : undefined));
    // Tiny frames, thousands to a read: the node stops reading after a few, but what one read
    // brought in is more than a socket may hold.
    for (let i = 0; i < 5_000; i++) worker.send({ type: 'goodbye' });
    const error = await worker.next('error');
    expect(error.error).toMatchObject({ code: 'payload_too_large' });
    expect(error.error.message).toMatch(/more than 1000 frames/);
    expect(await worker.closed).toMatchObject({ code: 1008 });
  });

  it('stops reading a worker that does not read its acks, past one frame of them waiting to be written', async () => {
    const { worker } = await RawWorker.hello(c.url, {
      worker_id: `w-${randomUUID()}`,
      task_types: [uniqueType('n1-acks')],
      credits: 0,
    });
    open.push(worker);
    worker.ws.pause(); // reads nothing from here on
    // 300 frames of 1 000 results for leases it does not hold: each answered by ~230 KB of acks.
    const frame = JSON.stringify({
      type: 'results',
      results: Array.from({ length: 1_000 }, () => ({ ...lease(), status: 'succeeded' })),
    });
    for (let i = 0; i < 300; i++) worker.send(frame);
    const frames = c.node.channel.frames;
    await eventually(() => (frames.paused > 0 || frames.peakBufferedBytes > 4 * FRAME_MAX ? true : undefined), 30_000);
    // What waits to be written stops near one frame past the bound: the frame that crossed it.
    expect(frames.peakBufferedBytes).toBeLessThanOrEqual(FRAME_MAX + 1024 * 1024);
  });
});
