/**
 * The membership loop, several nodes against one store: they see each other, a node that
 * stops is out at once, a node that stops heartbeating (a crash) is out after the failure
 * timeout, a node declared out rejoins, and every node ends up with the same live set.
 *
 * Liveness is judged on the database's clock, so these tests run in real time with small
 * timeouts (heartbeat 100 ms, failure 1 s) and wait on conditions with a bounded poll; they
 * assert no durations.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { systemClock, type Cancel, type Clock } from '../../src/runtime/clock.js';
import { Membership, type MembershipStep } from '../../src/runtime/membership.js';
import { SqlMembershipStore } from '../../src/store/membership-store.js';
import type { ClusterNode, MembershipStore } from '../../src/runtime/membership-store.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { eventually } from '../support/waits.js';

const HEARTBEAT_MS = 100;
const FAILURE_TIMEOUT_MS = 1000;
/** How long a condition may take before the test fails: generous, for a busy machine. */
const WAIT_MS = 30_000;

/** Waits until `check` holds; fails after {@link WAIT_MS}, saying what it waited for. */
async function waitUntil(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  await eventually(async () => ((await check()) ? true : undefined), WAIT_MS, what, 25);
}

/** The system clock, with a switch that kills every timer: a process that died without leaving. */
class CrashableClock implements Clock {
  private crashed = false;
  private readonly timers = new Set<Cancel>();

  now(): number {
    return systemClock.now();
  }

  setTimer(delayMs: number, fn: () => void): Cancel {
    if (this.crashed) return () => {};
    const cancel = systemClock.setTimer(delayMs, () => {
      this.timers.delete(cancel);
      fn();
    });
    this.timers.add(cancel);
    return () => {
      this.timers.delete(cancel);
      cancel();
    };
  }

  get isCrashed(): boolean {
    return this.crashed;
  }

  crash(): void {
    this.crashed = true;
    for (const cancel of this.timers) cancel();
    this.timers.clear();
  }
}

interface Member {
  membership: Membership;
  clock: CrashableClock;
  /** Every live set `onChange` reported, as ids. */
  changes: string[][];
  errors: { error: unknown; step: MembershipStep }[];
  declaredOut: ClusterNode[];
}

