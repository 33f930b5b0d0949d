import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ClaimedTask } from '../../src/domain/model.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { RawWorker } from '../support/raw-worker.js';
import { uniqueType } from '../support/tasks.js';

/**
 * The channel claims for all the sockets of a task type together: one take and one claim
 * statement per event-loop turn, whose rows each name their socket's worker, split among the
 * sockets by their credits (issue 15, docs/decisions/0012-channel-claims.md).
 */
describe.each(BACKENDS)('claims of the worker channel on %s', (backend) => {
  let c: TestCluster;
  const open: RawWorker[] = [];
  beforeAll(async () => {
    // One partition: a batch submitted at once reaches the ready queue in one push (or very
    // few), so every socket is claimed for in the same turn.
    c = await startTestNode(backend, { partitions: 1 });
  });
  afterAll(async () => {
    for (const w of open) w.terminate();
    await c?.cleanup();
  });

  it('serves many sockets of one type with one claim statement per turn, each within its credits', async () => {
    const type = uniqueType('grouped');
    const sockets = 6;
    const credits = 5;
    const workers: { id: string; worker: RawWorker }[] = [];
    for (let i = 0; i < sockets; i++) {
      const id = `w-${i}-${randomUUID()}`;
      const { worker } = await RawWorker.hello(c.url, { worker_id: id, task_types: [type], credits });
      open.push(worker);
      workers.push({ id, worker });
    }
    // Every statement that claims, through either entry point of the store, with the
    // workers its rows name.
    const tasks = c.node.backend.tasks;
    const statements: { workers: Set<string>; claimed: number }[] = [];
    const record = (workerIds: readonly string[]) => (claimed: ClaimedTask[]) => {
      if (claimed.length > 0) statements.push({ workers: new Set(workerIds), claimed: claimed.length });
      return claimed;
    };
    const claim = tasks.claim.bind(tasks);
    const claimForWorkers = tasks.claimForWorkers.bind(tasks);
    const spies = [
      vi
        .spyOn(tasks, 'claim')
        .mockImplementation((ids, workerId, nowMs) => claim(ids, workerId, nowMs).then(record([workerId]))),
      vi
        .spyOn(tasks, 'claimForWorkers')
        .mockImplementation((ids, workerIds, nowMs) => claimForWorkers(ids, workerIds, nowMs).then(record(workerIds))),
    ];
    try {
      const res = await api(c.url, 'POST', '/api/tasks/batch', {
        tasks: Array.from({ length: sockets * credits }, () => ({ task_type: type })),
      });
      expect(res.status).toBe(201);
      for (const { worker } of workers) await worker.received(credits);
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
    // Each socket got exactly what it granted: the credits were split, never passed.
    for (const { worker } of workers) expect(worker.tasks).toHaveLength(credits);
    const ids = workers.flatMap(({ worker }) => worker.tasks.map((t) => t.task_id));
    expect(new Set(ids).size).toBe(sockets * credits);
    // Fewer statements than sockets, and one of them claimed for several sockets at once;
    // a claim per socket would take at least one statement each.
    expect(statements.reduce((n, s) => n + s.claimed, 0)).toBe(sockets * credits);
    expect(statements.length).toBeLessThan(sockets);
    expect(Math.max(...statements.map((s) => s.workers.size))).toBeGreaterThan(1);
    // Each task is recorded as claimed by the worker of the socket it was pushed to.
    for (const { id, worker } of workers) {
      const rows = await c.sql<{ worker_id: string }>('SELECT worker_id FROM tasks WHERE id = ANY($1::uuid[])', [
        worker.tasks.map((t) => t.task_id),
      ]);
      expect(rows.map((r) => r.worker_id)).toEqual(worker.tasks.map(() => id));
    }
  });

  // A socket that holds many credits keeps a few back from a claim for a second one (decision
  // 0043), but not while the queue is deep: its last claim filled, so the next takes all its
  // credit. Kept back there, a drain's claims came in halves (W2: 350–371 results frames, not 200).
  it('claims all of its credit while its claims keep filling', async () => {
    const type = uniqueType('deep');
    const credits = 1000;
    for (let i = 0; i < 2; i++) {
      const batch = await api(c.url, 'POST', '/api/tasks/batch', {
        tasks: Array.from({ length: 650 }, () => ({ task_type: type })),
      });
      expect(batch.status).toBe(201);
    }
    const take = vi.spyOn(c.node.backend.ready, 'take');
    try {
      const { worker } = await RawWorker.hello(c.url, { worker_id: `w-${randomUUID()}`, task_types: [type], credits });
      open.push(worker);
      // Its credit runs out only by a claim that took all it asked for.
      await worker.received(credits);
      const before = take.mock.calls.length;
      worker.send({ type: 'credit', n: 200 });
      await worker.received(credits + 200);
      expect(take.mock.calls.slice(before).map((call) => call[1])).toEqual([200]);
    } finally {
      take.mockRestore();
    }
  });

  // A socket with credit to spare gets a second claim while its first is still in Postgres
  // (`CLAIMS_IN_FLIGHT`, decision 0043): a task pushed meanwhile does not wait for the slow
  // claim to end. The first claim is held until the second task has reached the worker; with
  // one claim in flight per socket the second task would wait behind it, and this would time out.
  it('claims a task pushed while the first claim is slow, within the credits', async () => {
    const type = uniqueType('second-claim');
    const credits = 200;
    const { worker } = await RawWorker.hello(c.url, { worker_id: `w-${randomUUID()}`, task_types: [type], credits });
    open.push(worker);
    const tasks = c.node.backend.tasks;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let first = true;
    const claim = tasks.claim.bind(tasks);
    const spy = vi.spyOn(tasks, 'claim').mockImplementation(async (ids, workerId, nowMs, grants) => {
      const claimed: ClaimedTask[] = await claim(ids, workerId, nowMs, grants);
      if (first && claimed.length > 0) {
        first = false;
        await held; // the first claim that found something stays in flight
      }
      return claimed;
    });
    try {
      const one = await api(c.url, 'POST', '/api/tasks', { task_type: type });
      expect(one.status).toBe(201);
      await vi.waitFor(() => expect(first).toBe(false), { timeout: 10_000 });
      // Credit alone starts no second claim (a drain's claims would come in pairs of half the
      // size): the ready queue is not even asked while the first claim is in flight.
      const take = vi.spyOn(c.node.backend.ready, 'take');
      worker.send({ type: 'credit', n: 10 });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(take).not.toHaveBeenCalled();
      take.mockRestore();
      const two = await api(c.url, 'POST', '/api/tasks', { task_type: type });
      expect(two.status).toBe(201);
      const [got] = await worker.received(1);
      expect(got?.task_id).toBe((two.body as { task_id: string }).task_id);
      release();
      await worker.received(2);
      expect(new Set(worker.tasks.map((t) => t.task_id)).size).toBe(2);
    } finally {
      release();
      spy.mockRestore();
    }
  });
});
