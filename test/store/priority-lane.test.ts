/**
 * The priority lane (src/store/priority-lane.ts): a lane statement is served while the shared
 * pool is saturated by long ones, spills into the shared pool when its reserved connections
 * are busy, and nothing else ever takes a reserved connection.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres, type Db, type DbResult, type DbTx } from '../../src/store/db.js';
import { PriorityLane } from '../../src/store/priority-lane.js';
import { TEST_POSTGRES_URL } from '../support/postgres.js';

/** A Db that logs each statement it is given and answers only when told to. */
class HeldDb implements Db {
  readonly driver = 'postgres' as const;
  readonly schema = 'public';
  readonly got: string[] = [];
  private readonly held: (() => void)[] = [];

  query<R>(text: string): Promise<DbResult<R>> {
    this.got.push(text);
    return new Promise((resolve) => this.held.push(() => resolve({ rows: [], rowCount: 0 })));
  }

  exec(script: string): Promise<void> {
    return this.query(script).then(() => undefined);
  }

  transaction<T>(fn: (tx: DbTx) => Promise<T>): Promise<T> {
    return fn(this);
  }

  /** Answers every statement held so far. */
  answerAll(): void {
    for (const answer of this.held.splice(0)) answer();
  }

  async close(): Promise<void> {}
}

describe('PriorityLane', () => {
  it('runs on a free reserved connection, spills to the shared pool when they are busy, and gives them back', async () => {
    const shared = new HeldDb();
    const reserved = new HeldDb();
    const lane = new PriorityLane(shared, reserved, 2);
    const first = lane.query('lane 1');
    const second = lane.query('lane 2');
    const third = lane.query('lane 3');
    expect(reserved.got).toEqual(['lane 1', 'lane 2']);
    expect(shared.got).toEqual(['lane 3']);
    expect(lane.inUse).toBe(2);
    reserved.answerAll();
    await Promise.all([first, second]);
    expect(lane.inUse).toBe(0);
    void lane.query('lane 4');
    expect(reserved.got).toEqual(['lane 1', 'lane 2', 'lane 4']);
    shared.answerAll();
    reserved.answerAll();
    await third;
  });
});

describe('PriorityLane on Postgres', () => {
  let blocker: Db;
  let shared: Db;
  let reserved: Db;
  beforeAll(() => {
    const open = (poolSize: number): Db => openPostgres({ url: TEST_POSTGRES_URL, schema: 'public', poolSize });
    blocker = open(1);
    shared = open(1);
    reserved = open(1);
  });
  afterAll(async () => {
    await Promise.all([blocker, shared, reserved].map((db) => db.close()));
  });

  it('serves a short statement while the shared pool is saturated by a long one', async () => {
    const lock = 2_802_028;
    const lane = new PriorityLane(shared, reserved, 1);
    let long: Promise<unknown> = Promise.resolve();
    await blocker.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock($1)', [lock]);
      // The shared pool's only connection waits on the lock until this transaction ends.
      long = shared.query('SELECT pg_advisory_xact_lock($1)', [lock]);
      let longDone = false;
      void long.then(() => (longDone = true));
      const { rows } = await lane.query<{ one: number }>('SELECT 1 AS one');
      expect(rows).toEqual([{ one: 1 }]);
      expect(longDone).toBe(false);
    });
    await long;
  });
});
