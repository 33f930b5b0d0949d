import { describe, expect, it } from 'vitest';
import { defineKind, type Ask, type Behavior, type DeactivationReason } from '../../src/runtime/actor.js';
import { deferred, flushMicrotasks, testSystem, type Deferred, trusted } from './helpers.js';

type Push = { type: 'push'; item: string };
type Items = Ask<{ type: 'items' }, string[]>;
type Done = Ask<{ type: 'done' }, string[]>;
type LogMessage = Push | Items | Done;
const LOG = defineKind<LogMessage>('log');
/** The same kind, when it snapshots its items. */
const LOG_SNAPSHOT = defineKind<LogMessage, string[]>('log', trusted());

interface Probe {
  activations: number;
  deactivations: DeactivationReason[];
  gates: Deferred[];
  failures: Error[];
}

function probe(): Probe {
  return { activations: 0, deactivations: [], gates: [], failures: [] };
}

function logBehavior(
  p: Probe,
  persistence: 'snapshot' | 'external' = 'external',
): Behavior<string[], LogMessage, string[]> {
  return {
    kind: persistence === 'snapshot' ? LOG_SNAPSHOT : LOG,
    persistence,
    async activate(_ctx, snapshot) {
      p.activations++;
      const gate = p.gates.shift();
      if (gate) await gate.promise;
      const failure = p.failures.shift();
      if (failure) throw failure;
      return snapshot ?? [];
    },
    receive(items, message, ctx) {
      switch (message.type) {
        case 'push':
          return [...items, message.item];
        case 'items':
          ctx.reply(message, items);
          return items;
        case 'done':
          ctx.reply(message, items);
          ctx.stop();
          return items;
      }
    },
    async deactivate(_items, _ctx, reason) {
      p.deactivations.push(reason);
    },
    describe: (items) => ({ count: items.length }),
  };
}