describe.each(sqlBackends)('Membership on $name', ({ open }) => {
  let testDb: TestDb;
  let store: MembershipStore;
  let members: Member[];

  beforeAll(async () => {
    testDb = await open();
    store = new SqlMembershipStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });
  beforeEach(async () => {
    members = [];
    await testDb.db.query('DELETE FROM cluster_nodes');
  });
  afterEach(async () => {
    // Members a test left running leave properly, so that no beat of theirs reaches the next
    // test's table. Crashed ones have no timers left (and crashed long before the test ended).
    await Promise.all(
      members.filter((m) => m.membership.state === 'running' && !m.clock.isCrashed).map((m) => m.membership.stop()),
    );
  });

  function member(nodeId: string, redisReachable?: () => boolean): Member {
    const clock = new CrashableClock();
    const m: Member = {
      clock,
      changes: [],
      errors: [],
      declaredOut: [],
      membership: new Membership({
        nodeId,
        address: `http://${nodeId}:7000`,
        store,
        clock,
        heartbeatMs: HEARTBEAT_MS,
        failureTimeoutMs: FAILURE_TIMEOUT_MS,
        onError: (error, step) => m.errors.push({ error, step }),
        onDeclaredOut: (node) => m.declaredOut.push(node),
        ...(redisReachable === undefined ? {} : { redisReachable }),
      }),
    };
    m.membership.onChange((live) => m.changes.push(live.map((node) => node.id)));
    members.push(m);
    return m;
  }

  const same = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);
  const allSee = (ms: Member[], expected: string[]) => ms.every((m) => same(m.membership.liveIds, expected));
  const storeLiveIds = async () => (await store.live(FAILURE_TIMEOUT_MS)).map((node) => node.id);

  async function startAll(ids: string[]): Promise<Member[]> {
    const ms = ids.map((id) => member(id));
    await Promise.all(ms.map((m) => m.membership.start()));
    const expected = [...ids].sort();
    await waitUntil(`every node sees ${expected.join(', ')}`, () => allSee(ms, expected));
    return ms;
  }

  it('a node whose heartbeat says it does not reach Redis leaves the ring while another does, and comes back', async () => {
    let bReaches = true;
    let aReaches = true;
    const a = member('node-a', () => aReaches);
    const b = member('node-b', () => bReaches);
    await Promise.all([a.membership.start(), b.membership.start()]);
    await waitUntil('both see both', () => allSee([a, b], ['node-a', 'node-b']));
    bReaches = false;
    // b still heartbeats: it is live, and in good standing, but no longer a member of the ring.
    await waitUntil('both see a alone', () => allSee([a, b], ['node-a']));
    expect(await storeLiveIds()).toEqual(['node-a', 'node-b']);
    expect(b.membership.inGoodStanding).toBe(true);
    expect(b.declaredOut).toEqual([]);
    // Redis gone for everyone: moving gains nothing, the ring keeps every live node.
    aReaches = false;
    await waitUntil('both see both again (nobody reaches Redis)', () => allSee([a, b], ['node-a', 'node-b']));
    aReaches = true;
    await waitUntil('both see a alone again', () => allSee([a, b], ['node-a']));
    bReaches = true;
    await waitUntil('both see both once b reaches Redis', () => allSee([a, b], ['node-a', 'node-b']));
  });

  it('nodes that join see each other, with the same live set, and hear it through onChange', async () => {
    const [a, b, c] = await startAll(['node-c', 'node-a', 'node-b']);
    for (const m of [a!, b!, c!]) {
      expect(m.membership.liveIds).toEqual(['node-a', 'node-b', 'node-c']);
      expect(m.changes.at(-1)).toEqual(['node-a', 'node-b', 'node-c']);
      // Each report is a change: no two consecutive ones are the same set.
      for (let i = 1; i < m.changes.length; i++) expect(same(m.changes[i - 1]!, m.changes[i]!)).toBe(false);
    }
    expect(a!.membership.live.map((node) => node.address)).toEqual([
      'http://node-a:7000',
      'http://node-b:7000',
      'http://node-c:7000',
    ]);
    expect(await storeLiveIds()).toEqual(['node-a', 'node-b', 'node-c']);
  });

  it('a node that stops is out at once, and the others follow', async () => {
    const [a, b, c] = await startAll(['node-a', 'node-b', 'node-c']);
    await b!.membership.stop();
    // Out of the store's live set as soon as stop resolves, without waiting for the timeout.
    expect(await storeLiveIds()).toEqual(['node-a', 'node-c']);
    expect(b!.membership.state).toBe('stopped');
    expect(b!.membership.liveIds).toEqual([]);
    await waitUntil('a and c see b gone', () => allSee([a!, c!], ['node-a', 'node-c']));
    expect(a!.changes.at(-1)).toEqual(['node-a', 'node-c']);
    expect(c!.changes.at(-1)).toEqual(['node-a', 'node-c']);
    expect((await store.all(FAILURE_TIMEOUT_MS)).find((node) => node.id === 'node-b')).toMatchObject({
      state: 'left',
      live: false,
    });
    await a!.membership.stop();
    await c!.membership.stop();
    expect(await storeLiveIds()).toEqual([]);
    expect([...a!.errors, ...b!.errors, ...c!.errors]).toEqual([]);
  });

  it('a node that stops heartbeating (a crash) is out once its heartbeat ages past the timeout', async () => {
    const [a, b, c] = await startAll(['node-a', 'node-b', 'node-c']);
    expect(c!.membership.inGoodStanding).toBe(true);
    c!.clock.crash();
    await waitUntil('a and b see c gone', () => allSee([a!, b!], ['node-a', 'node-b']));
    // By its own clock too, c can tell that it may have been declared out: it must take
    // nothing over until a heartbeat is accepted again.
    await waitUntil('c knows it may be out', () => !c!.membership.inGoodStanding);
    expect(a!.membership.inGoodStanding && b!.membership.inGoodStanding).toBe(true);
    expect(a!.changes.at(-1)).toEqual(['node-a', 'node-b']);
    expect(b!.changes.at(-1)).toEqual(['node-a', 'node-b']);
    // Out by the timeout, not by a leave: its row still says live.
    const row = (await store.all(FAILURE_TIMEOUT_MS)).find((node) => node.id === 'node-c');
    expect(row).toMatchObject({ state: 'live', live: false });
    expect(row!.heartbeatAgeMs).toBeGreaterThanOrEqual(FAILURE_TIMEOUT_MS);
    // The crashed node heard nothing since: its view is frozen at the last beat.
    expect(c!.membership.liveIds).toEqual(['node-a', 'node-b', 'node-c']);
    await a!.membership.stop();
    await b!.membership.stop();
  });

  it('a node declared out rejoins as a new incarnation and reports it', async () => {
    const [a, b] = await startAll(['node-a', 'node-b']);
    const before = (await store.live(FAILURE_TIMEOUT_MS)).find((node) => node.id === 'node-b')!;
    // The others declare b out (as if its heartbeat had aged past the timeout during a pause).
    await testDb.db.query(
      `UPDATE cluster_nodes SET heartbeat_at = heartbeat_at - interval '1 hour' WHERE id = 'node-b'`,
    );
    await waitUntil('b has rejoined', () => b!.declaredOut.length > 0);
    expect(b!.declaredOut[0]).toMatchObject({ id: 'node-b', state: 'live' });
    expect(b!.declaredOut[0]!.startedMs).toBeGreaterThan(before.startedMs);
    await waitUntil('both see both again', () => allSee([a!, b!], ['node-a', 'node-b']));
    expect(b!.errors).toEqual([]);
    await a!.membership.stop();
    await b!.membership.stop();
  });

  it('a node whose row was marked left by someone else rejoins too', async () => {
    const [a, b] = await startAll(['node-a', 'node-b']);
    await store.leave('node-b');
    await waitUntil('b has rejoined', () => b!.declaredOut.length > 0);
    await waitUntil(
      'both see both again',
      async () => allSee([a!, b!], ['node-a', 'node-b']) && same(await storeLiveIds(), ['node-a', 'node-b']),
    );
    await a!.membership.stop();
    await b!.membership.stop();
  });

  it('a node that joins later is seen by the others; unsubscribed listeners hear nothing more', async () => {
    const [a] = await startAll(['node-a']);
    const heard: string[][] = [];
    const unsubscribe = a!.membership.onChange((live) => heard.push(live.map((node) => node.id)));
    const b = member('node-b');
    await b.membership.start();
    await waitUntil('a sees b', () => heard.length > 0);
    expect(heard).toEqual([['node-a', 'node-b']]);
    unsubscribe();
    await b.membership.stop();
    await waitUntil('a sees b gone', () => same(a!.membership.liveIds, ['node-a']));
    expect(heard).toEqual([['node-a', 'node-b']]);
    expect(a!.changes).toEqual([['node-a'], ['node-a', 'node-b'], ['node-a']]);
    await a!.membership.stop();
  });

  it('reports store failures to onError and keeps beating', async () => {
    let failing = true;
    const flaky: MembershipStore = {
      join: (node) => store.join(node),
      heartbeat: (id, timeoutMs) =>
        failing ? Promise.reject(new Error('store down')) : store.heartbeat(id, timeoutMs),
      leave: (id) => store.leave(id),
      live: (timeoutMs) => store.live(timeoutMs),
      all: (timeoutMs) => store.all(timeoutMs),
    };
    const errors: MembershipStep[] = [];
    const m = new Membership({
      nodeId: 'node-a',
      address: 'a',
      store: flaky,
      heartbeatMs: HEARTBEAT_MS,
      failureTimeoutMs: FAILURE_TIMEOUT_MS,
      onError: (_error, step) => errors.push(step),
    });
    await m.start();
    await waitUntil('a heartbeat failure is reported', () => errors.length > 0);
    expect(errors[0]).toBe('heartbeat');
    failing = false;
    // Whether or not the outage outlasted the timeout (a rejoin then), the node ends up live.
    await waitUntil(
      'node-a is live again',
      async () => same(await storeLiveIds(), ['node-a']) && same(m.liveIds, ['node-a']),
    );
    expect(m.state).toBe('running');
    await m.stop();
  });

  it('refuses options that cannot work and illegal lifecycle steps', async () => {
    const base = { nodeId: 'node-a', address: 'a', store, onError: () => {} };
    expect(() => new Membership({ ...base, heartbeatMs: 600, failureTimeoutMs: 1000 })).toThrow(/heartbeatMs/);
    expect(() => new Membership({ ...base, failureTimeoutMs: 0 })).toThrow(/failureTimeoutMs/);
    expect(() => new Membership({ ...base, nodeId: '' })).toThrow(/nodeId/);
    const m = new Membership({ ...base, heartbeatMs: HEARTBEAT_MS, failureTimeoutMs: FAILURE_TIMEOUT_MS });
    expect(m.heartbeatMs).toBe(HEARTBEAT_MS);
    expect(new Membership(base)).toMatchObject({ heartbeatMs: 1000, failureTimeoutMs: 5000 });
    await m.start();
    await expect(m.start()).rejects.toThrow(/illegal transition/);
    await m.stop();
    await expect(m.stop()).rejects.toThrow(/stop while stopped/);
  });
});
