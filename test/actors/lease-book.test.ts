import { describe, expect, it } from 'vitest';
import { LEASE_BUCKET_MS } from '../../src/actors/lease-book.js';
import { LEASE } from '../../src/actors/worker-lease.js';
import { FakeClock } from '../../src/runtime/clock.js';
import type { TaskStore } from '../../src/store/types.js';
import { T0 } from '../support/tasks.js';
import { leaseActors } from '../support/lease-actors.js';

/**
 * The lease book keeps a lease passive (an entry, no actor) from its grant until something
 * needs the actor: a heartbeat, or its expiry. The store here records what the woken actor
 * writes; the leases' SQL is covered with both backends in test/store and test/e2e.
 */
function setup() {
  const clock = new FakeClock(T0);
  const expired: { taskId: string; version: number; atMs: number }[] = [];
  const reads: string[] = [];
  const tasks = {
    expireLease: async (taskId: string, version: number, nowMs: number) => {
      expired.push({ taskId, version, atMs: nowMs });
      return null; // lost the race (the row moved on): the actor re-reads it
    },
    runningLease: async (taskId: string) => {
      reads.push(taskId);
      return null; // no longer running: the actor stops
    },
  } as unknown as TaskStore;
  const { system, leases: book } = leaseActors(clock, tasks, (error) => {
    throw error;
  });
  return { clock, system, book, expired, reads };
}

describe('the lease book', () => {
  it('keeps a granted lease as an entry the runtime lists and holds, and a result ends it with no actor ever started', async () => {
    const { clock, system, book, expired, reads } = setup();
    book.granted('t1', 3, T0 + 60_000);
    expect(system.holds(LEASE, 't1')).toBe(true);
    expect(system.holdsLive(LEASE, 't1')).toBe(false);
    expect(system.countByKind().get('lease')).toBe(1);
    expect(system.list({ kind: LEASE })).toEqual([expect.objectContaining({ kind: 'lease', key: 't1', node: 'n1' })]);
    expect(system.inspect(LEASE, 't1')?.state).toEqual({
      version: 3,
      leaseExpiresAt: new Date(T0 + 60_000).toISOString(),
      passive: true,
    });

    book.released('t1', 3);
    expect(system.holds(LEASE, 't1')).toBe(false);
    // Nothing of it is left to wait for its expiry: the book holds only the leases it holds.
    expect((book as unknown as { buckets: Map<number, Set<string>> }).buckets.size).toBe(0);
    await clock.advance(120_000);
    expect(expired).toEqual([]);
    expect(reads).toEqual([]);
  });

  it('wakes a lease into its actor at its expiry, at most a bucket late, and the actor writes the expiry', async () => {
    const { clock, system, book, expired } = setup();
    const expiresMs = T0 + 1_000 + 30; // not on a bucket boundary
    book.granted('t2', 1, expiresMs);
    book.granted('t3', 1, T0 + 5_000);
    await clock.advanceTo(expiresMs - 1);
    expect(expired).toEqual([]);
    await clock.advanceTo(Math.ceil(expiresMs / LEASE_BUCKET_MS) * LEASE_BUCKET_MS);
    expect(expired).toEqual([
      { taskId: 't2', version: 1, atMs: Math.ceil(expiresMs / LEASE_BUCKET_MS) * LEASE_BUCKET_MS },
    ]);
    expect(book.has('t2')).toBe(false);
    expect(book.has('t3')).toBe(true); // later bucket: still passive
    await clock.advance(5_000);
    expect(expired.map((e) => e.taskId)).toEqual(['t2', 't3']);
    expect(system.holds(LEASE, 't3')).toBe(false); // the row had moved on: the actor stopped
  });

  it('wakes a lease into its actor for a heartbeat, with the version and expiry it was granted', async () => {
    const { clock, system, book, expired } = setup();
    book.granted('t4', 7, T0 + 30_000);
    book.wake('t4');
    expect(book.has('t4')).toBe(false);
    expect(system.holdsLive(LEASE, 't4')).toBe(true);
    await clock.advance(1);
    expect(system.inspect(LEASE, 't4')?.state).toEqual({
      version: 7,
      leaseExpiresAt: new Date(T0 + 30_000).toISOString(),
    });
    // The actor's own timer takes over; the book no longer fires for it.
    await clock.advanceTo(T0 + 30_000);
    expect(expired).toEqual([{ taskId: 't4', version: 7, atMs: T0 + 30_000 }]);
  });

  it('tells a live actor instead of keeping a second entry, and ignores an older grant', async () => {
    const { clock, system, book } = setup();
    book.granted('t5', 2, T0 + 10_000);
    book.wake('t5');
    book.granted('t5', 3, T0 + 20_000); // a new attempt claimed while the actor is live
    expect(book.has('t5')).toBe(false);
    await clock.advance(1);
    expect((system.inspect(LEASE, 't5')?.state as { version: number }).version).toBe(3);

    book.granted('t6', 5, T0 + 10_000);
    book.granted('t6', 4, T0 + 90_000);
    expect((system.inspect(LEASE, 't6')?.state as { version: number }).version).toBe(5);
  });

  it('forgets every passive lease when the node drops its actors', async () => {
    const { system, book } = setup();
    book.granted('t7', 1, T0 + 10_000);
    await system.dropAll();
    expect(system.holds(LEASE, 't7')).toBe(false);
    expect(book.size).toBe(0);
  });
});
