/**
 * SnapshotStore conformance: fenced ownership of actor state. Runs against Postgres and PGlite:
 * the shared suite the in-memory double also passes (test/runtime/snapshot-store-conformance.ts,
 * `owners()` included), then what only the SQL store shows (rows as read back, JSON quoting).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isWheelhouseError } from '../../src/lib/errors.js';
import type { Db } from '../../src/store/db.js';
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

  /** The database, counting the statements run under each name. */
  function counting(db: Db): { db: Db; counts: Map<string, number> } {
    const counts = new Map<string, number>();
    const query: Db['query'] = (text, params, statement) => {
      const name = statement ?? 'unnamed';
      counts.set(name, (counts.get(name) ?? 0) + 1);
      return db.query(text, params, statement);
    };
    return { db: Object.assign(Object.create(db) as Db, { query }), counts };
  }

  it('takes the rows of the acquirers of one turn in one statement, each at its own epoch + 1', async () => {
    const { db, counts } = counting(testDb.db);
    const batched = new SqlSnapshotStore(db);
    const keys = Array.from({ length: 300 }, () => freshKey());
    await store.acquire('limit', keys[7]!, 'node-a', T0); // one row exists: it is taken over at epoch 2
    const acquired = await Promise.all(keys.map((key) => batched.acquire('limit', key, 'node-b', T0 + 1)));
    expect(acquired.map((a) => a.epoch)).toEqual(keys.map((_, i) => (i === 7 ? 2 : 1)));
    expect(counts.get('wh_snapshot_acquire_many')).toBe(1);
    expect(await store.read('limit', keys[7]!)).toMatchObject({ ownerNode: 'node-b', epoch: 2, updatedMs: T0 + 1 });
  });

  it('runs a key acquired twice in one turn as two rounds, the later acquirer at the higher epoch', async () => {
    const { db, counts } = counting(testDb.db);
    const batched = new SqlSnapshotStore(db);
    const [a, b] = [freshKey(), freshKey()];
    const acquired = await Promise.all([
      batched.acquire('limit', a, 'node-a', T0),
      batched.acquire('limit', b, 'node-a', T0),
      batched.acquire('limit', a, 'node-b', T0 + 1),
      batched.acquire('limit', a, 'node-c', T0 + 2),
    ]);
    expect(acquired.map((x) => x.epoch)).toEqual([1, 1, 2, 3]);
    expect(counts.get('wh_snapshot_acquire_many')).toBe(3);
    expect(await store.read('limit', a)).toMatchObject({ ownerNode: 'node-c', epoch: 3 });
    expect(await staleEpochOf(store.save('limit', a, 2, {}, T0))).toBe(true);
  });

  it('releases the rows of one turn in one statement, each only under its held epoch', async () => {
    const { db, counts } = counting(testDb.db);
    const batched = new SqlSnapshotStore(db);
    const keys = Array.from({ length: 200 }, () => freshKey());
    const first = await Promise.all(keys.map((key) => store.acquire('limit', key, 'node-a', T0)));
    // Every tenth key has a newer owner: its old activation's release must leave it alone.
    const taken = keys.filter((_, i) => i % 10 === 0);
    await Promise.all(taken.map((key) => store.acquire('limit', key, 'node-b', T0 + 1)));
    await Promise.all(keys.map((key, i) => batched.release('limit', key, first[i]!.epoch, T0 + 2)));
    expect(counts.get('wh_snapshot_release_many')).toBe(1);
    const owners = new Map((await store.owners('limit')).map((o) => [o.key, o]));
    for (const [i, key] of keys.entries()) {
      expect(owners.get(key)).toMatchObject(
        i % 10 === 0
          ? { ownerNode: 'node-b', epoch: 2, updatedMs: T0 + 1 }
          : { ownerNode: null, epoch: 1, updatedMs: T0 + 2 },
      );
    }
  });

  it('saves the snapshots of one turn in one statement, refusing only the saves whose epoch no longer holds', async () => {
    const { db, counts } = counting(testDb.db);
    const batched = new SqlSnapshotStore(db);
    const keys = Array.from({ length: 64 }, () => freshKey());
    const first = await Promise.all(keys.map((key) => store.acquire('wheel', key, 'node-a', T0)));
    // Every eighth key has a newer owner: its old activation's save is refused, the others land.
    const taken = keys.filter((_, i) => i % 8 === 0);
    await Promise.all(taken.map((key) => store.acquire('wheel', key, 'node-b', T0 + 1)));
    const saved = await Promise.all(
      keys.map((key, i) =>
        batched.save('wheel', key, first[i]!.epoch, { n: i }, T0 + 2).then(
          (version) => ({ version }),
          (error: unknown) => ({ stale: isWheelhouseError(error, 'stale_epoch') }),
        ),
      ),
    );
    expect(saved).toEqual(keys.map((_, i) => (i % 8 === 0 ? { stale: true } : { version: 1 })));
    expect(counts.get('wh_snapshot_save_many')).toBe(1);
    for (const [i, key] of keys.entries()) {
      expect(await store.read('wheel', key)).toMatchObject(
        i % 8 === 0 ? { ownerNode: 'node-b', epoch: 2, state: null } : { epoch: 1, version: 1, state: { n: i } },
      );
    }
  });

  it('runs a key saved twice in one turn as two rounds, in the order saved', async () => {
    const { db, counts } = counting(testDb.db);
    const batched = new SqlSnapshotStore(db);
    const key = freshKey();
    const { epoch } = await store.acquire('wheel', key, 'node-a', T0);
    const versions = await Promise.all([
      batched.save('wheel', key, epoch, { n: 1 }, T0 + 1),
      batched.save('wheel', key, epoch, { n: 2 }, T0 + 2),
    ]);
    expect(versions).toEqual([1, 2]);
    expect(counts.get('wh_snapshot_save_many')).toBe(2);
    expect(await store.read('wheel', key)).toMatchObject({ version: 2, state: { n: 2 }, updatedMs: T0 + 2 });
  });
});
