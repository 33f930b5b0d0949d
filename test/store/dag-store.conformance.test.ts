/**
 * DagStore conformance: task dependencies in the system of record, on Postgres and PGlite.
 * Submitting graphs (statuses, counters, edges, the all-or-nothing checks, idempotency
 * keys), the outbox of finished predecessors written by every statement that ends a task
 * with dependents (result, lease expiry, cancel, a reconcile that cancels), reconcile
 * (an edge counts once however often it runs; release due at the later of the task's own due
 * time and now; cancellation naming the predecessor) and the sweep's `stuck` query. Runs that
 * really race, on connections of their own, are in dag-reconcile-race.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isWheelhouseError } from '../../src/lib/errors.js';
import { uuidv7 } from '../../src/lib/ids.js';
import { SqlDagStore } from '../../src/store/dag-store.js';
import { SqlTaskStore } from '../../src/store/task-store.js';
import type { Completion, NewTask, Transition } from '../../src/domain/model.js';
import type { TaskStore } from '../../src/store/types.js';
import type { DagStore } from '../../src/store/dag-types.js';
import { sqlBackends, type TestDb } from '../support/postgres.js';
import { BACKOFF, T0, makeTask, nextId, tokenDigest } from '../support/tasks.js';

/** Rejection of a promise as a WheelhouseError code (fails the test otherwise). */
async function errorCodeOf(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  if (!isWheelhouseError(error)) throw new Error(`expected a WheelhouseError, got ${String(error)}`);
  return error.code;
}

const sortIds = (ids: readonly string[]): string[] => [...ids].sort();