describe('activation', () => {
  it('activates a cold actor once for many concurrent messages, then handles them in order', async () => {
    const p = probe();
    const gate = deferred();
    p.gates.push(gate);
    const { system } = testSystem();
    system.register(logBehavior(p));

    const asks: Promise<string[]>[] = [];
    for (let i = 0; i < 100; i++) {
      const ref = system.ref(LOG, 'l1'); // a fresh ref each time: no per-ref state
      ref.tell({ type: 'push', item: String(i) });
      if (i % 10 === 9) asks.push(ref.ask({ type: 'items' }));
    }
    const active = system.ensureActive('log', 'l1');
    await flushMicrotasks();
    expect(p.activations).toBe(1);
    expect(system.list()).toEqual([]); // still activating: not listed yet

    gate.resolve();
    await active;
    const snapshots = await Promise.all(asks);
    expect(p.activations).toBe(1);
    expect(snapshots[0]).toEqual(Array.from({ length: 10 }, (_, i) => String(i)));
    expect(snapshots[9]).toEqual(Array.from({ length: 100 }, (_, i) => String(i)));
  });

  it('single-flights a snapshot actor too: one acquire, one epoch', async () => {
    const p = probe();
    const { system, snapshots } = testSystem();
    system.register(logBehavior(p, 'snapshot'));
    const ref = system.ref(LOG, 'l1');
    await Promise.all([ref.ask({ type: 'items' }), ref.ask({ type: 'items' }), system.ensureActive('log', 'l1')]);
    expect(snapshots.callsOf('acquire')).toHaveLength(1);
    expect(system.inspect('log', 'l1')?.epoch).toBe(1);
  });

  it('rejects queued asks with the activation error, forgets the actor, and retries on the next message', async () => {
    const p = probe();
    p.failures.push(new Error('store down'));
    const { system, errors } = testSystem();
    system.register(logBehavior(p));
    const ref = system.ref(LOG, 'l1');
    const first = ref.ask({ type: 'items' });
    const second = ref.ask({ type: 'items' });
    ref.tell({ type: 'push', item: 'lost' });

    await expect(first).rejects.toThrow('store down');
    await expect(second).rejects.toThrow('store down');
    expect(errors).toHaveLength(1); // the dropped tell is reported, with the cause
    expect(errors[0]!.info).toMatchObject({ kind: 'log', key: 'l1', during: 'activate', droppedTells: 1 });
    expect(system.list()).toEqual([]);

    ref.tell({ type: 'push', item: 'kept' });
    expect(await ref.ask({ type: 'items' })).toEqual(['kept']);
    expect(p.activations).toBe(2);
  });

  it('rejects ensureActive with the activation error', async () => {
    const p = probe();
    p.failures.push(new Error('nope'));
    const { system, errors } = testSystem();
    system.register(logBehavior(p));
    await expect(system.ensureActive('log', 'l1')).rejects.toThrow('nope');
    expect(errors).toEqual([]); // ensureActive's caller got it
    await expect(system.ensureActive('log', 'l1')).resolves.toBeUndefined();
  });

  it('releases the epoch of a snapshot actor whose activate failed', async () => {
    const p = probe();
    p.failures.push(new Error('bad snapshot'));
    const { system, snapshots } = testSystem();
    system.register(logBehavior(p, 'snapshot'));
    await expect(system.ensureActive('log', 'l1')).rejects.toThrow('bad snapshot');
    await flushMicrotasks();
    expect(snapshots.callsOf('release')).toEqual([{ op: 'release', kind: 'log', key: 'l1', epoch: 1 }]);
    expect((await snapshots.read('log', 'l1'))?.ownerNode).toBeNull();
  });

  it('after ctx.stop, deactivates; queued messages and new ones go to a fresh instance, in order', async () => {
    const p = probe();
    const { system } = testSystem();
    system.register(logBehavior(p));
    const ref = system.ref(LOG, 'l1');
    ref.tell({ type: 'push', item: 'a' });
    const done = ref.ask({ type: 'done' });
    ref.tell({ type: 'push', item: 'b' }); // queued behind 'done': handled by the next instance
    expect(await done).toEqual(['a']);
    ref.tell({ type: 'push', item: 'c' });
    expect(await ref.ask({ type: 'items' })).toEqual(['b', 'c']);
    expect(p.activations).toBe(2);
    expect(p.deactivations).toEqual(['stopped']);
  });

  it('activates the next instance of a snapshot actor only after the previous one released', async () => {
    const p = probe();
    const { system, snapshots } = testSystem();
    system.register(logBehavior(p, 'snapshot'));
    const ref = system.ref(LOG, 'l1');
    ref.tell({ type: 'push', item: 'a' });
    await ref.ask({ type: 'done' });
    expect(await ref.ask({ type: 'items' })).toEqual([]); // no snapshot was written
    expect(snapshots.calls.map((c) => `${c.op}:${c.epoch ?? '-'}`)).toEqual(['acquire:-', 'release:1', 'acquire:-']);
    expect(system.inspect('log', 'l1')?.epoch).toBe(2);
  });

  it('throws a clear error for a ref to an unregistered kind', () => {
    const { system } = testSystem();
    system.register(logBehavior(probe()));
    expect(() => system.ref(defineKind('lease'), 't1')).toThrow(
      "No actor kind 'lease' is registered on node node-a (registered: log).",
    );
  });

  it('refuses a duplicate kind and malformed behaviors', () => {
    const { system } = testSystem();
    system.register(logBehavior(probe()));
    expect(() => system.register(logBehavior(probe()))).toThrow("Actor kind 'log' is already registered.");
    expect(() =>
      system.register({ ...logBehavior(probe()), kind: defineKind<LogMessage>('x'), mailboxCapacity: 0 }),
    ).toThrow(/mailboxCapacity/);
    expect(() =>
      system.register({ ...logBehavior(probe()), kind: defineKind<LogMessage>('y'), idlePassivationMs: -1 }),
    ).toThrow(/idlePassivationMs/);
  });

  it('lists and inspects live actors with their bookkeeping', async () => {
    const p = probe();
    const { system, clock } = testSystem();
    system.register(logBehavior(p, 'snapshot'));
    const started = clock.now();
    await system.ensureActive('log', 'idle');
    await clock.advance(1_000);
    const ref = system.ref(LOG, 'busy');
    ref.tell({ type: 'push', item: 'x' });
    await ref.ask({ type: 'items' });

    expect(
      system
        .list({ kind: 'log' })
        .map((a) => a.key)
        .sort(),
    ).toEqual(['busy', 'idle']);
    expect(system.list({ limit: 1 })).toHaveLength(1);
    expect(system.list({ kind: 'other' })).toEqual([]);
    expect(system.inspect('log', 'idle')).toEqual({
      kind: 'log',
      key: 'idle',
      node: 'node-a',
      mailboxDepth: 0,
      activatedAt: new Date(started).toISOString(),
      lastMessageAt: null,
      epoch: 1,
      snapshotVersion: 0,
      state: { count: 0 },
    });
    expect(system.inspect('log', 'busy')).toMatchObject({
      lastMessageAt: new Date(started + 1_000).toISOString(),
      state: { count: 1 },
    });
    expect(system.list()[0]).not.toHaveProperty('state');
    expect(system.inspect('log', 'nobody')).toBeNull();
  });
});
