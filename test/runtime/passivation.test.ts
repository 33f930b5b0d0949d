import { describe, expect, it } from 'vitest';
import { defineKind, type Ask, type Behavior, type DeactivationReason } from '../../src/runtime/actor.js';
import { deferred, flushMicrotasks, testSystem, trusted, type Deferred } from './helpers.js';

type Visit = { type: 'visit' };
type Slow = Ask<{ type: 'slow' }, void>;
type Count = Ask<{ type: 'count' }, number>;
type VisitMessage = Visit | Slow | Count;
const VISITS = defineKind<VisitMessage, { visits: number }>('visits', trusted());

interface Probe {
  activatedWith: unknown[];
  deactivations: DeactivationReason[];
  gates: Deferred[];
}

/** Counts visits; snapshots on every deactivation; passivates after 1 s idle. */
function visitsBehavior(p: Probe): Behavior<{ visits: number }, VisitMessage, { visits: number }> {
  return {
    kind: VISITS,
    persistence: 'snapshot',
    idlePassivationMs: 1_000,
    async activate(_ctx, snapshot) {
      p.activatedWith.push(snapshot);
      return { visits: snapshot?.visits ?? 0 };
    },
    async receive(state, message, ctx) {
      switch (message.type) {
        case 'visit':
          return { visits: state.visits + 1 };
        case 'slow':
          await p.gates.shift()?.promise;
          return state;
        case 'count':
          ctx.reply(message, state.visits);
          return state;
      }
    },
    async deactivate(state, ctx, reason) {
      p.deactivations.push(reason);
      await ctx.snapshot(state);
    },
  };
}

function probe(): Probe {
  return { activatedWith: [], deactivations: [], gates: [] };
}

describe('passivation', () => {
  it('passivates after idlePassivationMs with no message, snapshotting, and comes back from the snapshot', async () => {
    const p = probe();
    const { system, clock, snapshots } = testSystem();
    system.register(visitsBehavior(p));
    const ref = system.ref(VISITS, 'v1');
    ref.tell({ type: 'visit' });
    ref.tell({ type: 'visit' });
    expect(await ref.ask({ type: 'count' }, 60_000)).toBe(2);

    await clock.advance(999);
    expect(system.inspect('visits', 'v1')).not.toBeNull();
    await clock.advance(1);
    expect(p.deactivations).toEqual(['passivated']);
    expect(system.list()).toEqual([]);
    expect(await snapshots.read('visits', 'v1')).toMatchObject({
      ownerNode: null,
      epoch: 1,
      version: 1,
      state: { v: 1, state: { visits: 2 } },
    });
    expect(clock.pendingTimers).toBe(0);

    ref.tell({ type: 'visit' });
    expect(await ref.ask({ type: 'count' })).toBe(3);
    expect(p.activatedWith).toEqual([null, { visits: 2 }]);
    expect(system.inspect('visits', 'v1')).toMatchObject({ epoch: 2, snapshotVersion: 1 });
  });

  it('measures idleness from the last message: activity keeps it in memory', async () => {
    const p = probe();
    const { system, clock } = testSystem();
    system.register(visitsBehavior(p));
    const ref = system.ref(VISITS, 'v1');
    await system.ensureActive('visits', 'v1');
    for (let i = 0; i < 5; i++) {
      await clock.advance(600);
      ref.tell({ type: 'visit' });
      await flushMicrotasks();
    }
    expect(p.deactivations).toEqual([]);
    expect(clock.pendingTimers).toBe(1); // one idle timer, re-armed, not one per message
    await clock.advance(1_000);
    expect(p.deactivations).toEqual(['passivated']);
  });

  it('takes the idle time its state asks for (idlePassivationMsFor): sooner once quiet, longer when it must', async () => {
    const p = probe();
    const { system, clock } = testSystem();
    // 100 ms once it has 2 visits, 5 s at 3, the kind's 1 s otherwise.
    system.register({
      ...visitsBehavior(p),
      idlePassivationMsFor: (state: { visits: number }) =>
        state.visits === 2 ? 100 : state.visits === 3 ? 5_000 : undefined,
    });
    const ref = system.ref(VISITS, 'v1');
    ref.tell({ type: 'visit' });
    await flushMicrotasks();
    await clock.advance(500); // the kind's 1 s armed
    ref.tell({ type: 'visit' }); // now quiet: the armed timer moves to 100 ms from here
    await flushMicrotasks();
    expect(clock.pendingTimers).toBe(1);
    await clock.advance(99);
    expect(p.deactivations).toEqual([]);
    await clock.advance(1);
    expect(p.deactivations).toEqual(['passivated']);

    ref.tell({ type: 'visit' }); // 3 visits: it must stay 5 s, past the kind's 1 s
    await flushMicrotasks();
    await clock.advance(4_999);
    expect(p.deactivations).toEqual(['passivated']);
    await clock.advance(1);
    expect(p.deactivations).toEqual(['passivated', 'passivated']);
  });

  it('does not passivate while a message is in its handler or waiting', async () => {
    const p = probe();
    const gate = deferred();
    p.gates.push(gate);
    const { system, clock } = testSystem();
    system.register(visitsBehavior(p));
    const ref = system.ref(VISITS, 'v1');
    await system.ensureActive('visits', 'v1');
    const slow = ref.ask({ type: 'slow' }, 60_000);
    ref.tell({ type: 'visit' });
    await clock.advance(5_000);
    expect(p.deactivations).toEqual([]);
    expect(system.inspect('visits', 'v1')?.mailboxDepth).toBe(1);

    gate.resolve();
    await slow;
    expect(await ref.ask({ type: 'count' })).toBe(1); // the mailbox is empty from here
    await clock.advance(999);
    expect(p.deactivations).toEqual([]);
    await clock.advance(1);
    expect(p.deactivations).toEqual(['passivated']);
  });

  it('passivates on request once the mailbox is empty', async () => {
    const p = probe();
    const gate = deferred();
    p.gates.push(gate);
    const { system } = testSystem();
    system.register(visitsBehavior(p));
    const ref = system.ref(VISITS, 'v1');
    const slow = ref.ask({ type: 'slow' });
    ref.tell({ type: 'visit' });
    await flushMicrotasks();
    const passivated = system.passivate('visits', 'v1');
    gate.resolve();
    await passivated;
    await slow;
    expect(p.deactivations).toEqual(['passivated']);
    expect(system.list()).toEqual([]);
    expect(await ref.ask({ type: 'count' })).toBe(1); // the queued visit was handled first
  });

  it('counts the actors that left memory (the idle collection reads it)', async () => {
    const { system, clock } = testSystem();
    system.register(visitsBehavior(probe()));
    expect(system.departedTotal()).toBe(0);
    for (const key of ['a', 'b', 'c']) system.ref(VISITS, key).tell({ type: 'visit' });
    await system.passivate('visits', 'a');
    expect(system.departedTotal()).toBe(1);
    await clock.advance(1_000);
    expect(system.departedTotal()).toBe(3);
    system.ref(VISITS, 'a').tell({ type: 'visit' });
    await system.passivate('visits', 'a');
    expect(system.departedTotal()).toBe(4);
  });
});

