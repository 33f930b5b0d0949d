/**
 * SnapshotStore conformance: fenced ownership of actor state. Runs against Postgres and PGlite:
 * the shared suite the in-memory double also passes (test/runtime/snapshot-store-conformance.ts,
 * `owners()` included), then what only the SQL store shows (rows as read back, JSON quoting).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isWheelhouseError } from '../../src/lib/errors.js';
import type { SnapshotStore } from '../../src/runtime/snapshots.js';
import { SqlSnapshotStore } from '../../src/store/snapshot-store.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { T0 } from '../support/tasks.js';
import { describeSnapshotStoreConformance } from '../runtime/snapshot-store-conformance.js';

describe.each(sqlBackends)('SnapshotStore on $name', ({ name, open }) => {
  let testDb: TestDb;
  let store: SnapshotStore;
  let n = 0;
  /** A key no other test uses. */
  const freshKey = () => `key-${++n}`;

  beforeAll(async () => {
    testDb = await open();
    store = new SqlSnapshotStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  // One database for the file; each shared test gets kinds of its own (`shared-<n>-…`).
  describeSnapshotStoreConformance(`SqlSnapshotStore on ${name}`, async () => ({
    store: new SqlSnapshotStore(testDb.db),
    kindPrefix: `shared-${++n}-`,
    close: async () => {},
  }));

  async function staleEpochOf(promise: Promise<unknown>): Promise<boolean> {
    const error = await promise.then(
      () => null,
      (e: unknown) => e,
    );
    return isWheelhouseError(error, 'stale_epoch');
  }

  it('creates a row at epoch 1 on first acquire', async () => {
    const key = freshKey();
    expect(await store.read('wheel', key)).toBeNull();
    expect(await store.acquire('wheel', key, 'node-a', T0)).toEqual({ epoch: 1, version: 0, state: null });
    expect(await store.read('wheel', key)).toEqual({
      kind: 'wheel',
      key,
      ownerNode: 'node-a',
      epoch: 1,
      version: 0,
      state: null,
      updatedMs: T0,
    });
  });

  it('saves under the held epoch, bumping the version', async () => {
    const key = freshKey();
    const { epoch } = await store.acquire('wheel', key, 'node-a', T0);
    const state = {
      cursorMs: T0,
      slots: [
        [1, 'a'],
        [2, 'b'],
      ],
      note: 'quote " and \\ and ✓',
      nothing: null,
    };
    expect(await store.save('wheel', key, epoch, state, T0 + 10)).toBe(1);
    expect(await store.save('wheel', key, epoch, { ...state, cursorMs: T0 + 10 }, T0 + 20)).toBe(2);
    expect(await store.read('wheel', key)).toMatchObject({
      version: 2,
      state: { ...state, cursorMs: T0 + 10 },
      updatedMs: T0 + 20,
    });
  });

  it('hands the row to a new owner at epoch + 1 with the last state, and fences the old one', async () => {
    const key = freshKey();
    const a = await store.acquire('lease', key, 'node-a', T0);
    await store.save('lease', key, a.epoch, { n: 1 }, T0 + 1);
    const b = await store.acquire('lease', key, 'node-b', T0 + 2);
    expect(b).toEqual({ epoch: a.epoch + 1, version: 1, state: { n: 1 } });

    expect(await staleEpochOf(store.save('lease', key, a.epoch, { n: 666 }, T0 + 3))).toBe(true);
    expect(await store.read('lease', key)).toMatchObject({ ownerNode: 'node-b', version: 1, state: { n: 1 } });
    expect(await store.save('lease', key, b.epoch, { n: 2 }, T0 + 4)).toBe(2);
  });

  it('refuses a save for a row that was never acquired', async () => {
    expect(await staleEpochOf(store.save('wheel', freshKey(), 1, {}, T0))).toBe(true);
  });

  it('gives concurrent acquirers distinct epochs', async () => {
    const key = freshKey();
    const acquired = await Promise.all(
      ['a', 'b', 'c', 'd', 'e'].map((node) => store.acquire('cron', key, `node-${node}`, T0)),
    );
    expect(acquired.map((x) => x.epoch).sort()).toEqual([1, 2, 3, 4, 5]);
    const winner = await store.read('cron', key);
    expect(winner!.epoch).toBe(5);
    const losers = acquired.filter((x) => x.epoch !== 5);
    for (const loser of losers) expect(await staleEpochOf(store.save('cron', key, loser.epoch, {}, T0))).toBe(true);
  });

  it('releases only under the held epoch', async () => {
    const key = freshKey();
    const a = await store.acquire('dag', key, 'node-a', T0);
    const b = await store.acquire('dag', key, 'node-b', T0 + 1);
    await store.release('dag', key, a.epoch, T0 + 2);
    expect(await store.read('dag', key)).toMatchObject({ ownerNode: 'node-b', epoch: b.epoch });
    await store.release('dag', key, b.epoch, T0 + 3);
    expect(await store.read('dag', key)).toMatchObject({ ownerNode: null, epoch: b.epoch, updatedMs: T0 + 3 });
    expect((await store.acquire('dag', key, 'node-c', T0 + 4)).epoch).toBe(b.epoch + 1);
  });

  it('keeps kinds apart', async () => {
    const key = freshKey();
    await store.acquire('wheel', key, 'node-a', T0);
    expect((await store.acquire('cron', key, 'node-a', T0)).epoch).toBe(1);
  });
});
