import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { RawWorker } from '../support/raw-worker.js';
import { uniqueType } from '../support/tasks.js';
import { eventually } from '../support/waits.js';

/**
 * The worker channel and the API keys that open its sockets: a revoked key's sockets are
 * closed within the keys' re-read, their leases handed back (security review N2); a worker id
 * is bound to the key whose socket holds it (N10).
 */
const ADMIN = 'an-admin-key-for-the-channel-key-tests';
const bearer = (secret: string): Record<string, string> => ({ authorization: `Bearer ${secret}` });

describe.each(BACKENDS)('worker sockets and API keys, on %s', (backend) => {
  let c: TestCluster;
  const open: RawWorker[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend, { adminToken: ADMIN, safetyNetGraceSeconds: 60 });
  });
  afterEach(() => {
    for (const w of open.splice(0)) w.terminate();
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  const workKey = async (name: string): Promise<{ id: string; secret: string }> => {
    const made = await api<{ token_id: string; token: string }>(
      c.url,
      'POST',
      '/admin/tokens',
      { name, scopes: ['work'] },
      bearer(ADMIN),
    );
    expect(made.status).toBe(201);
    return { id: made.body.token_id, secret: made.body.token };
  };
  const connect = async (secret: string, workerId: string, type: string, credits: number): Promise<RawWorker> => {
    const worker = await RawWorker.connect(c.url, bearer(secret));
    open.push(worker);
    worker.send({ type: 'hello', worker_id: workerId, task_types: [type], credits });
    return worker;
  };
  const submit = async (type: string, payload: unknown): Promise<string> => {
    const res = await api<{ task_id: string }>(
      c.url,
      'POST',
      '/api/tasks',
      { task_type: type, payload },
      bearer(ADMIN),
    );
    expect(res.status).toBe(201);
    return res.body.task_id;
  };
  const task = async (id: string) =>
    (await api<{ status: string; attempts: number }>(c.url, 'GET', `/api/tasks/${id}`, undefined, bearer(ADMIN))).body;

  it("refuses a hello for a worker id that another key's socket holds, and lets the same key's newer socket take it", async () => {
    const type = uniqueType('bound');
    const workerId = `w-${randomUUID()}`;
    const owner = await workKey('owner');
    const first = await connect(owner.secret, workerId, type, 1);
    await first.next('welcome');
    // Another key names the same worker id: refused, and the holder keeps its socket.
    const intruder = await connect((await workKey('intruder')).secret, workerId, type, 5);
    const error = await intruder.next('error');
    expect(error.error.code).toBe('forbidden');
    expect(error.error.message).toMatch(/worker_id.*another API key/);
    expect((await intruder.closed).code).toBe(1008);
    const id = await submit(type, {});
    expect((await first.received(1))[0]?.task_id).toBe(id);
    expect(first.ws.readyState).toBe(first.ws.OPEN);
    // The same key's newer socket takes its place, as before.
    const second = await connect(owner.secret, workerId, type, 0);
    await second.next('welcome');
    expect((await first.closed).code).toBe(4001);
  });

  for (const how of ['through DELETE /admin/tokens', 'by another node (the periodic re-read)'] as const) {
    it(`closes the sockets of a key revoked ${how} within a second, pushes them nothing more, and hands their leases back`, async () => {
      const type = uniqueType('revoke');
      const key = await workKey('leaked');
      const revoked = await connect(key.secret, `w-${randomUUID()}`, type, 2);
      await revoked.next('welcome');
      const held = await submit(type, { secret: 'before revocation' });
      await revoked.received(1);
      // Another worker, of a key still live, waits with credit.
      const other = await connect((await workKey('other')).secret, `w-${randomUUID()}`, type, 0);
      await other.next('welcome');
      other.send({ type: 'credit', n: 2 });

      const pushedBefore = revoked.tasks.length;
      if (how === 'through DELETE /admin/tokens') {
        expect((await api(c.url, 'DELETE', `/admin/tokens/${key.id}`, undefined, bearer(ADMIN))).status).toBe(200);
      } else {
        // As a revoke on another node reaches this one: in the table, seen at the next re-read.
        expect(await c.node.backend.apiKeys.revoke(key.id)).toBe(true);
      }
      // Through the API the node knows at once; a revoke elsewhere is known at the next re-read,
      // so there the task comes once the socket is closed.
      const viaApi = how === 'through DELETE /admin/tokens';
      const after = viaApi ? await submit(type, { secret: 'after revocation' }) : null;
      let closedWith: { code: number; reason: string } | undefined;
      void revoked.closed.then((v) => (closedWith = v));
      const closed = await eventually(() => closedWith, 1_500, 'the socket closed');
      const later = after ?? (await submit(type, { secret: 'after revocation' }));
      expect(closed).toEqual({ code: 1008, reason: 'key_revoked' });
      expect(revoked.frames.find((f) => f.type === 'error')).toMatchObject({ error: { code: 'unauthorized' } });
      expect(revoked.tasks).toHaveLength(pushedBefore);
      // The lease it held went back, its attempt not counted; both tasks reach the other worker.
      await eventually(() => (other.tasks.length === 2 ? true : undefined), 1_000, 'both tasks at the other worker');
      expect(other.tasks.map((t) => [t.task_id, t.attempt]).sort()).toEqual(
        [
          [held, 1],
          [later, 1],
        ].sort(),
      );
      expect(await task(held)).toMatchObject({ status: 'running', attempts: 1 });
    });
  }
});

describe.each(BACKENDS)('a node that begins to ask for keys, on %s', (backend) => {
  let c: TestCluster;
  afterAll(async () => {
    await c?.cleanup();
  });

  it('closes the sockets opened without a key when the first key is made, and hands their leases back', async () => {
    c = await startTestNode(backend, { safetyNetGraceSeconds: 60 });
    const type = uniqueType('keyless');
    const { worker } = await RawWorker.hello(c.url, { worker_id: `w-${randomUUID()}`, task_types: [type], credits: 1 });
    const submitted = await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', { task_type: type });
    const [held] = await worker.received(1);
    expect(held!.task_id).toBe(submitted.body.task_id);

    // Anyone on the machine could make the first key; from then on, keys are asked for everywhere.
    const made = await api<{ token: string }>(c.url, 'POST', '/admin/tokens', {
      name: 'first',
      scopes: ['admin', 'read'],
    });
    expect(made.status).toBe(201);
    const closed = await Promise.race([
      worker.closed,
      // not a wait: the bound on how long the socket may stay open after the key was made
      new Promise((_, reject) =>
        setTimeout(() => reject(new Error('still open 5 s after the first key was made')), 5_000),
      ),
    ]);
    expect(closed).toEqual({ code: 1008, reason: 'key_required' });
    const key = { authorization: `Bearer ${made.body.token}` };
    // The lease it held went back to its queue at once, its attempt not counted.
    const back = await eventually(async () => {
      const t = (
        await api<{ status: string; attempts: number }>(
          c.url,
          'GET',
          `/api/tasks/${submitted.body.task_id}`,
          undefined,
          key,
        )
      ).body;
      return t.status === 'ready' ? t : undefined;
    }, 2_000);
    expect(back.attempts).toBe(0);
  });
});
