/**
 * MembershipStore conformance: joining, heartbeats, leaving and the live set, judged on the
 * database's clock. Runs against Postgres and PGlite. Heartbeats are aged by moving
 * `heartbeat_at` back in SQL, not by waiting.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlMembershipStore } from '../../src/store/membership-store.js';
import type { ClusterNode, MembershipStore } from '../../src/runtime/membership-store.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { eventually } from '../support/waits.js';

const TIMEOUT_MS = 5000;

describe.each(sqlBackends)('MembershipStore on $name', ({ name, open }) => {
  let testDb: TestDb;
  let store: MembershipStore;
  let n = 0;
  /** A prefix no other test uses: the table is shared by the file's tests. */
  const freshPrefix = () => `t${++n}-`;
  const ids = (nodes: ClusterNode[], prefix: string) =>
    nodes.map((node) => node.id).filter((id) => id.startsWith(prefix));

  beforeAll(async () => {
    testDb = await open();
    store = new SqlMembershipStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  /** Moves a node's last heartbeat `ms` into the past, as if it had stopped beating then. */
  async function ageHeartbeat(id: string, ms: number): Promise<void> {
    await testDb.db.query(
      `UPDATE cluster_nodes SET heartbeat_at = heartbeat_at - $2::float8 * interval '1 millisecond' WHERE id = $1`,
      [id, ms],
    );
  }

  async function dbNowMs(): Promise<number> {
    const { rows } = await testDb.db.query<{ ms: number }>(`SELECT round(date_part('epoch', now()) * 1000) AS ms`);
    return rows[0]!.ms;
  }

  it('joins as live, stamped with the database clock', async () => {
    const id = `${freshPrefix()}a`;
    const before = await dbNowMs();
    const node = await store.join({ id, address: 'http://10.0.0.1:7000' });
    const after = await dbNowMs();
    expect(node).toMatchObject({ id, address: 'http://10.0.0.1:7000', state: 'live' });
    expect(node.startedMs).toBe(node.heartbeatMs);
    expect(node.startedMs).toBeGreaterThanOrEqual(before - 1);
    expect(node.startedMs).toBeLessThanOrEqual(after + 1);
    expect(Number.isInteger(node.startedMs)).toBe(true);
    expect((await store.live(TIMEOUT_MS)).find((x) => x.id === id)).toEqual(node);
  });

  it('lists the live set in id order, the order JavaScript sorts into', async () => {
    const p = freshPrefix();
    const joined = [`${p}node-9`, `${p}B`, `${p}node-10`, `${p}a`, `${p}_x`];
    for (const id of joined) await store.join({ id, address: `http://${id}` });
    expect(ids(await store.live(TIMEOUT_MS), p)).toEqual([...joined].sort());
    expect(ids(await store.all(TIMEOUT_MS), p)).toEqual([...joined].sort());
  });

  it('heartbeats a live node and moves its heartbeat forward', async () => {
    const id = `${freshPrefix()}a`;
    const joined = await store.join({ id, address: 'a' });
    await ageHeartbeat(id, 1000);
    expect(await store.heartbeat(id, TIMEOUT_MS)).toBe(true);
    const [row] = (await store.all(TIMEOUT_MS)).filter((x) => x.id === id);
    expect(row!.heartbeatMs).toBeGreaterThanOrEqual(joined.heartbeatMs);
    expect(row!.startedMs).toBe(joined.startedMs);
    expect(row!.heartbeatAgeMs).toBeLessThan(1000);
  });

  it('refuses the heartbeat of an unknown node', async () => {
    expect(await store.heartbeat(`${freshPrefix()}ghost`, TIMEOUT_MS)).toBe(false);
    expect((await store.all(TIMEOUT_MS)).some((x) => x.id.endsWith('ghost'))).toBe(false);
  });

  it('takes a node out of the live set once its heartbeat is older than the timeout', async () => {
    const p = freshPrefix();
    await store.join({ id: `${p}a`, address: 'a' });
    await store.join({ id: `${p}b`, address: 'b' });
    await ageHeartbeat(`${p}b`, TIMEOUT_MS + 1000);
    expect(ids(await store.live(TIMEOUT_MS), p)).toEqual([`${p}a`]);
    // The same row under a longer timeout is still live: the timeout is the reader's choice.
    expect(ids(await store.live(TIMEOUT_MS * 10), p)).toEqual([`${p}a`, `${p}b`]);
    const b = (await store.all(TIMEOUT_MS)).find((x) => x.id === `${p}b`)!;
    expect(b).toMatchObject({ state: 'live', live: false });
    expect(b.heartbeatAgeMs).toBeGreaterThanOrEqual(TIMEOUT_MS + 1000);
  });

  it('refuses a late heartbeat of a node declared out, without reviving it', async () => {
    const id = `${freshPrefix()}a`;
    await store.join({ id, address: 'a' });
    await ageHeartbeat(id, TIMEOUT_MS + 1000);
    expect(await store.heartbeat(id, TIMEOUT_MS)).toBe(false);
    expect((await store.live(TIMEOUT_MS)).some((x) => x.id === id)).toBe(false);
  });

  it('leaves at once: out of the live set, heartbeats refused', async () => {
    const p = freshPrefix();
    await store.join({ id: `${p}a`, address: 'a' });
    await store.join({ id: `${p}b`, address: 'b' });
    await store.leave(`${p}a`);
    expect(ids(await store.live(TIMEOUT_MS), p)).toEqual([`${p}b`]);
    expect(await store.heartbeat(`${p}a`, TIMEOUT_MS)).toBe(false);
    expect((await store.all(TIMEOUT_MS)).find((x) => x.id === `${p}a`)).toMatchObject({ state: 'left', live: false });
    await store.leave(`${p}a`);
    await store.leave(`${p}nobody`);
    expect(ids(await store.all(TIMEOUT_MS), p)).toEqual([`${p}a`, `${p}b`]);
  });

  it('rejoins a node that left or was declared out as a new incarnation', async () => {
    const id = `${freshPrefix()}a`;
    const first = await store.join({ id, address: 'old' });
    await store.leave(id);
    const second = await store.join({ id, address: 'new' });
    expect(second).toMatchObject({ id, address: 'new', state: 'live' });
    expect(second.startedMs).toBeGreaterThan(first.startedMs);
    expect(await store.heartbeat(id, TIMEOUT_MS)).toBe(true);

    await ageHeartbeat(id, TIMEOUT_MS + 1000);
    const third = await store.join({ id, address: 'new' });
    expect(third.startedMs).toBeGreaterThan(second.startedMs);
    expect((await store.live(TIMEOUT_MS)).find((x) => x.id === id)).toEqual(third);
  });

  it('gives concurrent rejoins of one id distinct incarnations', async () => {
    const id = `${freshPrefix()}a`;
    const joins = await Promise.all([1, 2, 3, 4].map(() => store.join({ id, address: 'a' })));
    expect(new Set(joins.map((x) => x.startedMs)).size).toBe(4);
  });

  it('keeps a leaving (draining) node out of the live set while it still heartbeats', async () => {
    const p = freshPrefix();
    await store.join({ id: `${p}a`, address: 'a' });
    await testDb.db.query(`UPDATE cluster_nodes SET state = 'leaving' WHERE id = $1`, [`${p}a`]);
    expect(ids(await store.live(TIMEOUT_MS), p)).toEqual([]);
    expect(await store.heartbeat(`${p}a`, TIMEOUT_MS)).toBe(true);
    expect((await store.all(TIMEOUT_MS)).find((x) => x.id === `${p}a`)).toMatchObject({
      state: 'leaving',
      live: false,
    });
    await store.leave(`${p}a`);
    expect((await store.all(TIMEOUT_MS)).find((x) => x.id === `${p}a`)).toMatchObject({ state: 'left' });
  });

  // Postgres alone: PGlite has one connection, so no heartbeat ever waits on another's row lock.
  it.skipIf(name === 'pglite')(
    'answers a heartbeat that waited on a concurrent write aging its row: declared out, not an error',
    async () => {
      const p = freshPrefix();
      await store.join({ id: `${p}a`, address: 'a' });
      await store.join({ id: `${p}b`, address: 'b' });
      let beat: Promise<boolean> | undefined;
      await testDb.db.transaction(async (tx) => {
        // Others declare b out while its heartbeat is on the way: the heartbeat waits for this
        // row and then re-checks its condition on the new version (Postgres's EvalPlanQual),
        // where "beating" is now false and the outage branch is read for the first time.
        await tx.query(`UPDATE cluster_nodes SET heartbeat_at = heartbeat_at - interval '1 hour' WHERE id = $1`, [
          `${p}b`,
        ]);
        beat = store.heartbeat(`${p}b`, TIMEOUT_MS);
        beat.catch(() => {});
        await eventually(
          async () => {
            const { rows } = await testDb.db.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM pg_stat_activity
               WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE cluster_nodes n SET heartbeat_at%'`,
            );
            return rows[0]!.n > 0 ? true : undefined;
          },
          10_000,
          'the heartbeat waits on the row lock',
          10,
        );
      });
      await expect(beat!).resolves.toBe(false);
      expect(ids(await store.live(TIMEOUT_MS), p)).toEqual([`${p}a`]);
    },
  );

  // Near the end: it ages every row of the file's table, as an outage of the store does.
  it('after an outage of the store, keeps the nodes that were live (its own heartbeat let in), not those already out', async () => {
    const p = freshPrefix();
    await store.join({ id: `${p}a`, address: 'a' });
    await store.join({ id: `${p}b`, address: 'b' });
    await store.join({ id: `${p}gone`, address: 'gone' });
    // `gone` had stopped long before; then no heartbeat reached the store for longer than the timeout.
    await ageHeartbeat(`${p}gone`, 60_000);
    await testDb.db.query(
      `UPDATE cluster_nodes SET heartbeat_at = heartbeat_at - $1::float8 * interval '1 millisecond'`,
      [TIMEOUT_MS + 2_000],
    );
    expect(await store.live(TIMEOUT_MS)).toEqual([]);
    // The first heartbeat back is not "declared out": the store was away, not the node.
    expect(await store.heartbeat(`${p}a`, TIMEOUT_MS)).toBe(true);
    // b beat last before the outage as a did: live during the grace, and its late heartbeat is let in.
    expect(ids(await store.live(TIMEOUT_MS), p)).toEqual([`${p}a`, `${p}b`]);
    expect(await store.heartbeat(`${p}b`, TIMEOUT_MS)).toBe(true);
    // gone was out before the outage: it stays out, and its heartbeat is refused.
    expect(await store.heartbeat(`${p}gone`, TIMEOUT_MS)).toBe(false);
    expect(ids(await store.live(TIMEOUT_MS), p)).toEqual([`${p}a`, `${p}b`]);
  });

  it('refuses a timeout that is not a positive number', async () => {
    await expect(store.live(0)).rejects.toThrow(/failureTimeoutMs/);
    await expect(store.heartbeat('x', Number.NaN)).rejects.toThrow(/failureTimeoutMs/);
    await expect(store.all(-1)).rejects.toThrow(/failureTimeoutMs/);
  });
});
