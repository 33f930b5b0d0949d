import { describe, expect, it } from 'vitest';
import { isWheelhouseError } from '../../src/lib/errors.js';
import type { SnapshotStore } from '../../src/runtime/snapshots.js';

/**
 * The behaviour every `SnapshotStore` must have, runnable against any implementation: the
 * in-memory double here, the SQL store (Postgres, PGlite) in `test/store/`. `open` gives a
 * store with no rows for `kind`s starting with the given prefix.
 */
export function describeSnapshotStoreConformance(
  name: string,
  open: () => Promise<{ store: SnapshotStore; kindPrefix: string; close(): Promise<void> }>,
): void {
  describe(`SnapshotStore conformance: ${name}`, () => {
    const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);

    async function withStore(run: (store: SnapshotStore, kind: string) => Promise<void>): Promise<void> {
      const { store, kindPrefix, close } = await open();
      try {
        await run(store, `${kindPrefix}probe`);
      } finally {
        await close();
      }
    }

    it('creates the row at epoch 1, version 0, no state, owned by the acquirer', () =>
      withStore(async (store, kind) => {
        expect(await store.read(kind, 'k')).toBeNull();
        expect(await store.acquire(kind, 'k', 'node-a', NOW)).toEqual({ epoch: 1, version: 0, state: null });
        expect(await store.read(kind, 'k')).toMatchObject({
          kind,
          key: 'k',
          ownerNode: 'node-a',
          epoch: 1,
          version: 0,
        });
      }));

    it('saves under the held epoch, bumping the version; the next owner gets the last state', () =>
      withStore(async (store, kind) => {
        const { epoch } = await store.acquire(kind, 'k', 'node-a', NOW);
        expect(await store.save(kind, 'k', epoch, { n: 1 }, NOW)).toBe(1);
        expect(await store.save(kind, 'k', epoch, { n: 2, text: 'ünïcødé ✓' }, NOW)).toBe(2);
        const next = await store.acquire(kind, 'k', 'node-b', NOW + 1);
        expect(next).toEqual({ epoch: 2, version: 2, state: { n: 2, text: 'ünïcødé ✓' } });
      }));

    it('refuses a save with an older epoch (stale_epoch) and keeps the new owner state', () =>
      withStore(async (store, kind) => {
        const first = await store.acquire(kind, 'k', 'node-a', NOW);
        const second = await store.acquire(kind, 'k', 'node-b', NOW);
        await store.save(kind, 'k', second.epoch, { owner: 'b' }, NOW);
        const refused = await store.save(kind, 'k', first.epoch, { owner: 'a' }, NOW).catch((e: unknown) => e);
        expect(isWheelhouseError(refused, 'stale_epoch')).toBe(true);
        expect(await store.read(kind, 'k')).toMatchObject({ ownerNode: 'node-b', epoch: 2, state: { owner: 'b' } });
      }));

    it('releases only under the held epoch', () =>
      withStore(async (store, kind) => {
        const first = await store.acquire(kind, 'k', 'node-a', NOW);
        await store.acquire(kind, 'k', 'node-b', NOW);
        await store.release(kind, 'k', first.epoch, NOW);
        expect((await store.read(kind, 'k'))?.ownerNode).toBe('node-b');
        await store.release(kind, 'k', 2, NOW);
        expect(await store.read(kind, 'k')).toMatchObject({ ownerNode: null, epoch: 2 });
        expect((await store.acquire(kind, 'k', 'node-a', NOW)).epoch).toBe(3);
      }));

    it('gives concurrent acquirers distinct epochs; only the highest can save', () =>
      withStore(async (store, kind) => {
        const acquired = await Promise.all(['n1', 'n2', 'n3', 'n4'].map((n) => store.acquire(kind, 'k', n, NOW)));
        const epochs = acquired.map((a) => a.epoch).sort((a, b) => a - b);
        expect(epochs).toEqual([1, 2, 3, 4]);
        const results = await Promise.allSettled(epochs.map((e) => store.save(kind, 'k', e, { e }, NOW)));
        expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected', 'fulfilled']);
      }));

    it('lists the owner and epoch of each actor of a kind, released ones with no owner', () =>
      withStore(async (store, kind) => {
        expect(await store.owners(kind)).toEqual([]);
        await store.acquire(kind, 'b', 'node-a', NOW);
        const a = await store.acquire(kind, 'a', 'node-a', NOW);
        await store.acquire(kind, 'a', 'node-b', NOW + 5);
        await store.release(kind, 'b', 1, NOW + 7);
        await store.acquire(`${kind}-other`, 'c', 'node-c', NOW);
        expect(a.epoch).toBe(1);
        expect(await store.owners(kind)).toEqual([
          { key: 'a', ownerNode: 'node-b', epoch: 2, version: 0, updatedMs: NOW + 5 },
          { key: 'b', ownerNode: null, epoch: 1, version: 0, updatedMs: NOW + 7 },
        ]);
      }));

    it('lists what saves, takeovers and releases left, as the cluster status and the hand-over read it', () =>
      withStore(async (store, kind) => {
        // Wheel partitions are keyed by their number as text: listed in text order.
        for (const key of ['0', '1', '2', '10']) await store.acquire(kind, key, 'node-a', NOW);
        const moved = await store.acquire(kind, '2', 'node-b', NOW + 10);
        expect(await store.save(kind, '2', moved.epoch, { cursorMs: NOW }, NOW + 20)).toBe(1);
        await store.save(kind, '0', 1, { cursorMs: NOW }, NOW + 30);
        await store.save(kind, '0', 1, { cursorMs: NOW + 1 }, NOW + 40);
        await store.release(kind, '10', 1, NOW + 50);
        // A release or a save under an epoch that no longer holds changes nothing.
        await store.release(kind, '2', 1, NOW + 60);
        const refused = await store.save(kind, '2', 1, { stale: true }, NOW + 70).catch((e: unknown) => e);
        expect(isWheelhouseError(refused, 'stale_epoch')).toBe(true);

        expect(await store.owners(kind)).toEqual([
          { key: '0', ownerNode: 'node-a', epoch: 1, version: 2, updatedMs: NOW + 40 },
          { key: '1', ownerNode: 'node-a', epoch: 1, version: 0, updatedMs: NOW },
          { key: '10', ownerNode: null, epoch: 1, version: 0, updatedMs: NOW + 50 },
          { key: '2', ownerNode: 'node-b', epoch: 2, version: 1, updatedMs: NOW + 20 },
        ]);
        expect(await store.owners(`${kind}-none`)).toEqual([]);
      }));

    it('keeps kinds and keys apart', () =>
      withStore(async (store, kind) => {
        await store.acquire(kind, 'a', 'node-a', NOW);
        await store.acquire(`${kind}-other`, 'a', 'node-a', NOW);
        expect((await store.acquire(kind, 'b', 'node-a', NOW)).epoch).toBe(1);
        expect((await store.acquire(kind, 'a', 'node-a', NOW)).epoch).toBe(2);
      }));
  });
}