describe('ctx.passivate', () => {
  type Note = { type: 'note'; leave: boolean };
  type Seen = Ask<{ type: 'seen' }, number>;
  const NOTES = defineKind<Note | Seen>('notes');
  /** Counts notes; leaves memory after a note that says so, and from `activate` when told to. */
  function notes(activations: string[], leaveOnActivate = false): Behavior<{ n: number }, Note | Seen> {
    return {
      kind: NOTES,
      persistence: 'external',
      async activate(ctx) {
        activations.push(ctx.key);
        if (leaveOnActivate) ctx.passivate();
        return { n: 0 };
      },
      receive(state, message, ctx) {
        if (message.type === 'seen') {
          ctx.reply(message, state.n);
          return state;
        }
        if (message.leave) ctx.passivate();
        return { n: state.n + 1 };
      },
    };
  }

  it('leaves memory after the message whose handler asked, timers and all', async () => {
    const activations: string[] = [];
    const { system, clock } = testSystem();
    system.register(notes(activations));
    const ref = system.ref(NOTES, 'k');
    ref.tell({ type: 'note', leave: false });
    expect(await ref.ask({ type: 'seen' })).toBe(1);
    expect(system.holds('notes', 'k')).toBe(true);
    ref.tell({ type: 'note', leave: true });
    await flushMicrotasks();
    expect(system.holds('notes', 'k')).toBe(false);
    expect(clock.pendingTimers).toBe(0);
    expect(await ref.ask({ type: 'seen' })).toBe(0); // a new activation
    expect(activations).toEqual(['k', 'k']);
  });

  it('lets a waiting message run first, and that handler decides again', async () => {
    const activations: string[] = [];
    const { system } = testSystem();
    system.register(notes(activations));
    const ref = system.ref(NOTES, 'k');
    // Both queue while the actor activates: the first asks to leave, the second does not.
    ref.tell({ type: 'note', leave: true });
    ref.tell({ type: 'note', leave: false });
    expect(await ref.ask({ type: 'seen' })).toBe(2);
    await flushMicrotasks();
    expect(system.holds('notes', 'k')).toBe(true);
    expect(activations).toEqual(['k']);
  });

  it('from activate: leaves at once if nothing waits, else after what waits, as its handlers decide', async () => {
    const activations: string[] = [];
    const { system } = testSystem();
    system.register(notes(activations, true));
    await system.ensureActive('notes', 'a');
    await flushMicrotasks();
    expect(system.holds('notes', 'a')).toBe(false);
    // The ask that activates `b` is answered; its handler does not ask to leave, so `b` stays.
    expect(await system.ref(NOTES, 'b').ask({ type: 'seen' })).toBe(0);
    await flushMicrotasks();
    expect(system.holds('notes', 'b')).toBe(true);
    // The note that activates `c` asks to leave after it.
    system.ref(NOTES, 'c').tell({ type: 'note', leave: true });
    await flushMicrotasks();
    expect(system.holds('notes', 'c')).toBe(false);
    expect(activations).toEqual(['a', 'b', 'c']);
  });
});

