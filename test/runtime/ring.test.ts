import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isWheelhouseError } from '../../src/lib/errors.js';
import {
  DEFAULT_VNODES_PER_NODE,
  formatSpread,
  LivePlacement,
  moves,
  RingPlacement,
  type ActorAddress,
} from '../../src/runtime/ring.js';

/**
 * Consistent-hash placement: every node computes the same owners from the same live set, the
 * 64 wheel partitions spread over the nodes, and a membership change moves only what it must.
 */
const PARTITIONS = Array.from({ length: 64 }, (_, i) => String(i));
const wheel = (keys: readonly string[]): ActorAddress[] => keys.map((key) => ({ kind: 'wheel', key }));
const THREE = ['node-a', 'node-b', 'node-c'];

describe('RingPlacement', () => {
  it('gives the same owner for every address whatever the order (or repetition) of the live set', () => {
    const a = new RingPlacement(['node-a', 'node-b', 'node-c']);
    const b = new RingPlacement(['node-c', 'node-a', 'node-b', 'node-a']);
    expect(a.nodes()).toEqual(THREE);
    expect(b.nodes()).toEqual(THREE);
    const owners = new Set<string>();
    for (const kind of ['wheel', 'cron', 'dag', 'lease']) {
      for (let i = 0; i < 500; i++) {
        expect(b.ownerOf(kind, `k${i}`)).toBe(a.ownerOf(kind, `k${i}`));
        owners.add(a.ownerOf(kind, `k${i}`));
      }
    }
    expect([...owners].sort()).toEqual(THREE);
  });

  it('keeps the owners pinned here, so nodes on another version of the ring would be caught', () => {
    // Owners depend on nothing but md5, the sorted ids and the vnode count. If this changes
    // (a hashring upgrade, a new address encoding), nodes of mixed versions disagree on
    // owners: such a change must be rolled out as a full-cluster restart.
    const ring = new RingPlacement(THREE);
    expect(formatSpread(ring.spread('wheel', PARTITIONS))).toBe('node-a 22, node-b 23, node-c 19 (max/min 23/19)');
    expect(['cron', 'dag', 'lease'].map((kind) => ring.ownerOf(kind, 'x'))).toEqual(['node-a', 'node-b', 'node-a']);
  });

  it('keys the ring by kind and key together: the same key of two kinds can live apart, and the NUL separator cannot be forged', () => {
    const ring = new RingPlacement(THREE);
    const byKind = new Set(['wheel', 'cron', 'dag', 'lease', 'w', 'c'].map((kind) => ring.ownerOf(kind, '7')));
    expect(byKind.size).toBeGreaterThan(1);
    expect(() => ring.ownerOf('wheel\u00007', '')).toThrow(/contains NUL/);
    // A NUL in the key is fine: the first NUL ends the kind.
    expect(THREE).toContain(ring.ownerOf('wheel', 'a\u0000b'));
  });

  it('gives each of 3 nodes a fair share of the 64 wheel partitions', () => {
    const spread = new RingPlacement(THREE).spread('wheel', PARTITIONS);
    expect([...spread.keys()]).toEqual(THREE);
    expect([...spread.values()].reduce((s, n) => s + n, 0)).toBe(64);
    for (const count of spread.values()) {
      expect(count).toBeGreaterThanOrEqual(19);
      expect(count).toBeLessThanOrEqual(23);
    }
  });

  it('lists nodes that own none of the keys with 0, and formats a spread on one line', () => {
    const ring = new RingPlacement(THREE);
    const spread = ring.spread('wheel', ['0']);
    expect([...spread.values()].sort()).toEqual([0, 0, 1]);
    expect(
      formatSpread(
        new Map([
          ['n1', 3],
          ['n2', 1],
        ]),
      ),
    ).toBe('n1 3, n2 1 (max/min 3/1)');
    expect(formatSpread(new Map())).toBe('(no nodes)');
  });

  it('moves only partitions to a 4th node, about a quarter of them', () => {
    const before = new RingPlacement(THREE);
    const after = new RingPlacement([...THREE, 'node-d']);
    const moved = moves(before, after, wheel(PARTITIONS));
    expect(moved.length).toBeGreaterThan(0);
    expect(moved.length).toBeLessThanOrEqual(Math.floor(64 * 0.35));
    for (const move of moved) {
      expect(move.to).toBe('node-d');
      expect(move.from).toBe(before.ownerOf('wheel', move.key));
    }
    expect(moved.length).toBe(after.spread('wheel', PARTITIONS).get('node-d'));
  });

  it('moves exactly the partitions of a node that leaves, and each to a node that stayed', () => {
    const before = new RingPlacement(THREE);
    for (const gone of THREE) {
      const after = new RingPlacement(THREE.filter((id) => id !== gone));
      const moved = moves(before, after, wheel(PARTITIONS));
      const owned = PARTITIONS.filter((key) => before.ownerOf('wheel', key) === gone);
      expect(moved.map((m) => m.key)).toEqual(owned);
      for (const move of moved) {
        expect(move.from).toBe(gone);
        expect(move.to).not.toBe(gone);
      }
    }
  });

  it('moves nothing between the other nodes when a 7th joins (hashring would place 39 vnodes for 7 instead of 40)', () => {
    const six = ['n1', 'n2', 'n3', 'n4', 'n5', 'n6'];
    const keys = Array.from({ length: 2_000 }, (_, i) => ({ kind: 'dag', key: String(i) }));
    for (const vnodesPerNode of [40, DEFAULT_VNODES_PER_NODE]) {
      const moved = moves(
        new RingPlacement(six, { vnodesPerNode }),
        new RingPlacement([...six, 'n7'], { vnodesPerNode }),
        keys,
      );
      expect(moved.length).toBeGreaterThan(0);
      expect(moved.filter((m) => m.to !== 'n7')).toEqual([]);
    }
  });

  it('puts everything on a single node', () => {
    const ring = new RingPlacement(['solo']);
    expect(ring.nodes()).toEqual(['solo']);
    expect(ring.spread('wheel', PARTITIONS)).toEqual(new Map([['solo', 64]]));
  });

  it('gives ids that are special to plain objects their share', () => {
    const ids = ['__proto__', 'constructor', '1', 'node-a'];
    const spread = new RingPlacement(ids).spread('wheel', PARTITIONS);
    for (const id of ids) expect(spread.get(id)).toBeGreaterThan(5);
  });

  it('refuses an empty live set, an empty id and a vnode count that is not a positive integer', () => {
    const refused = (build: () => unknown, pattern: RegExp): void => {
      try {
        build();
      } catch (error) {
        expect(isWheelhouseError(error)).toBe(true);
        expect((error as Error).message).toMatch(pattern);
        return;
      }
      expect.fail('expected the ring to be refused');
    };
    refused(() => new RingPlacement([]), /at least one live node/);
    refused(() => new RingPlacement(['a', '']), /empty/);
    for (const vnodesPerNode of [0, -1, 1.5, Number.NaN]) {
      refused(() => new RingPlacement(['a'], { vnodesPerNode }), /vnodesPerNode must be a positive integer/);
    }
  });
});

