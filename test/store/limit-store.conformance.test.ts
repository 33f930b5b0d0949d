/**
 * LimitStore conformance (docs/decisions/0023-flow-control.md): declarations (put, get, list,
 * remove), the catalog's version, and what a key's actor reads of the task table — its
 * running tasks and its due pending ones for a named key (`tasks.limits`) and for a type's
 * key (`type:<t>`), whether waiting tasks take part in a key or a family, a reconcile's
 * `stillRunning`, and the counts. Runs against Postgres and PGlite (one SQL for both).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqlSnapshotStore } from '../../src/store/snapshot-store.js';
import type { LimitSpec } from '../../src/domain/limits.js';
import type { NewTask } from '../../src/domain/model.js';
import { SqlLimitStore } from '../../src/store/limit-store.js';
import type { LimitStore } from '../../src/store/limit-types.js';
import { SqlTaskStore } from '../../src/store/task-store.js';
import type { TaskStore } from '../../src/store/types.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { BACKOFF, T0, makeTask, tokenDigest, uniqueType } from '../support/tasks.js';

const QUEUE: LimitSpec = { concurrency: 5, rate: null, onLimit: 'queue', weight: 1 };
const RATED: LimitSpec = {
  concurrency: null,
  rate: { limit: 100, periodMs: 60_000, burst: 10 },
  onLimit: 'keep_latest_waiting',
  weight: 2.5,
};

describe.each(sqlBackends)('LimitStore on $name', ({ open }) => {
  let testDb: TestDb;
  let limits: LimitStore;
  let tasks: TaskStore;
  let n = 0;
  /** A name prefix no other test uses: the table is shared by the file's tests. */
  const fresh = (label: string) => `t${++n}-${label}`;

  beforeAll(async () => {
    testDb = await open();
    limits = new SqlLimitStore(testDb.db);
    tasks = new SqlTaskStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  async function submit(...list: NewTask[]): Promise<void> {
    await tasks.submit(list, T0);
  }

  async function run(task: NewTask, atMs = T0 + 1000): Promise<number> {
    const [claimed] = await tasks.claim([task.id], 'w-limits', atMs);
    if (claimed === undefined) throw new Error(`could not claim ${task.id}`);
    return claimed.version;
  }

  describe('declarations', () => {
    it('puts, reads back, changes (keeping its creation time) and removes', async () => {
      const name = fresh('stripe-api');
      expect(await limits.get(name)).toBeNull();
      expect(await limits.put(name, QUEUE, T0)).toEqual({ name, ...QUEUE, createdMs: T0, updatedMs: T0 });
      expect(await limits.get(name)).toEqual({ name, ...QUEUE, createdMs: T0, updatedMs: T0 });

      const changed = await limits.put(name, RATED, T0 + 5000);
      expect(changed).toEqual({ name, ...RATED, createdMs: T0, updatedMs: T0 + 5000 });
      expect(await limits.get(name)).toEqual(changed);

      expect(await limits.remove(name)).toBe(true);
      expect(await limits.remove(name)).toBe(false);
      expect(await limits.get(name)).toBeNull();
    });

    it('stores a family and a paused key (concurrency 0) as given', async () => {
      const family = `${fresh('customer')}:*`;
      const paused = `type:${fresh('email')}`;
      await limits.put(family, RATED, T0);
      await limits.put(paused, { ...QUEUE, concurrency: 0 }, T0);
      expect(await limits.get(family)).toMatchObject({ name: family, rate: RATED.rate, weight: 2.5 });
      expect(await limits.get(paused)).toMatchObject({ concurrency: 0 });
    });

    it('lists in name order, by prefix, page after page', async () => {
      const prefix = fresh('list');
      const names = ['a', 'b', 'c', 'd', 'e'].map((s) => `${prefix}-${s}`);
      for (const name of [...names].reverse()) await limits.put(name, QUEUE, T0);
      await limits.put(`${fresh('other')}-a`, QUEUE, T0);

      const first = await limits.list({ prefix, limit: 2 });
      expect(first.items.map((d) => d.name)).toEqual(names.slice(0, 2));
      expect(first.next).toBe(names[1]);
      const second = await limits.list({ prefix, after: first.next!, limit: 2 });
      expect(second.items.map((d) => d.name)).toEqual(names.slice(2, 4));
      const last = await limits.list({ prefix, after: second.next!, limit: 2 });
      expect(last.items.map((d) => d.name)).toEqual(names.slice(4));
      expect(last.next).toBeNull();
      expect((await limits.list({ prefix, limit: 5 })).next).toBeNull();
    });
  });

  describe('catalog', () => {
    it('reads every declaration, then nothing while its version is current', async () => {
      const name = fresh('cat');
      await limits.put(name, QUEUE, T0);
      const first = await limits.catalog(null);
      expect(first.declarations?.find((d) => d.name === name)).toMatchObject(QUEUE);
      const again = await limits.catalog(first.version);
      expect(again).toEqual({ version: first.version, declarations: null });
    });

    it('changes its version on a put, a change at the same instant, and a removal', async () => {
      const seen = new Set<string>();
      const version = async () => {
        const { version } = await limits.catalog(null);
        return version;
      };
      const a = fresh('cat-a');
      const b = fresh('cat-b');
      await limits.put(a, QUEUE, T0 + 10_000);
      seen.add(await version());

      // The same instant, other values: not a newer updated_at, still a new version.
      await limits.put(a, { ...QUEUE, concurrency: 6 }, T0 + 10_000);
      const changed = await version();
      expect(seen.has(changed)).toBe(false);
      seen.add(changed);

      // A put stamped earlier than the latest change (a node whose clock is behind).
      await limits.put(b, QUEUE, T0);
      const added = await version();
      expect(seen.has(added)).toBe(false);
      seen.add(added);

      // A removal: back to the content of before the put, so back to its version.
      expect(await limits.remove(b)).toBe(true);
      const removed = await version();
      expect(removed).not.toBe(added);
      expect(removed).toBe(changed);

      // A put of another name at an older time: the same count and the same latest change
      // as after `b`'s put, yet another version.
      await limits.put(fresh('cat-c'), QUEUE, T0);
      const replaced = await version();
      expect(seen.has(replaced)).toBe(false);

      const { declarations } = await limits.catalog(removed);
      expect(declarations?.some((d) => d.name === b)).toBe(false);
    });
  });

  describe('liveTasks of a named key', () => {
    it('reads its running tasks and its due pending ones, most urgent first, with their limits', async () => {
      const key = fresh('api');
      const other = fresh('other');
      const runningTask = makeTask({ limits: [key, other].sort() });
      const late = makeTask({ limits: [key], dueMs: T0 - 1000, priority: 5 });
      const urgent = makeTask({ limits: [key], dueMs: T0, priority: 1 });
      const early = makeTask({ limits: [key], dueMs: T0 - 5000, priority: 5 });
      const notDue = makeTask({ limits: [key], dueMs: T0 + 60_000 });
      const unrelated = makeTask({ limits: [other] });
      const unnamed = makeTask();
      await submit(runningTask, late, urgent, early, notDue, unrelated, unnamed);
      const version = await run(runningTask, T0 + 1000);

      const live = await limits.liveTasks(key, T0 + 2000, 10);
      expect(live.running).toEqual([{ taskId: runningTask.id, version, startedMs: T0 + 1000 }]);
      expect(live.waiting).toEqual([
        { taskId: urgent.id, taskType: urgent.taskType, priority: 1, dueMs: T0, limits: [key] },
        { taskId: early.id, taskType: early.taskType, priority: 5, dueMs: T0 - 5000, limits: [key] },
        { taskId: late.id, taskType: late.taskType, priority: 5, dueMs: T0 - 1000, limits: [key] },
      ]);
      expect(live.truncated).toBe(false);

      const bounded = await limits.liveTasks(key, T0 + 2000, 2);
      expect(bounded.waiting.map((e) => e.taskId)).toEqual([urgent.id, early.id]);
      expect(bounded.truncated).toBe(true);

      // A finished task waits no more.
      expect((await tasks.cancel(urgent.id, T0 + 3000)).kind).toBe('cancelled');
      const after = await limits.liveTasks(key, T0 + 4000, 10);
      expect(after.waiting.map((e) => e.taskId)).toEqual([early.id, late.id]);
    });

    it('orders tasks of one priority and due time by id', async () => {
      const key = fresh('ties');
      const list = [makeTask({ limits: [key] }), makeTask({ limits: [key] }), makeTask({ limits: [key] })];
      await submit(...[...list].reverse());
      const live = await limits.liveTasks(key, T0, 10);
      expect(live.waiting.map((e) => e.taskId)).toEqual(list.map((t) => t.id));
    });
  });

  describe('keysHeldOutside', () => {
    it('names the keys whose actor a node outside the live ones held, not released ones', async () => {
      const snapshots = new SqlSnapshotStore(testDb.db);
      const dead = fresh('dead');
      const alive = fresh('alive');
      const released = fresh('released');
      await snapshots.acquire('limit', dead, 'n-gone', T0);
      await snapshots.acquire('limit', alive, 'n-live', T0);
      const r = await snapshots.acquire('limit', released, 'n-gone', T0);
      await snapshots.release('limit', released, r.epoch, T0);
      await snapshots.acquire('wheel', fresh('other-kind'), 'n-gone', T0);
      const keys = await limits.keysHeldOutside(['n-live'], 1000);
      expect(keys).toContain(dead);
      expect(keys).not.toContain(alive);
      expect(keys).not.toContain(released);
      expect(keys.every((k) => !k.startsWith('other-kind'))).toBe(true);
    });
  });

  describe('holdersMany and waitingMany', () => {
    it('answer together each key what liveTasks answers, named and type keys together, in order', async () => {
      const a = fresh('many-a');
      const b = fresh('many-b');
      const type = fresh('many.type');
      const both = makeTask({ limits: [a, b].sort() });
      const onlyA = makeTask({ limits: [a], priority: 2 });
      const ofType = makeTask({ taskType: type });
      const holder = makeTask({ limits: [b] });
      await submit(both, onlyA, ofType, holder);
      await run(holder, T0 + 1000);
      const keys = [b, `type:${type}`, a, fresh('many-none')];
      const holders = await limits.holdersMany(keys);
      const waiting = await limits.waitingMany(keys, T0 + 2000, 1);
      const many = keys.map((_, i) => ({ running: holders[i]!, ...waiting[i]! }));
      const one = await Promise.all(keys.map((k) => limits.liveTasks(k, T0 + 2000, 1)));
      expect(many).toEqual(one);
      expect(many[2]!.waiting.map((e) => e.taskId)).toEqual([onlyA.id]);
      expect(many[2]!.truncated).toBe(true);
      expect(many[0]!.running.map((r) => r.taskId)).toEqual([holder.id]);
      expect(many[3]).toEqual({ running: [], waiting: [], truncated: false });
    });

    it('count a holder of two keys asked together once under each (one scan for all the keys)', async () => {
      const a = fresh('two-a');
      const b = fresh('two-b');
      const both = makeTask({ limits: [a, b].sort() });
      const other = makeTask({ limits: [fresh('two-other')] });
      await submit(both, other);
      await run(both, T0 + 1000);
      await run(other, T0 + 1000);
      const holders = await limits.holdersMany([a, b, a]);
      expect(holders.map((list) => list.map((h) => h.taskId))).toEqual([[both.id], [both.id], [both.id]]);
    });

    it('keeps no pending list where a key reads alone, a small one where keys read together (000014, 000023, 000024)', async () => {
      const { rows } = await testDb.db.query<{ name: string; options: string[] | null }>(
        `SELECT c.relname AS name, c.reloptions AS options FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
         WHERE c.relname IN ('tasks_pending_limits_idx', 'tasks_running_limits_idx') AND ns.nspname = $1
         ORDER BY c.relname`,
        [testDb.schema],
      );
      expect(rows).toEqual([
        { name: 'tasks_pending_limits_idx', options: ['fastupdate=off'] },
        { name: 'tasks_running_limits_idx', options: ['fastupdate=on', 'gin_pending_list_limit=64'] },
      ]);
    });
  });

  describe('liveTasks of a type key', () => {
    it('reads every task of the type, whether or not it names limits, and no other type', async () => {
      const type = uniqueType('limits');
      const key = `type:${type}`;
      const named = makeTask({ taskType: type, limits: [fresh('x')] });
      const plain = makeTask({ taskType: type, priority: 2 });
      const runningTask = makeTask({ taskType: type });
      const notDue = makeTask({ taskType: type, dueMs: T0 + 60_000 });
      const otherType = makeTask({ taskType: uniqueType('limits-other') });
      await submit(named, plain, runningTask, notDue, otherType);
      const version = await run(runningTask);

      const live = await limits.liveTasks(key, T0 + 2000, 10);
      expect(live.running).toEqual([{ taskId: runningTask.id, version, startedMs: T0 + 1000 }]);
      expect(live.waiting).toEqual([
        { taskId: plain.id, taskType: type, priority: 2, dueMs: T0 },
        { taskId: named.id, taskType: type, priority: 5, dueMs: T0, limits: named.limits },
      ]);
      expect(await limits.counts(key, T0 + 2000)).toEqual({ running: 1, waiting: 3 });
    });
  });

  describe('inUse', () => {
    it('is true while pending or blocked tasks name the key, not for running ones only', async () => {
      const pendingKey = fresh('pending');
      const blockedKey = fresh('blocked');
      const runningKey = fresh('running');
      const predecessor = makeTask();
      const blocked = makeTask({ limits: [blockedKey], dependsOn: [predecessor.id] });
      const runningTask = makeTask({ limits: [runningKey] });
      await submit(predecessor, makeTask({ limits: [pendingKey] }), runningTask);
      await submit(blocked);
      expect((await tasks.get(blocked.id))?.status).toBe('blocked');
      await run(runningTask);

      expect(await limits.inUse(pendingKey)).toBe(true);
      expect(await limits.inUse(blockedKey)).toBe(true);
      expect(await limits.inUse(runningKey)).toBe(false);
      expect(await limits.inUse(fresh('nobody'))).toBe(false);
    });

    it('is true for a family while any waiting task names a key under it', async () => {
      const family = fresh('customer');
      const nested = fresh('region');
      await submit(makeTask({ limits: [`${family}:42`] }), makeTask({ limits: [`${nested}:eu:7`] }));
      expect(await limits.inUse(`${family}:*`)).toBe(true);
      expect(await limits.inUse(`${nested}:*`)).toBe(true);
      expect(await limits.inUse(`${nested}:eu:*`)).toBe(true);
      expect(await limits.inUse(`${nested}:us:*`)).toBe(false);
      expect(await limits.inUse(`${fresh('empty')}:*`)).toBe(false);
    });

    it('is true for a type key while tasks of the type wait', async () => {
      const type = uniqueType('inuse');
      const idle = uniqueType('idle');
      await submit(makeTask({ taskType: type }));
      expect(await limits.inUse(`type:${type}`)).toBe(true);
      expect(await limits.inUse(`type:${idle}`)).toBe(false);
    });
  });

  describe('stillRunning and counts', () => {
    it('answers which holders are still running', async () => {
      const key = fresh('holders');
      const a = makeTask({ limits: [key] });
      const b = makeTask({ limits: [key] });
      const c = makeTask({ limits: [key] });
      await submit(a, b, c);
      await run(a);
      const [claimed] = await tasks.claim([b.id], 'w-limits', T0 + 1000);
      const [ended] = await tasks.complete(
        [
          {
            taskId: b.id,
            tokenDigest: tokenDigest(claimed!.leaseToken),
            outcome: 'succeeded',
            error: null,
            retryable: false,
          },
        ],
        T0 + 1500,
        BACKOFF,
      );
      expect(ended?.status).toBe('succeeded');
      expect(await limits.counts(key, T0 + 2000)).toEqual({ running: 1, waiting: 1 });

      const still = await limits.stillRunning([a.id, b.id, c.id, 'not-a-uuid']);
      expect([...still]).toEqual([a.id]);
      expect(await limits.stillRunning([])).toEqual(new Set());
    });
  });

  describe('tasks.limits', () => {
    it('is written on submit and read back (NULL and [] for none)', async () => {
      const key = fresh('round');
      const named = makeTask({ limits: [`${key}-a`, `${key}-b`] });
      const plain = makeTask();
      const [r1, r2] = await tasks.submit([named, plain], T0);
      expect(r1!.task.limits).toEqual([`${key}-a`, `${key}-b`]);
      expect(r2!.task.limits).toEqual([]);
      expect((await tasks.get(named.id))?.limits).toEqual([`${key}-a`, `${key}-b`]);
      expect((await tasks.get(plain.id))?.limits).toEqual([]);
      const { rows } = await testDb.db.query<{ limits: string[] | null }>('SELECT limits FROM tasks WHERE id = $1', [
        plain.id,
      ]);
      expect(rows[0]?.limits).toBeNull();
    });
  });
});
