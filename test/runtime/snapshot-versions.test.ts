import { describe, expect, it } from 'vitest';
import { isWheelhouseError } from '../../src/lib/errors.js';
import { defineKind, type Ask, type Behavior } from '../../src/runtime/actor.js';
import { unwrapSnapshot, wrapSnapshot } from '../../src/runtime/snapshots.js';
import { testSystem } from './helpers.js';
import type { MemorySnapshotStore } from './memory-snapshots.js';

/**
 * Snapshots are stored as `{ v, state }` with the kind's codec version and decoded on
 * activation; a row from before versions (a bare state) reads as version 0; a snapshot the
 * codec refuses fails the activation cleanly.
 */

interface Tally {
  count: number;
}
type Bump = { type: 'bump' };
type Read = Ask<{ type: 'read' }, number>;
type TallyMessage = Bump | Read;

/** What the codec was handed, in order. */
const decoded: { raw: unknown; version: number }[] = [];

/** Version 2 of a tally: `{ count }`. Version 0 was a bare number. */
const TALLY = defineKind<TallyMessage, Tally>('tally', {
  version: 2,
  decode(raw, version) {
    decoded.push({ raw, version });
    if (version === 0 && typeof raw === 'number') return { count: raw };
    if (version === 2 && typeof raw === 'object' && raw !== null && typeof (raw as Tally).count === 'number') {
      return { count: (raw as Tally).count };
    }
    throw new Error(`not a tally: ${JSON.stringify(raw)}`);
  },
});

function tally(activations: (Tally | null)[]): Behavior<Tally, TallyMessage, Tally> {
  return {
    kind: TALLY,
    persistence: 'snapshot',
    async activate(_ctx, snapshot) {
      activations.push(snapshot);
      return { count: snapshot?.count ?? 0 };
    },
    async receive(state, message, ctx) {
      if (message.type === 'read') {
        ctx.reply(message, state.count);
        return state;
      }
      const next = { count: state.count + 1 };
      await ctx.snapshot(next);
      return next;
    },
  };
}

/** Writes `stored` as the row of `tally/key`, as an older node (or a corrupted row) left it. */
async function seed(snapshots: MemorySnapshotStore, key: string, stored: unknown): Promise<void> {
  const { epoch } = await snapshots.acquire(TALLY.name, key, 'older-node', 0);
  await snapshots.save(TALLY.name, key, epoch, stored, 0);
  await snapshots.release(TALLY.name, key, epoch, 0);
}

describe('snapshot envelope', () => {
  it('reads an envelope with its version, and anything else as a bare version-0 state', () => {
    expect(wrapSnapshot(3, { a: 1 })).toEqual({ v: 3, state: { a: 1 } });
    expect(unwrapSnapshot({ v: 3, state: { a: 1 } })).toEqual({ version: 3, state: { a: 1 } });
    expect(unwrapSnapshot({ v: 1, state: null })).toEqual({ version: 1, state: null });
    expect(unwrapSnapshot(null)).toBeNull();
    expect(unwrapSnapshot(7)).toEqual({ version: 0, state: 7 });
    expect(unwrapSnapshot({ cursorMs: 1, stamp: 2 })).toEqual({ version: 0, state: { cursorMs: 1, stamp: 2 } });
    // Not an envelope: a third key, a version that is not a positive integer, an array.
    expect(unwrapSnapshot({ v: 1, state: 1, more: true })).toMatchObject({ version: 0 });
    expect(unwrapSnapshot({ v: 0, state: 1 })).toMatchObject({ version: 0 });
    expect(unwrapSnapshot({ v: 1.5, state: 1 })).toMatchObject({ version: 0 });
    expect(unwrapSnapshot([1, 2])).toEqual({ version: 0, state: [1, 2] });
  });
});

