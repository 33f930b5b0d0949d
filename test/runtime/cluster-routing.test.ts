import { describe, expect, it } from 'vitest';
import { WheelhouseError } from '../../src/lib/errors.js';
import { defineKind, type Ask, type Behavior } from '../../src/runtime/actor.js';
import type { Placement, Transport } from '../../src/runtime/placement.js';
import { LivePlacement, RingPlacement } from '../../src/runtime/ring.js';
import type { TransportEnvelope } from '../../src/runtime/router.js';
import { flushMicrotasks, testSystem, trusted } from './helpers.js';
import { MemorySnapshotStore } from './memory-snapshots.js';

type Count = Ask<{ type: 'count' }, number>;
type Write = Ask<{ type: 'write' }, void>;
type CounterMessage = Count | Write | { type: 'bump' };
const COUNTER = defineKind<CounterMessage, { n: number }>('counter', trusted());

/** A snapshot actor that counts bumps; `write` fails the way a fenced store write does. */
function counterBehavior(activations: string[] = []): Behavior<{ n: number }, CounterMessage, { n: number }> {
  return {
    kind: COUNTER,
    persistence: 'snapshot',
    activate: async (ctx, snapshot) => {
      activations.push(`${ctx.nodeId}:${ctx.key}@${ctx.epoch}`);
      return { n: snapshot?.n ?? 0 };
    },
    receive(state, message, ctx) {
      if (message.type === 'bump') return { n: state.n + 1 };
      if (message.type === 'count') ctx.reply(message, state.n);
      if (message.type === 'write')
        throw new WheelhouseError('stale_epoch', `${ctx.key}: a newer owner fenced this write`);
      return state;
    },
    deactivate: async (state, ctx, reason) => {
      if (reason !== 'failed') await ctx.snapshot(state);
    },
  };
}

/** A placement a test can repoint. */
class Switchable implements Placement {
  constructor(public owner: string) {}
  ownerOf(): string {
    return this.owner;
  }
}

/**
 * Two nodes whose ring names node-b for everything: node-a reaches node-b through a transport
 * that records what it carries. `register` registers the kinds on each.
 */
function twoNodes(register: (system: ReturnType<typeof testSystem>['system']) => void) {
  const placement = new Switchable('node-b');
  const b = testSystem({ nodeId: 'node-b', placement });
  register(b.system);
  const sent: TransportEnvelope[] = [];
  const transport: Transport = {
    deliver: (_node, envelope) => {
      sent.push(envelope);
      return b.system.acceptRemote(envelope);
    },
  };
  const a = testSystem({ nodeId: 'node-a', placement, transport, clock: b.clock });
  register(a.system);
  return { placement, a, b, sent };
}

describe('LivePlacement', () => {
  it('always holds this node while it runs, never once it leaves, and reports only real changes', () => {
    const placement = new LivePlacement('b');
    expect(placement.ring.nodes()).toEqual(['b']);
    expect(placement.update(['a', 'c'])?.nodes()).toEqual(['b']);
    expect(placement.ring.nodes()).toEqual(['a', 'b', 'c']);
    expect(placement.update(['c', 'a', 'b'])).toBeNull();
    const keys = Array.from({ length: 64 }, (_, i) => String(i));
    const same = new RingPlacement(['a', 'b', 'c']);
    expect(keys.map((k) => placement.ownerOf('wheel', k))).toEqual(keys.map((k) => same.ownerOf('wheel', k)));
    placement.leave(['a', 'b', 'c']);
    expect(placement.ring.nodes()).toEqual(['a', 'c']);
    expect(keys.some((k) => placement.ownerOf('wheel', k) === 'b')).toBe(false);
    placement.update([]);
    expect(placement.ring.nodes()).toEqual(['b']); // the last node: nowhere else to route
  });
});

