import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { CLOSES, creditOnly, midResult, pushedNoResult, type CloseTestNodes } from '../support/channel-close.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { RawWorker } from '../support/raw-worker.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * The channel strands nothing (issue 27, item 1), on one node: a worker socket closed in each
 * state — credit granted and nothing pushed, tasks pushed and no result sent, a result sent and
 * the socket closed before its ack — by a plain close, a close whose handshake the worker never
 * finishes, and `goodbye` then close. Within a second each task is recorded or back in its
 * queue with its attempt not counted, and handed to a second worker with credit.
 */
describe.each(BACKENDS)('a worker socket that closes strands nothing, on %s', (backend) => {
  let c: TestCluster;
  const n: CloseTestNodes = { closing: '', other: '', api: '', opened: [], claimedFor: [] };
  beforeAll(async () => {
    // Leases of a minute and a safety net of a minute: nothing but the hand-back can move a
    // task within the test's second.
    c = await startTestNode(backend, { safetyNetGraceSeconds: 60 });
    n.closing = n.other = n.api = c.url;
    c.node.events.on('task:claimed', (e) => n.claimedFor?.push(e.workerId));
  });
  afterEach(() => {
    for (const w of n.opened.splice(0)) w.terminate();
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  for (const how of CLOSES) {
    it(`claims nothing for a socket closed (${how}) with credit and nothing pushed`, () => creditOnly(n, how));
    it(`hands back at once the tasks pushed to a socket closed (${how}) with no result`, () => pushedNoResult(n, how));
    it(`records the result sent before a close (${how}) and hands back the rest`, () => midResult(n, how));
  }

  it('claims nothing for a socket its worker closed while an earlier frame is still being handled', async () => {
    const type = uniqueType('close-busy');
    const firstId = `w-${randomUUID()}`;
    const { worker: first } = await RawWorker.hello(c.url, { worker_id: firstId, task_types: [type], credits: 3 });
    n.opened.push(first);
    const submit = async (count: number): Promise<string[]> =>
      (
        await api<{ tasks: { task_id: string }[] }>(c.url, 'POST', '/api/tasks/batch', {
          tasks: Array.from({ length: count }, () => ({ task_type: type })),
        })
      ).body.tasks.map((t) => t.task_id);
    await submit(1);
    const [task] = await first.received(1);
    // The result is held on its way to the store: the session lives on, with two credits,
    // until that frame is handled, though its socket is closing.
    let recorded!: () => void;
    const gate = new Promise<void>((resolve) => (recorded = resolve));
    const workers = c.node.services.workers;
    const complete = workers.complete.bind(workers);
    const spy = vi.spyOn(workers, 'complete').mockImplementation(async (results) => {
      await gate;
      return complete(results);
    });
    try {
      first.send({
        type: 'results',
        results: [{ task_id: task!.task_id, lease_token: task!.lease_token, status: 'succeeded' }],
      });
      await eventually(() => (spy.mock.calls.length > 0 ? true : undefined));
      const { worker: second } = await RawWorker.hello(c.url, {
        worker_id: `w-${randomUUID()}`,
        task_types: [type],
        credits: 2,
      });
      n.opened.push(second);
      await first.closeHeld();
      const claimsBefore = n.claimedFor!.length;
      const ids = await submit(2);
      await eventually(() => (second.tasks.length === 2 ? true : undefined), 1_000, 'both tasks at the second worker');
      expect(second.tasks.map((t) => t.task_id).sort()).toEqual([...ids].sort());
      expect(n.claimedFor!.slice(claimsBefore)).not.toContain(firstId);
    } finally {
      recorded();
      spy.mockRestore();
    }
    await eventually(async () =>
      (await api<{ status: string }>(c.url, 'GET', `/api/tasks/${task!.task_id}`)).body.status === 'succeeded'
        ? true
        : undefined,
    );
  });
});
