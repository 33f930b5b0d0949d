import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { RawWorker } from '../support/raw-worker.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * A thousand workers on one node: each is welcomed, the tasks go one to a socket within the
 * credit each granted, and one socket past `workerSocketsMax` is refused with an error frame.
 * Prints the memory each connection costs (both ends of the socket are in this process, so it
 * is an upper bound of the node's share).
 */
const SOCKETS = 1_000;

describe.each(BACKENDS)('a thousand worker sockets on one node, on %s', (backend) => {
  let c: TestCluster;
  const workers: RawWorker[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, { workerSocketsMax: SOCKETS, workerHeartbeatSeconds: 2 });
  });
  afterAll(async () => {
    for (const w of workers) w.terminate();
    await c?.cleanup();
  });

  it('holds them all, pushes one task to each socket that granted one, and refuses the next socket', async () => {
    const type = uniqueType('many');
    global.gc?.();
    const before = process.memoryUsage();
    for (let i = 0; i < SOCKETS; i += 100) {
      const batch = await Promise.all(
        Array.from({ length: 100 }, (_, j) =>
          RawWorker.hello(c.url, { worker_id: `w-${i + j}`, task_types: [type], credits: 1 }),
        ),
      );
      for (const { worker, welcome } of batch) {
        expect(welcome.type).toBe('welcome');
        workers.push(worker);
      }
    }
    global.gc?.();
    const after = process.memoryUsage();
    const perSocket = (bytes: number): string => `${((bytes / SOCKETS) | 0).toLocaleString('en')} B`;
    console.log(
      `[${backend}] ${SOCKETS} sockets (both ends in one process): heap ${perSocket(after.heapUsed - before.heapUsed)}, ` +
        `rss ${perSocket(after.rss - before.rss)}, external ${perSocket(after.external - before.external)} per connection`,
    );

    const extra = await RawWorker.connect(c.url);
    workers.push(extra);
    expect((await extra.next('error')).error.code).toBe('too_many_sockets');
    expect((await extra.closed).code).toBe(1013);

    const n = 200;
    const res = await api<{ tasks: { task_id: string }[] }>(c.url, 'POST', '/api/tasks/batch', {
      tasks: Array.from({ length: n }, () => ({ task_type: type })),
    });
    expect(res.status).toBe(201);
    const received = await eventually(
      () => {
        const count = workers.reduce((sum, w) => sum + w.tasks.length, 0);
        return count >= n ? count : undefined;
      },
      20_000,
      `${n} tasks pushed`,
      50,
    );
    expect(received).toBe(n);
    // One credit each: no socket was sent two.
    expect(Math.max(...workers.map((w) => w.tasks.length))).toBe(1);
    const ids = new Set(workers.flatMap((w) => w.tasks.map((t) => t.task_id)));
    expect(ids.size).toBe(n);
  }, 120_000);
});