describe('routing in a cluster', () => {
  it('activates an actor on its remote owner through the transport, and refuses a message for an actor it does not own', async () => {
    const activations: string[] = [];
    const { placement, a, b, sent } = twoNodes((system) => system.register(counterBehavior(activations)));

    await a.system.ensureActive('counter', 'k', 1_000);
    expect(activations).toEqual(['node-b:k@1']);
    expect(sent.map((e) => e.message)).toEqual([{ type: '$activate' }]);
    expect(b.system.holds('counter', 'k')).toBe(true);
    expect(a.system.holds('counter', 'k')).toBe(false);

    // Node b's ring now names node a: it refuses (not_ready) instead of forwarding, so the
    // sender retries against its own ring.
    placement.owner = 'node-a';
    const refused = await b.system
      .acceptRemote({
        kind: 'counter',
        key: 'k',
        message: { type: 'bump' },
        deadlineMs: b.clock.now() + 1_000,
        ask: false,
      })
      .catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'not_ready', details: { owner: 'node-a' } });
  });

  it('hands off the actors a ring change moved away: final snapshot, release, queued messages follow to the new owner', async () => {
    const snapshots = new MemorySnapshotStore();
    const placement = new Switchable('node-a');
    const b = testSystem({ nodeId: 'node-b', placement, snapshots });
    b.system.register(counterBehavior());
    const transport: Transport = { deliver: (_node, envelope) => b.system.acceptRemote(envelope) };
    const a = testSystem({ nodeId: 'node-a', placement, transport, snapshots, clock: b.clock });
    a.system.register(counterBehavior());
    const ref = a.system.ref(COUNTER, 'k');
    ref.tell({ type: 'bump' });
    ref.tell({ type: 'bump' });
    expect(await ref.ask({ type: 'count' })).toBe(2);

    placement.owner = 'node-b';
    expect(a.system.handOff()).toBe(1);
    expect(b.system.handOff()).toBe(0);
    await a.system.passivate('counter', 'k');
    expect(await snapshots.read('counter', 'k')).toMatchObject({
      ownerNode: null,
      epoch: 1,
      state: { v: 1, state: { n: 2 } },
    });
    // The next message goes to node b, which continues from the snapshot.
    expect(await ref.ask({ type: 'count' })).toBe(2);
    expect(b.system.inspect('counter', 'k')).toMatchObject({ node: 'node-b', epoch: 2 });
  });

  it('stops an activation whose handler hit a fenced write, without a final snapshot', async () => {
    const { system, snapshots, errors } = testSystem();
    system.register(counterBehavior());
    const ref = system.ref(COUNTER, 'k');
    ref.tell({ type: 'bump' });
    await expect(ref.ask({ type: 'write' })).rejects.toMatchObject({ code: 'stale_epoch' });
    await flushMicrotasks();
    expect(system.holds('counter', 'k')).toBe(false);
    expect(snapshots.callsOf('save')).toEqual([]);
    expect(snapshots.callsOf('release')).toEqual([]);
    expect(errors).toEqual([]); // an ask's failure goes to the asker

    ref.tell({ type: 'write' });
    await flushMicrotasks();
    expect(errors.map((e) => (e.error as WheelhouseError).code)).toEqual(['stale_epoch']);
    expect(system.holds('counter', 'k')).toBe(false);
  });

  it('drops every actor without writing when the node was declared out', async () => {
    const { system, snapshots } = testSystem();
    system.register(counterBehavior());
    for (const key of ['a', 'b', 'c']) system.ref(COUNTER, key).tell({ type: 'bump' });
    await system.ensureActive('counter', 'c');
    await system.dropAll();
    expect(system.list()).toEqual([]);
    expect(snapshots.callsOf('save')).toEqual([]);
  });
});

type TallyMessage = Ask<{ type: 'where' }, string> | { type: 'bump' };
const TALLY = defineKind<TallyMessage>('tally');

/** An external actor that tells which node it runs on. */
function tallyBehavior(activations: string[]): Behavior<null, TallyMessage> {
  return {
    kind: TALLY,
    persistence: 'external',
    placement: 'holder',
    activate: async (ctx) => {
      activations.push(`${ctx.nodeId}:${ctx.key}`);
      return null;
    },
    receive(state, message, ctx) {
      if (message.type === 'where') ctx.reply(message, ctx.nodeId);
      return state;
    },
  };
}

describe('holder placement', () => {
  it('keeps an actor on the node that started it: its messages sent there stay there, a ring change leaves it, and other nodes reach the ring owner', async () => {
    const activations: string[] = [];
    const { a, b, sent } = twoNodes((system) => system.register(tallyBehavior(activations)));

    // Started on node-a although the ring names node-b: node-a's own messages stay on node-a.
    a.system.tellHere(TALLY, 'k', { type: 'bump' });
    expect(await a.system.ref(TALLY, 'k').ask({ type: 'where' }, 1_000)).toBe('node-a');
    expect(sent).toEqual([]);
    expect(a.system.handOff()).toBe(0);
    expect(a.system.holds(TALLY, 'k')).toBe(true);

    // Another node knows only the ring: it reaches the owner, which starts its own instance.
    expect(await b.system.ref(TALLY, 'k').ask({ type: 'where' }, 1_000)).toBe('node-b');
    expect(activations).toEqual(['node-a:k', 'node-b:k']);

    // Once the holder lets go, node-a's messages follow the ring again.
    await a.system.passivate(TALLY, 'k');
    expect(await a.system.ref(TALLY, 'k').ask({ type: 'where' }, 1_000)).toBe('node-b');
    expect(sent.map((e) => e.message)).toEqual([{ type: 'where' }]);
  });

  it('refuses a holder kind that keeps snapshots, and tellHere for a ring kind', () => {
    const { system } = testSystem({ nodeId: 'node-a', placement: new Switchable('node-a') });
    expect(() => system.register({ ...counterBehavior(), placement: 'holder' })).toThrow(
      /needs persistence 'external'/,
    );
    system.register(counterBehavior());
    expect(() => system.tellHere(COUNTER, 'k', { type: 'bump' })).toThrow(/placed by the ring/);
  });
});
