/**
 * TaskStore conformance, lease tokens: what a claim stores of its token, and that every report
 * (heartbeat, result) is a compare-and-set on that attempt's digest. Runs against Postgres and
 * PGlite.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlTaskStore } from '../../src/store/task-store.js';
import type { ClaimedTask, Completion, NewTask } from '../../src/domain/model.js';
import type { TaskStore } from '../../src/store/types.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { BACKOFF, T0, makeTask, makeTasks, nextId, tokenDigest } from '../support/tasks.js';

const sha256 = (text: string): Buffer => createHash('sha256').update(text).digest();

describe.each(sqlBackends)('TaskStore on $name: lease tokens', ({ open }) => {
  let testDb: TestDb;
  let store: TaskStore;

  beforeAll(async () => {
    testDb = await open();
    store = new SqlTaskStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  async function running(overrides: Partial<NewTask> = {}, atMs = T0): Promise<ClaimedTask> {
    const task = makeTask(overrides);
    await store.submit([task], T0);
    const [claimed] = await store.claim([task.id], 'worker-1', atMs);
    if (claimed === undefined) throw new Error('claim failed');
    return claimed;
  }

  /** The stored digest, as bytes (PGlite answers a Uint8Array, pg a Buffer), or null. */
  async function storedDigest(taskId: string): Promise<Buffer | null> {
    const { rows } = await testDb.db.query<{ lease_token_hash: Uint8Array | null }>(
      'SELECT lease_token_hash FROM tasks WHERE id = $1',
      [taskId],
    );
    const stored = rows[0]?.lease_token_hash ?? null;
    return stored === null ? null : Buffer.from(stored);
  }

  const result = (taskId: string, leaseToken: string, outcome: Completion['outcome'] = 'succeeded'): Completion => ({
    taskId,
    tokenDigest: tokenDigest(leaseToken),
    outcome,
    error: outcome === 'failed' ? 'boom' : null,
    retryable: true,
  });

  it('gives every claimed task a token of its own and stores only its SHA-256 digest', async () => {
    const tasks = makeTasks(50);
    await store.submit(tasks, T0);
    const claimed = await store.claim(
      tasks.map((t) => t.id),
      'worker-1',
      T0,
    );
    expect(claimed).toHaveLength(50);
    expect(new Set(claimed.map((c) => c.leaseToken)).size).toBe(50);
    for (const c of claimed) {
      expect(c.leaseToken).toMatch(/^lt2\.[0-9a-f]{32}$/);
      expect(await storedDigest(c.id)).toEqual(sha256(c.leaseToken));
    }
    // The token itself is nowhere in the row.
    const { rows } = await testDb.db.query<{ row: string }>('SELECT t::text AS row FROM tasks t WHERE id = $1', [
      claimed[0]!.id,
    ]);
    expect(rows[0]!.row).not.toContain(claimed[0]!.leaseToken.slice(4));
  });

  it('pairs each token with its own task whatever order the ids come in', async () => {
    const tasks = makeTasks(30);
    await store.submit(tasks, T0);
    const ids = tasks.map((t) => t.id).reverse();
    ids.splice(5, 0, 'not-a-uuid', nextId(), ids[3]!);
    const claimed = await store.claim(ids, 'worker-1', T0);
    expect(claimed.map((c) => c.id).sort()).toEqual(tasks.map((t) => t.id).sort());
    for (const c of claimed) expect(await store.heartbeat(c.id, tokenDigest(c.leaseToken), T0 + 1)).not.toBeNull();
  });

  it('reads the running lease with its digest, and nothing for a task not running', async () => {
    const c = await running({ timeoutSeconds: 40 });
    const lease = await store.runningLease(c.id);
    expect(lease).toMatchObject({ version: c.version, leaseExpiresMs: T0 + 40_000 });
    expect(Buffer.from(lease!.tokenDigest!)).toEqual(sha256(c.leaseToken));
    const pending = makeTask();
    await store.submit([pending], T0);
    expect(await store.runningLease(pending.id)).toBeNull();
    expect(await store.runningLease(nextId())).toBeNull();
    expect(await store.runningLease('garbage')).toBeNull();
  });

  it("refuses another task's token, and a batch records its other results", async () => {
    const a = await running();
    const b = await running();
    const good = await running();
    const transitions = await store.complete(
      [
        result(a.id, b.leaseToken), // b's valid token, on a
        { ...result(b.id, b.leaseToken), tokenDigest: Buffer.alloc(32) }, // the right shape, no lease's
        { ...result(nextId(), b.leaseToken) }, // no such task
        result(good.id, good.leaseToken),
      ],
      T0 + 10,
      BACKOFF,
    );
    expect(transitions.map((t) => [t.taskId, t.status])).toEqual([[good.id, 'succeeded']]);
    // a and b are untouched: still running, their own workers' tokens still good.
    expect(await store.get(a.id)).toMatchObject({ status: 'running', version: a.version });
    expect(await store.heartbeat(a.id, tokenDigest(b.leaseToken), T0 + 20)).toBeNull();
    expect(await store.heartbeat(b.id, tokenDigest(b.leaseToken), T0 + 20)).not.toBeNull();
    expect(await store.complete([result(a.id, a.leaseToken)], T0 + 30, BACKOFF)).toHaveLength(1);
  });

  it('records progress as a compare-and-set on the digest, the last of a batch winning', async () => {
    const a = await running();
    const b = await running();
    const pending = makeTask();
    await store.submit([pending], T0);
    const written = await store.progress(
      [
        { taskId: a.id, tokenDigest: tokenDigest(a.leaseToken), progress: { step: 1 } },
        { taskId: b.id, tokenDigest: tokenDigest(a.leaseToken), progress: 'forged' }, // a's token, on b
        { taskId: pending.id, tokenDigest: tokenDigest(a.leaseToken), progress: 'not running' },
        { taskId: 'garbage', tokenDigest: tokenDigest(a.leaseToken), progress: 1 },
        { taskId: a.id, tokenDigest: tokenDigest(a.leaseToken), progress: { step: 2 } },
      ],
      T0 + 5,
    );
    expect([...written]).toEqual([a.id]);
    expect(await store.get(a.id)).toMatchObject({ progress: { step: 2 }, progressMs: T0 + 5, version: a.version });
    expect(await store.get(b.id)).toMatchObject({ progress: null, progressMs: null });
    expect(await store.get(pending.id)).toMatchObject({ progress: null });
    // The lease is left as it was.
    expect((await store.runningLease(a.id))?.leaseExpiresMs).toBe(a.leaseExpiresMs);
  });

  it("stores a success's result with the task, and only with a held lease", async () => {
    const a = await running();
    const refused = await store.complete(
      [{ ...result(a.id, `lt2.${'1'.repeat(32)}`), result: 'forged' }],
      T0 + 1,
      BACKOFF,
    );
    expect(refused).toHaveLength(0);
    expect((await store.get(a.id))?.result).toBeNull();
    await store.complete([{ ...result(a.id, a.leaseToken), result: { rows: [1, null, 'é'] } }], T0 + 2, BACKOFF);
    expect(await store.get(a.id)).toMatchObject({ status: 'succeeded', result: { rows: [1, null, 'é'] } });
    expect((await store.history(a.id, 10)).map((e) => [e.status, e.result])).toEqual([
      ['succeeded', { rows: [1, null, 'é'] }],
    ]);
    // A failure's result is not kept.
    const f = await running({ maxRetries: 0 });
    await store.complete([{ ...result(f.id, f.leaseToken, 'failed'), result: 'ignored' }], T0 + 3, BACKOFF);
    expect(await store.get(f.id)).toMatchObject({ status: 'failed', result: null });
  });

  it("refuses an earlier attempt's token once the task was claimed again", async () => {
    const first = await running({ maxRetries: 2 });
    const [retry] = await store.complete([result(first.id, first.leaseToken, 'failed')], T0 + 10, BACKOFF);
    expect(retry!.status).toBe('pending');
    expect(await storedDigest(first.id)).toBeNull();
    const [second] = await store.claim([first.id], 'worker-2', retry!.requeued!.dueMs);
    expect(second!.attempt).toBe(2);
    expect(second!.leaseToken).not.toBe(first.leaseToken);
    expect(await store.heartbeat(first.id, tokenDigest(first.leaseToken), T0 + 20_000)).toBeNull();
    expect(await store.complete([result(first.id, first.leaseToken)], T0 + 20_000, BACKOFF)).toEqual([]);
    expect(await store.complete([result(first.id, second!.leaseToken)], T0 + 20_000, BACKOFF)).toHaveLength(1);
  });

  it('forgets the digest when the attempt ends by expiry or hand-back', async () => {
    const expiring = await running({ timeoutSeconds: 1 });
    expect(await store.expireLease(expiring.id, expiring.version, T0 + 1_000, BACKOFF)).not.toBeNull();
    expect(await storedDigest(expiring.id)).toBeNull();
    expect(await store.heartbeat(expiring.id, tokenDigest(expiring.leaseToken), T0 + 1_001)).toBeNull();

    const handedBack = await running();
    expect(await store.release([{ taskId: handedBack.id, version: handedBack.version }], T0 + 5)).toHaveLength(1);
    expect(await storedDigest(handedBack.id)).toBeNull();
    expect(await store.complete([result(handedBack.id, handedBack.leaseToken)], T0 + 6, BACKOFF)).toEqual([]);
  });

  it('refuses every report on a claim made before tokens were random (no digest)', async () => {
    const legacy = await running();
    await testDb.db.query('UPDATE tasks SET lease_token_hash = NULL WHERE id = $1', [legacy.id]);
    expect((await store.runningLease(legacy.id))!.tokenDigest).toBeNull();
    expect(await store.heartbeat(legacy.id, tokenDigest(legacy.leaseToken), T0 + 1)).toBeNull();
    expect(await store.complete([result(legacy.id, legacy.leaseToken)], T0 + 1, BACKOFF)).toEqual([]);
    // Its lease still runs out the ordinary way.
    expect(await store.expireLease(legacy.id, legacy.version, legacy.leaseExpiresMs, BACKOFF)).not.toBeNull();
  });
});