describe('fencing', () => {
  it('refuses the final snapshot of a node that was taken over, and leaves the new owner row alone', async () => {
    const p = probe();
    const a = testSystem({ nodeId: 'node-a' });
    a.system.register(visitsBehavior(p));
    const ref = a.system.ref(VISITS, 'v1');
    ref.tell({ type: 'visit' });
    expect(await ref.ask({ type: 'count' })).toBe(1);

    // Another node takes the actor over (node-a was, say, paused past the failure timeout).
    const b = testSystem({ nodeId: 'node-b', snapshots: a.snapshots, clock: a.clock });
    const pb = probe();
    b.system.register(visitsBehavior(pb));
    const refB = b.system.ref(VISITS, 'v1');
    refB.tell({ type: 'visit' });
    expect(await refB.ask({ type: 'count' })).toBe(1);
    expect(b.system.inspect('visits', 'v1')?.epoch).toBe(2);

    // node-a's instance tries to persist on its way out: refused; the new owner's row stands.
    await expect(a.system.passivate('visits', 'v1')).resolves.toBeUndefined();
    expect(p.deactivations).toEqual(['passivated']);
    expect(a.errors.map((e) => [e.info.during, (e.error as { code?: string }).code])).toEqual([
      ['deactivate', 'stale_epoch'],
    ]);
    // The new owner's row is untouched: still node-b's, epoch 2.
    expect(await a.snapshots.read('visits', 'v1')).toMatchObject({ ownerNode: 'node-b', epoch: 2 });
    expect(a.snapshots.callsOf('release').map((c) => c.epoch)).toEqual([]); // a fenced node does not release
  });

  it('a stale_epoch from ctx.snapshot in a handler rejects the message and stops the actor', async () => {
    const deactivations: DeactivationReason[] = [];
    type Save = Ask<{ type: 'save'; n: number }, number>;
    type Follow = Ask<{ type: 'follow' }, string>;
    const SAVER = defineKind<Save | Follow, number>('saver', trusted());
    const saver: Behavior<number, Save | Follow, number> = {
      kind: SAVER,
      persistence: 'snapshot',
      activate: async (_ctx, snapshot) => snapshot ?? 0,
      async receive(state, message, ctx) {
        if (message.type === 'follow') {
          ctx.reply(message, `epoch ${ctx.epoch}`);
          return state;
        }
        await ctx.snapshot(message.n);
        ctx.reply(message, message.n);
        return message.n;
      },
      async deactivate(state, ctx, reason) {
        deactivations.push(reason);
        if (reason !== 'failed') await ctx.snapshot(state);
      },
    };
    const { system, snapshots, errors } = testSystem();
    system.register(saver);
    const ref = system.ref(SAVER, 's1');
    expect(await ref.ask({ type: 'save', n: 1 })).toBe(1);
    expect(system.inspect('saver', 's1')).toMatchObject({ epoch: 1, snapshotVersion: 1 });

    await snapshots.acquire('saver', 's1', 'node-b', 0); // node-b takes over: epoch 2
    const save = ref.ask({ type: 'save', n: 2 });
    const queued = ref.ask({ type: 'follow' }); // accepted by the fenced instance
    await expect(save).rejects.toMatchObject({ code: 'stale_epoch' });
    await expect(queued).rejects.toMatchObject({ code: 'stale_epoch' });
    await flushMicrotasks();
    expect(deactivations).toEqual(['failed']);
    expect(system.list()).toEqual([]);
    expect(await snapshots.read('saver', 's1')).toMatchObject({
      ownerNode: 'node-b',
      epoch: 2,
      state: { v: 1, state: 1 },
    });
    expect(errors).toEqual([]);
  });

  it('dropAll names an actor whose handler has not settled 10 s after it was dropped', async () => {
    const p = probe();
    const gate = deferred();
    p.gates.push(gate);
    const { system, clock, errors } = testSystem();
    system.register(visitsBehavior(p));
    const ref = system.ref(VISITS, 'v1');
    ref.tell({ type: 'visit' });
    expect(await ref.ask({ type: 'count' }, 60_000)).toBe(1);
    ref.tell({ type: 'slow' });
    await flushMicrotasks();
    let dropped = false;
    const dropping = system.dropAll().then(() => (dropped = true));
    await clock.advance(9_999);
    expect(errors).toEqual([]);
    await clock.advance(1);
    expect(dropped).toBe(false);
    expect(errors.map((e) => [(e.error as Error).message, e.info])).toEqual([
      [
        "visits/v1 has not left 10000 ms after the node dropped its actors: its 'slow' handler has run for 10000 ms",
        { kind: 'visits', key: 'v1', during: 'deactivate', messageType: 'slow' },
      ],
    ]);
    gate.resolve();
    await dropping;
    expect(p.deactivations).toEqual(['failed']);
  });
});