describe('versioned snapshots', () => {
  it('writes the kind version with the snapshot and decodes it with that version', async () => {
    decoded.length = 0;
    const activations: (Tally | null)[] = [];
    const { system, snapshots } = testSystem();
    system.register(tally(activations));
    const ref = system.ref(TALLY, 't1');
    ref.tell({ type: 'bump' });
    ref.tell({ type: 'bump' });
    expect(await ref.ask({ type: 'read' })).toBe(2);
    expect(await snapshots.read(TALLY.name, 't1')).toMatchObject({ state: { v: 2, state: { count: 2 } } });
    await system.passivate(TALLY, 't1');

    expect(await ref.ask({ type: 'read' })).toBe(2);
    expect(activations).toEqual([null, { count: 2 }]);
    expect(decoded).toEqual([{ raw: { count: 2 }, version: 2 }]);
  });

  it('decodes a snapshot from before versions (a bare state) as version 0', async () => {
    decoded.length = 0;
    const activations: (Tally | null)[] = [];
    const { system, snapshots } = testSystem();
    system.register(tally(activations));
    await seed(snapshots, 'legacy', 41);

    const ref = system.ref(TALLY, 'legacy');
    ref.tell({ type: 'bump' });
    expect(await ref.ask({ type: 'read' })).toBe(42);
    expect(decoded).toEqual([{ raw: 41, version: 0 }]);
    expect(activations).toEqual([{ count: 41 }]);
    // Written back in the current version.
    expect(await snapshots.read(TALLY.name, 'legacy')).toMatchObject({ state: { v: 2, state: { count: 42 } } });
  });

  it('fails the activation of a garbage snapshot with a clear error and leaves nothing half-active', async () => {
    const activations: (Tally | null)[] = [];
    const { system, snapshots, errors } = testSystem();
    system.register(tally(activations));
    await seed(snapshots, 'bad', { v: 2, state: { count: 'many' } });

    const error = await system.ensureActive(TALLY, 'bad').catch((e: unknown) => e);
    expect(isWheelhouseError(error, 'internal')).toBe(true);
    expect((error as Error).message).toBe(
      'tally/bad: its snapshot (version 2) cannot be decoded: not a tally: {"count":"many"}',
    );
    expect((error as { details: unknown }).details).toEqual({ address: 'tally/bad', version: 2, knownVersion: 2 });
    // `activate` never ran, the actor is not in memory, and ownership was given back.
    expect(activations).toEqual([]);
    expect(system.holds(TALLY, 'bad')).toBe(false);
    expect(system.inspect(TALLY, 'bad')).toBeNull();
    expect(await snapshots.read(TALLY.name, 'bad')).toMatchObject({ ownerNode: null, epoch: 2 });
    expect(snapshots.callsOf('release').at(-1)).toMatchObject({ kind: 'tally', key: 'bad', epoch: 2 });
    // Asks queued behind the activation get the same error; nothing was reported besides.
    await expect(system.ref(TALLY, 'bad').ask({ type: 'read' })).rejects.toThrow(/cannot be decoded/);
    expect(errors).toEqual([]);
  });

  it('refuses a snapshot written by a newer version than the kind knows', async () => {
    const { system, snapshots } = testSystem();
    system.register(tally([]));
    await seed(snapshots, 'future', { v: 3, state: { count: 1, colour: 'blue' } });
    await expect(system.ensureActive(TALLY, 'future')).rejects.toThrow(
      'tally/future: its snapshot was written with version 3, newer than this node knows (2).',
    );
    expect(system.holds(TALLY, 'future')).toBe(false);
  });

  it('refuses a snapshot kind without a codec, and a codec on an external kind', () => {
    const { system } = testSystem();
    const base = tally([]);
    expect(() => system.register({ ...base, kind: defineKind<TallyMessage>('plain') })).toThrow(
      /persistence 'snapshot' needs a snapshot codec/,
    );
    expect(() => system.register({ ...base, persistence: 'external' })).toThrow(
      /persistence 'external' keeps no snapshot/,
    );
    expect(() => defineKind('v0', { version: 0, decode: () => null })).toThrow(/positive integer/);
  });
});