describe.each(sqlBackends)('DagStore on $name', ({ open }) => {
  let testDb: TestDb;
  let tasks: TaskStore;
  let dags: DagStore;

  beforeAll(async () => {
    testDb = await open();
    tasks = new SqlTaskStore(testDb.db);
    dags = new SqlDagStore(testDb.db);
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  const q = async <R extends Record<string, unknown>>(text: string, params: unknown[] = []): Promise<R[]> =>
    (await testDb.db.query<R>(text, params)).rows;
  const get = async (id: string) => {
    const t = await tasks.get(id);
    if (t === null) throw new Error(`task ${id} is missing`);
    return t;
  };
  const edges = (taskId: string) =>
    q<{ predecessor_id: string; satisfied: boolean }>(
      'SELECT predecessor_id::text, satisfied FROM task_dependencies WHERE task_id = $1 ORDER BY predecessor_id',
      [taskId],
    );
  const outbox = (ids: string[]) =>
    q<{ predecessor_id: string; status: string }>(
      'SELECT predecessor_id::text, status FROM dag_events WHERE predecessor_id = ANY($1::uuid[]) ORDER BY predecessor_id',
      [ids],
    );
  const counts = async () =>
    (
      await q<{ tasks: number; edges: number; keys: number; events: number }>(
        `SELECT (SELECT count(*)::int FROM tasks) AS tasks, (SELECT count(*)::int FROM task_dependencies) AS edges,
                (SELECT count(*)::int FROM idempotency_keys) AS keys, (SELECT count(*)::int FROM dag_events) AS events`,
      )
    )[0]!;
  /** A graph of `NewTask`s: the same dag id on each. */
  const graphOf = (nodes: Partial<NewTask>[]): { dagId: string; nodes: NewTask[] } => {
    const dagId = uuidv7(T0);
    return { dagId, nodes: nodes.map((n) => makeTask({ dagId, ...n })) };
  };
  /** Claims `id` at `atMs` and reports `outcome`; answers the transition. */
  const finish = async (
    id: string,
    outcome: 'succeeded' | 'failed',
    atMs = T0 + 1000,
    retryable = false,
  ): Promise<Transition> => {
    const [claimed] = await tasks.claim([id], 'w-dag', atMs);
    if (claimed === undefined) throw new Error(`could not claim ${id}`);
    const completion: Completion = {
      taskId: id,
      tokenDigest: tokenDigest(claimed.leaseToken),
      outcome,
      error: outcome === 'failed' ? 'boom' : null,
      retryable,
    };
    const [transition] = await tasks.complete([completion], atMs + 10, BACKOFF);
    if (transition === undefined) throw new Error(`could not complete ${id}`);
    return transition;
  };

  describe('submitGraph', () => {
    it('writes a diamond: roots pending, the rest blocked with their counters and unsatisfied edges', async () => {
      const a = nextId();
      const b = nextId();
      const c = nextId();
      const d = nextId();
      const { dagId, nodes } = graphOf([
        { id: a, dagRef: 'a' },
        { id: b, dagRef: 'b', dependsOn: [a] },
        { id: c, dagRef: 'c', dependsOn: [a] },
        { id: d, dagRef: 'd', dependsOn: [b, c] },
      ]);
      const result = await dags.submitGraph(nodes, { id: dagId, idempotencyKey: null, requestHash: '' }, T0);
      expect(result.created).toBe(true);
      expect(result.dagId).toBe(dagId);
      expect(result.tasks.map((t) => [t.id, t.status])).toEqual([
        [a, 'pending'],
        [b, 'blocked'],
        [c, 'blocked'],
        [d, 'blocked'],
      ]);
      expect(await get(a)).toMatchObject({
        status: 'pending',
        depsTotal: 0,
        depsSatisfied: 0,
        hasDependents: true,
        dagId,
        dagRef: 'a',
      });
      expect(await get(b)).toMatchObject({
        status: 'blocked',
        depsTotal: 1,
        depsSatisfied: 0,
        hasDependents: true,
        dagRef: 'b',
      });
      expect(await get(d)).toMatchObject({
        status: 'blocked',
        depsTotal: 2,
        depsSatisfied: 0,
        hasDependents: false,
        dagRef: 'd',
      });
      expect(await edges(d)).toEqual(sortIds([b, c]).map((id) => ({ predecessor_id: id, satisfied: false })));
      expect(await edges(a)).toEqual([]);

      // Read back: the graph in id order with each task's predecessors, and "who waits on whom".
      const graph = await dags.graph(dagId);
      expect(graph?.map((n) => [n.task.id, n.dependsOn])).toEqual([
        [a, []],
        [b, [a]],
        [c, [a]],
        [d, sortIds([b, c])],
      ]);
      expect(await dags.predecessors([d, b, a])).toEqual(
        new Map([
          [b, [a]],
          [d, sortIds([b, c])],
        ]),
      );
      const waiting = await dags.dependents([a]);
      expect(waiting.map((w) => w.taskId).sort()).toEqual(sortIds([b, c]));
      const [onD] = await dags.dependents([b, c]);
      expect(onD?.taskId).toBe(d);
      expect(sortIds(onD!.predecessorIds)).toEqual(sortIds([b, c]));
      expect(await dags.graph(nextId())).toBeNull();
      expect(await dags.graph('not-a-uuid')).toBeNull();
    });

    it('decides tasks on existing predecessors: succeeded → pending, failed or cancelled → cancelled, transitively inside the submission', async () => {
      const ok = makeTask();
      const bad = makeTask({ maxRetries: 0 });
      const gone = makeTask();
      const open1 = makeTask();
      await tasks.submit([ok, bad, gone, open1], T0);
      await finish(ok.id, 'succeeded');
      await finish(bad.id, 'failed');
      expect((await tasks.cancel(gone.id, T0 + 100)).kind).toBe('cancelled');

      const onOk = nextId();
      const onBad = nextId();
      const onGone = nextId();
      const mixed = nextId();
      const below = nextId();
      const { dagId, nodes } = graphOf([
        { id: onOk, dependsOn: [ok.id] },
        { id: onBad, dependsOn: [ok.id, bad.id] },
        { id: onGone, dependsOn: [gone.id] },
        { id: mixed, dependsOn: [ok.id, open1.id] },
        { id: below, dependsOn: [onBad] },
      ]);
      const result = await dags.submitGraph(nodes, { id: dagId, idempotencyKey: null, requestHash: '' }, T0 + 5000);
      expect(result.tasks.map((t) => t.status)).toEqual(['pending', 'cancelled', 'cancelled', 'blocked', 'cancelled']);

      expect(await get(onOk)).toMatchObject({
        status: 'pending',
        depsTotal: 1,
        depsSatisfied: 1,
        lastError: null,
        completedMs: null,
      });
      expect(await edges(onOk)).toEqual([{ predecessor_id: ok.id, satisfied: true }]);
      expect(await get(onBad)).toMatchObject({
        status: 'cancelled',
        depsTotal: 2,
        depsSatisfied: 1,
        lastError: `predecessor ${bad.id} failed`,
        completedMs: T0 + 5000,
      });
      expect(await get(onGone)).toMatchObject({ status: 'cancelled', lastError: `predecessor ${gone.id} cancelled` });
      expect(await get(mixed)).toMatchObject({ status: 'blocked', depsTotal: 2, depsSatisfied: 1 });
      expect(await get(below)).toMatchObject({ status: 'cancelled', lastError: `predecessor ${onBad} cancelled` });
      // The existing predecessors now know they have dependents.
      for (const id of [ok.id, bad.id, gone.id, open1.id]) expect((await get(id)).hasDependents).toBe(true);
    });

    it('takes the same path for tasks submitted with dependencies outside a graph', async () => {
      const p = makeTask();
      await tasks.submit([p], T0);
      const dependent = makeTask({ dependsOn: [p.id] });
      const [result] = await tasks.submit([dependent], T0);
      expect(result).toMatchObject({ created: true, task: { status: 'blocked', depsTotal: 1, dagId: null } });
      expect((await get(p.id)).hasDependents).toBe(true);
      expect(await edges(dependent.id)).toEqual([{ predecessor_id: p.id, satisfied: false }]);
    });

    it('refuses an unknown predecessor, a cron schedule as predecessor and a cycle, writing nothing (its key included)', async () => {
      const cron = makeTask({
        scheduleType: 'cron',
        status: 'active',
        schedule: {
          cronExpression: '* * * * *',
          timezone: 'UTC',
          jitterSeconds: 0,
          misfirePolicy: 'fire_once',
          overlapPolicy: 'allow',
          endMs: null,
        },
      });
      await tasks.submit([cron], T0);
      const before = await counts();

      const x = nextId();
      const y = nextId();
      const key = { idempotencyKey: `dag-refused-${x}`, requestHash: 'h1' };
      const unknown = graphOf([{ id: x }, { id: y, dependsOn: [x, nextId()] }]);
      expect(await errorCodeOf(dags.submitGraph(unknown.nodes, { id: unknown.dagId, ...key }, T0))).toBe(
        'unknown_dependency',
      );

      const onCron = graphOf([{ id: nextId(), dependsOn: [cron.id] }]);
      expect(await errorCodeOf(dags.submitGraph(onCron.nodes, { id: onCron.dagId, ...key }, T0))).toBe(
        'validation_failed',
      );

      const selfId = nextId();
      const self = graphOf([{ id: selfId, dependsOn: [selfId] }]);
      expect(await errorCodeOf(dags.submitGraph(self.nodes, { id: self.dagId, ...key }, T0))).toBe('dependency_cycle');

      const [c1, c2, c3] = [nextId(), nextId(), nextId()];
      const cycle = graphOf([
        { id: c1, dependsOn: [c3] },
        { id: c2, dependsOn: [c1] },
        { id: c3, dependsOn: [c2] },
      ]);
      expect(await errorCodeOf(dags.submitGraph(cycle.nodes, { id: cycle.dagId, ...key }, T0))).toBe(
        'dependency_cycle',
      );

      // The same through TaskStore.submit (POST /api/tasks): an unknown id rejects the batch.
      const batch = [makeTask(), makeTask({ dependsOn: [nextId()] })];
      expect(await errorCodeOf(tasks.submit(batch, T0))).toBe('unknown_dependency');

      expect(await counts()).toEqual(before);
      expect((await get(cron.id)).hasDependents).toBe(false);
      // The key of a refused graph was not kept: a valid graph may take it.
      const valid = graphOf([{ id: nextId() }]);
      expect((await dags.submitGraph(valid.nodes, { id: valid.dagId, ...key }, T0)).created).toBe(true);
    });

    it('answers a replayed key with the first graph and writes nothing; a different request is a conflict', async () => {
      const key = `dag-key-${nextId()}`;
      const pair = (): ReturnType<typeof graphOf> => {
        const root = nextId();
        return graphOf([{ id: root }, { dependsOn: [root] }]);
      };
      const first = pair();
      const created = await dags.submitGraph(
        first.nodes,
        { id: first.dagId, idempotencyKey: key, requestHash: 'hash-1' },
        T0,
      );
      expect(created.created).toBe(true);
      const before = await counts();

      const replay = pair();
      const again = await dags.submitGraph(
        replay.nodes,
        { id: replay.dagId, idempotencyKey: key, requestHash: 'hash-1' },
        T0 + 1000,
      );
      expect(again).toEqual({ created: false, dagId: first.dagId, tasks: [] });
      expect(await counts()).toEqual(before);

      const other = graphOf([{ id: nextId() }]);
      expect(
        await errorCodeOf(
          dags.submitGraph(other.nodes, { id: other.dagId, idempotencyKey: key, requestHash: 'hash-2' }, T0),
        ),
      ).toBe('idempotency_conflict');
      expect(await counts()).toEqual(before);
    });
  });

  describe('the outbox of finished predecessors', () => {
    it('is written by the result that ends a task with dependents, and only then', async () => {
      const lonely = makeTask();
      const p = makeTask();
      const retried = makeTask({ maxRetries: 3 });
      await tasks.submit([lonely, p, retried], T0);
      await tasks.submit([makeTask({ dependsOn: [p.id, retried.id] })], T0);

      expect((await finish(lonely.id, 'succeeded')).notifyDependents).toBe(false);
      // A retryable failure with retries left does not end the task: no event.
      const retry = await finish(retried.id, 'failed', T0 + 1000, true);
      expect(retry).toMatchObject({ status: 'pending', notifyDependents: false });
      const done = await finish(p.id, 'succeeded', T0 + 2000);
      expect(done).toMatchObject({ status: 'succeeded', notifyDependents: true });
      expect(await outbox([lonely.id, p.id, retried.id])).toEqual([{ predecessor_id: p.id, status: 'succeeded' }]);

      const mine = (events: { predecessorId: string }[]) => events.filter((e) => e.predecessorId === p.id);
      expect(mine(await dags.pendingEvents(T0 + 2010, 1000))).toEqual([]);
      expect(mine(await dags.pendingEvents(T0 + 2011, 1000))).toEqual([
        { predecessorId: p.id, status: 'succeeded', createdMs: T0 + 2010 },
      ]);
      await dags.clearEvents([p.id]);
      expect(await outbox([p.id])).toEqual([]);
    });

    it('is written by a lease that runs out for good and by a cancel, of a blocked, pending or running task', async () => {
      const expiring = makeTask({ maxRetries: 0, timeoutSeconds: 1 });
      const pending = makeTask();
      const running = makeTask();
      const blocker = makeTask();
      await tasks.submit([expiring, pending, running, blocker], T0);
      const blocked = makeTask({ dependsOn: [blocker.id] });
      await tasks.submit([blocked], T0);
      await tasks.submit([makeTask({ dependsOn: [expiring.id, pending.id, running.id, blocked.id] })], T0);

      const [claimed] = await tasks.claim([expiring.id], 'w', T0);
      const expired = await tasks.expireLease(expiring.id, claimed!.version, T0 + 5000, BACKOFF);
      expect(expired).toMatchObject({ status: 'failed', notifyDependents: true });

      expect(await tasks.cancel(pending.id, T0 + 6000)).toMatchObject({
        kind: 'cancelled',
        task: { hasDependents: true },
      });
      expect(await tasks.cancel(blocked.id, T0 + 6000)).toMatchObject({
        kind: 'cancelled',
        task: { hasDependents: true },
      });

      const [run] = await tasks.claim([running.id], 'w', T0);
      expect((await tasks.cancel(running.id, T0 + 6000)).kind).toBe('cancel_requested');
      expect(await outbox([running.id])).toEqual([]);
      const [ended] = await tasks.complete(
        [
          {
            taskId: running.id,
            tokenDigest: tokenDigest(run!.leaseToken),
            outcome: 'succeeded',
            error: null,
            retryable: true,
          },
        ],
        T0 + 7000,
        BACKOFF,
      );
      expect(ended).toMatchObject({ status: 'cancelled', notifyDependents: true });

      expect(await outbox([expiring.id, pending.id, running.id, blocked.id])).toEqual(
        [
          { predecessor_id: expiring.id, status: 'failed' },
          { predecessor_id: pending.id, status: 'cancelled' },
          { predecessor_id: running.id, status: 'cancelled' },
          { predecessor_id: blocked.id, status: 'cancelled' },
        ].sort((x, y) => (x.predecessor_id < y.predecessor_id ? -1 : 1)),
      );
    });
  });

  describe('reconcile', () => {
    it('counts a succeeded predecessor once however often it runs, and releases when all have succeeded', async () => {
      const p1 = makeTask();
      const p2 = makeTask();
      await tasks.submit([p1, p2], T0);
      const waiter = makeTask({ dependsOn: [p1.id, p2.id] });
      await tasks.submit([waiter], T0);

      // Nothing finished: nothing to do, nothing written.
      const v0 = (await get(waiter.id)).version;
      expect(await dags.reconcile([waiter.id], T0 + 500)).toEqual([]);
      expect((await get(waiter.id)).version).toBe(v0);

      await finish(p1.id, 'succeeded');
      expect(await dags.reconcile([waiter.id, waiter.id], T0 + 2000)).toEqual([
        { taskId: waiter.id, status: 'blocked', due: null, notifyDependents: false },
      ]);
      for (let i = 0; i < 3; i++) expect(await dags.reconcile([waiter.id], T0 + 2000 + i)).toEqual([]);
      expect(await get(waiter.id)).toMatchObject({ status: 'blocked', depsSatisfied: 1, depsTotal: 2 });
      expect(await edges(waiter.id)).toEqual(
        [
          { predecessor_id: p1.id, satisfied: true },
          { predecessor_id: p2.id, satisfied: false },
        ].sort((x, y) => (x.predecessor_id < y.predecessor_id ? -1 : 1)),
      );

      await finish(p2.id, 'succeeded', T0 + 3000);
      const [released] = await dags.reconcile([waiter.id], T0 + 4000);
      expect(released).toEqual({
        taskId: waiter.id,
        status: 'pending',
        due: { taskId: waiter.id, taskType: waiter.taskType, priority: waiter.priority, dueMs: T0 + 4000 },
        notifyDependents: false,
      });
      expect(await get(waiter.id)).toMatchObject({ status: 'pending', depsSatisfied: 2, dueMs: T0 + 4000 });
      expect(await dags.reconcile([waiter.id], T0 + 5000)).toEqual([]);
      expect(await get(waiter.id)).toMatchObject({ status: 'pending', depsSatisfied: 2, dueMs: T0 + 4000 });
    });

    it('releases at the later of the task own due time and now', async () => {
      const p = makeTask();
      await tasks.submit([p], T0);
      const later = makeTask({ dependsOn: [p.id], scheduleType: 'delayed', dueMs: T0 + 60_000 });
      const earlier = makeTask({
        dependsOn: [p.id],
        scheduleType: 'delayed',
        dueMs: T0 + 1_000,
        startDeadlineSeconds: 10,
      });
      await tasks.submit([later, earlier], T0);
      await finish(p.id, 'succeeded');
      const outcomes = await dags.reconcile([later.id, earlier.id], T0 + 30_000);
      const dueOf = new Map(outcomes.map((o) => [o.taskId, o.due?.dueMs]));
      expect(dueOf).toEqual(
        new Map([
          [later.id, T0 + 60_000],
          [earlier.id, T0 + 30_000],
        ]),
      );
      expect((await get(later.id)).dueMs).toBe(T0 + 60_000);
      expect((await get(earlier.id)).dueMs).toBe(T0 + 30_000);
      // Its start deadline counts from the release.
      expect((await get(earlier.id)).startByMs).toBe(T0 + 40_000);
    });

    it('cancels on a failed predecessor naming it, writes the outbox event for its own dependents, and so on down', async () => {
      const ok = makeTask();
      const bad = makeTask({ maxRetries: 0 });
      await tasks.submit([ok, bad], T0);
      const mid = makeTask({ dependsOn: [ok.id, bad.id] });
      await tasks.submit([mid], T0);
      const low = makeTask({ dependsOn: [mid.id] });
      const leaf = makeTask({ dependsOn: [low.id] });
      await tasks.submit([low], T0);
      await tasks.submit([leaf], T0);

      await finish(ok.id, 'succeeded');
      expect(await finish(bad.id, 'failed')).toMatchObject({ status: 'failed', notifyDependents: true });
      expect(await dags.reconcile([mid.id], T0 + 3000)).toEqual([
        { taskId: mid.id, status: 'cancelled', due: null, notifyDependents: true },
      ]);
      expect(await get(mid.id)).toMatchObject({
        status: 'cancelled',
        lastError: `predecessor ${bad.id} failed`,
        completedMs: T0 + 3000,
        depsSatisfied: 1,
      });
      expect(await outbox([mid.id])).toEqual([{ predecessor_id: mid.id, status: 'cancelled' }]);
      expect(await dags.dependents([mid.id])).toEqual([{ taskId: low.id, predecessorIds: [mid.id] }]);

      expect(await dags.reconcile([low.id], T0 + 4000)).toEqual([
        { taskId: low.id, status: 'cancelled', due: null, notifyDependents: true },
      ]);
      expect(await dags.reconcile([leaf.id], T0 + 5000)).toEqual([
        { taskId: leaf.id, status: 'cancelled', due: null, notifyDependents: false },
      ]);
      expect(await get(leaf.id)).toMatchObject({ status: 'cancelled', lastError: `predecessor ${low.id} cancelled` });
      // A leaf nobody waits on writes no event; a second reconcile changes nothing.
      expect(await outbox([leaf.id])).toEqual([]);
      expect(await dags.reconcile([mid.id, low.id, leaf.id], T0 + 6000)).toEqual([]);
    });

    it('ignores ids that are not blocked tasks', async () => {
      const plain = makeTask();
      await tasks.submit([plain], T0);
      expect(await dags.reconcile([plain.id, nextId(), 'not-a-uuid'], T0)).toEqual([]);
      expect(await dags.reconcile([], T0)).toEqual([]);
      expect((await get(plain.id)).status).toBe('pending');
    });
  });

  describe('stuck (the sweep)', () => {
    it('finds a blocked task whose finished predecessor left no outbox event, once that is settled; pages by id', async () => {
      // `stuck` pages through every blocked task there is: the earlier tests' are set aside
      // (a database of its own would cost another PGlite start, seconds on a busy machine).
      await testDb.db.query("UPDATE tasks SET status = 'cancelled' WHERE status = 'blocked'");
      const done = async (id: string, atMs: number): Promise<void> => {
        const [c] = await tasks.claim([id], 'w', atMs);
        await tasks.complete(
          [{ taskId: id, tokenDigest: tokenDigest(c!.leaseToken), outcome: 'succeeded', error: null, retryable: true }],
          atMs,
          BACKOFF,
        );
      };
      const p = makeTask();
      const open2 = makeTask();
      await tasks.submit([p, open2], T0);
      const waiters = [
        makeTask({ dependsOn: [p.id] }),
        makeTask({ dependsOn: [p.id] }),
        makeTask({ dependsOn: [open2.id] }),
      ];
      await tasks.submit(waiters, T0);
      const stuckIds = sortIds([waiters[0]!.id, waiters[1]!.id]);

      expect(await dags.stuck(null, 100, T0 + 60_000)).toEqual({ ids: [], next: null });
      await done(p.id, T0 + 1000);
      // The outbox still holds the event: that is the replay's to deliver, not a loss.
      expect((await dags.stuck(null, 100, T0 + 60_000)).ids).toEqual([]);
      await dags.clearEvents([p.id]);
      // Lost. Not yet settled at T0 + 1000, settled after.
      expect((await dags.stuck(null, 100, T0 + 1000)).ids).toEqual([]);
      expect(await dags.stuck(null, 100, T0 + 1001)).toEqual({ ids: stuckIds, next: null });

      // Page by page (a page of 2 blocked tasks, then the rest).
      const first = await dags.stuck(null, 2, T0 + 60_000);
      expect(first).toEqual({ ids: stuckIds, next: stuckIds[1] });
      expect(await dags.stuck(first.next, 2, T0 + 60_000)).toEqual({ ids: [], next: null });

      // Every edge counted while still blocked (the release was lost): stuck too.
      await testDb.db.query('UPDATE tasks SET deps_satisfied = deps_total WHERE id = $1', [waiters[2]!.id]);
      expect((await dags.stuck(null, 100, T0)).ids).toEqual([waiters[2]!.id]);

      const fixed = await dags.reconcile([...stuckIds, waiters[2]!.id], T0 + 60_000);
      expect(
        fixed
          .filter((o) => o.status === 'pending')
          .map((o) => o.taskId)
          .sort(),
      ).toEqual(sortIds([...stuckIds, waiters[2]!.id]));
      expect(await dags.stuck(null, 100, T0 + 120_000)).toEqual({ ids: [], next: null });
    });
  });
});