/**
 * Minimal movement against the obvious oracle, over random live sets (including the sizes
 * where hashring's own vnode arithmetic goes wrong), vnode counts and addresses.
 */
describe('RingPlacement (property: minimal movement)', () => {
  const nodeId = fc.oneof(
    fc.stringMatching(/^[A-Za-z0-9_.:-]{1,12}$/),
    fc.constantFrom('__proto__', 'constructor', 'toString', '0', '42'),
  );
  const liveSet = fc.uniqueArray(nodeId, { minLength: 1, maxLength: 16 });
  const vnodes = fc.oneof(fc.constant(DEFAULT_VNODES_PER_NODE), fc.integer({ min: 1, max: 64 }));
  const address: fc.Arbitrary<ActorAddress> = fc.record({
    kind: fc.constantFrom('wheel', 'cron', 'dag', 'lease'),
    key: fc.string({ unit: 'binary', maxLength: 24 }),
  });
  const addresses = fc.array(address, { minLength: 1, maxLength: 200 });

  it('on add, addresses move only to the node that joined', () => {
    fc.assert(
      fc.property(liveSet, nodeId, vnodes, addresses, (ids, joining, vnodesPerNode, addrs) => {
        fc.pre(!ids.includes(joining));
        const before = new RingPlacement(ids, { vnodesPerNode });
        const after = new RingPlacement([joining, ...ids].reverse(), { vnodesPerNode });
        for (const move of moves(before, after, addrs)) expect(move.to).toBe(joining);
      }),
      { numRuns: 150 },
    );
  });

  it('on remove, exactly the addresses of the node that left move, to nodes that stayed', () => {
    fc.assert(
      fc.property(
        liveSet.filter((ids) => ids.length >= 2),
        fc.nat(),
        vnodes,
        addresses,
        (ids, pick, vnodesPerNode, addrs) => {
          const leaving = ids[pick % ids.length] as string;
          const before = new RingPlacement(ids, { vnodesPerNode });
          const after = new RingPlacement(
            ids.filter((id) => id !== leaving),
            { vnodesPerNode },
          );
          const moved = moves(before, after, addrs);
          expect(moved).toEqual(
            addrs
              .filter((a) => before.ownerOf(a.kind, a.key) === leaving)
              .map((a) => ({ ...a, from: leaving, to: after.ownerOf(a.kind, a.key) })),
          );
          for (const move of moved) expect(move.to).not.toBe(leaving);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('owners are live nodes and do not depend on the order of the live set', () => {
    fc.assert(
      fc.property(liveSet, vnodes, addresses, fc.nat(), (ids, vnodesPerNode, addrs, seed) => {
        const shuffled = [...ids].sort((x, y) => hashish(x, seed) - hashish(y, seed) || (x < y ? -1 : 1));
        const a = new RingPlacement(ids, { vnodesPerNode });
        const b = new RingPlacement(shuffled, { vnodesPerNode });
        expect(b.nodes()).toEqual(a.nodes());
        for (const { kind, key } of addrs) {
          const owner = a.ownerOf(kind, key);
          expect(ids).toContain(owner);
          expect(b.ownerOf(kind, key)).toBe(owner);
        }
      }),
      { numRuns: 150 },
    );
  });
});

/** A cheap deterministic shuffle key for the order test. */
function hashish(s: string, seed: number): number {
  let h = seed | 0;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x9e3779b1);
  return h;
}

describe('RingPlacement with bounded loads (the wheel partitions)', () => {
  const bounded = new Map([['wheel', PARTITIONS]]);
  const nodeIds = fc.uniqueArray(fc.stringMatching(/^[a-z0-9-]{1,12}$/), { minLength: 1, maxLength: 8 });

  it('gives no node more than 10 % over an even share, where plain hashing gives n2 29 of 64', () => {
    const ids = ['n1', 'n2', 'n3'];
    expect(Math.max(...new RingPlacement(ids).spread('wheel', PARTITIONS).values())).toBe(29);
    const spread = new RingPlacement(ids, { bounded }).spread('wheel', PARTITIONS);
    expect([...spread.values()]).toEqual([21, 24, 19]);
    fc.assert(
      fc.property(nodeIds, (live) => {
        const counts = [...new RingPlacement(live, { bounded }).spread('wheel', PARTITIONS).values()];
        expect(counts.reduce((s, n) => s + n, 0)).toBe(64);
        expect(Math.max(...counts)).toBeLessThanOrEqual(Math.ceil((1.1 * 64) / live.length));
      }),
      { numRuns: 200 },
    );
  });

  it('is the same on every node, whatever the order of the live set; other kinds stay on the plain ring', () => {
    fc.assert(
      fc.property(nodeIds, (live) => {
        const a = new RingPlacement(live, { bounded });
        const b = new RingPlacement([...live].reverse(), { bounded });
        const plain = new RingPlacement(live);
        for (const key of PARTITIONS) {
          expect(b.ownerOf('wheel', key)).toBe(a.ownerOf('wheel', key));
          expect(a.ownerOf('cron', key)).toBe(plain.ownerOf('cron', key));
        }
      }),
      { numRuns: 100 },
    );
  });

  it('moves the partitions of a node that leaves, and few others', () => {
    fc.assert(
      fc.property(
        nodeIds.filter((ids) => ids.length >= 2),
        fc.nat(),
        (live, pick) => {
          const leaving = live[pick % live.length]!;
          const before = new RingPlacement(live, { bounded });
          const after = new RingPlacement(
            live.filter((id) => id !== leaving),
            { bounded },
          );
          const moved = moves(before, after, wheel(PARTITIONS));
          const theirs = PARTITIONS.filter((key) => before.ownerOf('wheel', key) === leaving);
          for (const key of theirs) expect(moved.map((m) => m.key)).toContain(key);
          // The room freed on the others lets a few that had spilled go back to their first choice.
          expect(moved.length - theirs.length).toBeLessThanOrEqual(12);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('RingPlacement with pinned kinds', () => {
  it('places an actor of a pinned kind on the node its key names, whatever the ring says, and others as before', () => {
    const ids = ['n1', 'n2', 'n3'];
    const plain = new RingPlacement(ids);
    const pinned = new RingPlacement(ids, { pinned: new Set(['sockets']) });
    for (const id of ids) expect(pinned.ownerOf('sockets', id)).toBe(id);
    // Without the rule the ring would send some of them elsewhere: the rule is what places them.
    expect(ids.some((id) => plain.ownerOf('sockets', id) !== id)).toBe(true);
    // A node no longer live keeps its pinned actor (a message to it fails like any to a dead node).
    expect(new RingPlacement(['n1'], { pinned: new Set(['sockets']) }).ownerOf('sockets', 'n2')).toBe('n2');
    for (let i = 0; i < 200; i++) expect(pinned.ownerOf('lease', `t${i}`)).toBe(plain.ownerOf('lease', `t${i}`));
  });

  it('keeps a pinned actor on its node while the live set changes', () => {
    const live = new LivePlacement('n2', { pinned: new Set(['sockets']) });
    for (const set of [['n1', 'n2'], ['n1', 'n2', 'n3', 'n4'], ['n3']]) {
      live.update(set);
      expect(live.ownerOf('sockets', 'n2')).toBe('n2');
      expect(live.ownerOf('sockets', 'n3')).toBe('n3');
    }
  });
});
