import HashRing from 'hashring';
import { WheelhouseError } from '../lib/errors.js';
import type { Placement } from './placement.js';

/**
 * Virtual nodes per live node; each is 4 points on the ring (hashring's ketama layout), so
 * 160 → 640 points a node.
 *
 * Measured over 1 000 random `host-pid` id sets per cell — median and p95 of max/min, for the
 * 64 wheel partitions a node owns ("parts") and for the share of the ring it owns ("arc"):
 *
 *   vnodes   3 nodes: parts     arc        4 nodes: parts     arc        5 nodes: parts     arc
 *       10          1.50 2.42  1.30 1.72          1.80 3.00  1.37 1.75          2.00 3.50  1.44 1.83
 *       40          1.44 2.15  1.13 1.29          1.67 2.63  1.16 1.32          1.89 3.33  1.19 1.34
 *      100          1.44 2.13  1.09 1.18          1.67 2.67  1.11 1.21          1.89 3.17  1.12 1.22
 *      160          1.41 2.08  1.06 1.14          1.67 2.67  1.08 1.15          1.89 3.29  1.10 1.16
 *      512          1.41 2.08  1.04 1.08          1.67 2.63  1.05 1.09          1.89 3.40  1.05 1.09
 *   64 keys dealt at random into equal shares: 1.41 2.08   1.67 2.63   1.89 3.20
 *
 * From about 40 vnodes up the partition spread is already what 64 keys hashed into equal
 * arcs give (the last row): no vnode count splits 64 partitions more evenly than that, one
 * 3-node cluster in twenty has a node with twice another's partitions. More vnodes even out
 * the arcs, which is what decides the load of the millions of DAG nodes and leases. 160
 * keeps arcs within ~15 % of each other at p95 and builds a 3-node ring in ~2 ms (once per
 * membership change). For `node-a`, `node-b`, `node-c` it gives 22 / 23 / 19 partitions, but
 * for `n1`, `n2`, `n3` 19 / 29 / 16: which is why the node spreads the partitions with bounded
 * loads (`RingPlacementOptions.bounded`), 21 / 24 / 19 there and never more than 24 of 64 on
 * any of 3 nodes; the other kinds, with millions of keys, stay on the plain ring.
 */
export const DEFAULT_VNODES_PER_NODE = 160;

export interface RingPlacementOptions {
  /** Virtual nodes per live node. @default 160 (`DEFAULT_VNODES_PER_NODE`) */
  vnodesPerNode?: number;
  /**
   * Kinds with a small fixed set of keys (the wheel partitions), spread with bounded loads:
   * no node gets more than `ceil(boundedLoadFactor × keys / nodes)` of them.
   */
  bounded?: ReadonlyMap<string, readonly string[]>;
  /** @default 1.1 (`DEFAULT_BOUNDED_LOAD_FACTOR`) */
  boundedLoadFactor?: number;
  /**
   * Kinds pinned to a node: the key of each of their actors is a node id, and that node owns
   * it, live or not (a message for a node that is gone fails like any to an unreachable node).
   * For an actor that stands for something held by one process, such as its sockets.
   */
  pinned?: ReadonlySet<string>;
}

/**
 * Headroom of a bounded kind: each node takes at most 10 % more than an even share. 64
 * partitions on 3 nodes: at most 24 each (an even share is 21.3), where plain hashing gives
 * `n1, n2, n3` 19 / 29 / 16. With no headroom (1.0) the split is exact, but a membership change
 * moves more keys, because every node is filled to the brim.
 */
export const DEFAULT_BOUNDED_LOAD_FACTOR = 1.1;

/** One actor's address. */
export interface ActorAddress {
  readonly kind: string;
  readonly key: string;
}

/** An actor whose owner differs between two rings. */
export interface Move extends ActorAddress {
  readonly from: string;
  readonly to: string;
}

/**
 * Ring members are `node:<id>`, not the bare id: hashring keeps per-member settings in plain
 * objects, where an id such as `__proto__` (legal under the `nodeId` pattern) silently gets
 * no points.
 */
const MEMBER_PREFIX = 'node:';

/**
 * Placement by consistent hashing over the live nodes. Every node builds the same ring from
 * the same live set — ids are de-duplicated and sorted, and the ring depends on them and the
 * vnode count alone — so all nodes agree on every owner without talking. A change of live
 * set moves only what it must: a node that leaves hands on just its own actors, a node that
 * joins takes actors from the others and nothing moves between them.
 *
 * Immutable: on a membership change, build a new one and compare with `moves`.
 */
export class RingPlacement implements Placement {
  readonly vnodesPerNode: number;
  private readonly liveNodeIds: readonly string[];
  private readonly ring: HashRing;
  /** kind → key → owner, for the bounded kinds. */
  private readonly assigned = new Map<string, Map<string, string>>();
  private readonly pinned: ReadonlySet<string>;

  constructor(liveNodeIds: Iterable<string>, options: RingPlacementOptions = {}) {
    const vnodesPerNode = options.vnodesPerNode ?? DEFAULT_VNODES_PER_NODE;
    if (!Number.isSafeInteger(vnodesPerNode) || vnodesPerNode < 1) {
      throw new WheelhouseError('internal', `vnodesPerNode must be a positive integer, got ${String(vnodesPerNode)}.`);
    }
    // Points depend only on the id and the vnode index; the order the ids go in only decides
    // which of two equal 32-bit points wins. Sorted, that tie breaks the same way everywhere.
    const ids = [...new Set(liveNodeIds)].sort();
    if (ids.length === 0) {
      throw new WheelhouseError('internal', 'A placement ring needs at least one live node; the live set is empty.');
    }
    if (ids.includes('')) throw new WheelhouseError('internal', 'A live node id is empty.');
    this.vnodesPerNode = vnodesPerNode;
    this.pinned = options.pinned ?? new Set();
    this.liveNodeIds = Object.freeze(ids);
    // Each member names its vnode count and 'vnode count' is 0, which makes hashring place
    // exactly that many. Left to its default, hashring computes floor(1/n · vnodes · n),
    // which floating point makes 39 instead of 40 for 7 nodes: a 7th node would then shift
    // points of the other 6, and actors would move between nodes that did not change.
    const members: Record<string, { vnodes: number }> = {};
    for (const id of ids) members[MEMBER_PREFIX + id] = { vnodes: vnodesPerNode };
    this.ring = new HashRing(members, 'md5', { 'vnode count': 0 });
    const factor = options.boundedLoadFactor ?? DEFAULT_BOUNDED_LOAD_FACTOR;
    if (!(Number.isFinite(factor) && factor >= 1)) {
      throw new WheelhouseError('internal', `boundedLoadFactor must be a number ≥ 1, got ${String(factor)}.`);
    }
    for (const [kind, keys] of options.bounded ?? [])
      this.assigned.set(kind, this.boundedAssignment(kind, keys, factor));
  }

  /**
   * Consistent hashing with bounded loads: each key, in the order given, goes to the first node
   * clockwise from its point on the ring that still has room. A pure function of the live set
   * and the keys, so every node computes the same assignment; a key moves on a membership
   * change only when its first choice changed or the room it had changed.
   */
  private boundedAssignment(kind: string, keys: readonly string[], factor: number): Map<string, string> {
    const capacity = Math.ceil((factor * keys.length) / this.liveNodeIds.length);
    const load = new Map<string, number>();
    const owners = new Map<string, string>();
    for (const key of keys) {
      const candidates = this.ring.range(ringKey(kind, key), this.liveNodeIds.length, true);
      const member = candidates.find((m) => (load.get(m) ?? 0) < capacity) ?? candidates[0]!;
      load.set(member, (load.get(member) ?? 0) + 1);
      owners.set(key, member.slice(MEMBER_PREFIX.length));
    }
    return owners;
  }

  /** The live node ids, sorted. */
  nodes(): readonly string[] {
    return this.liveNodeIds;
  }

  /**
   * Called for every message a node sends or receives, so it skips what it can: one live
   * node owns everything, and a lookup goes to the ring's points directly. `HashRing.get`
   * would also put every key in an LRU cache of 5 000, which for millions of distinct task
   * ids is pure cost: it was 3–4 % of a node's CPU in W1 (profiled).
   */
  ownerOf(kind: string, key: string): string {
    if (this.pinned.size > 0 && this.pinned.has(kind)) return key;
    if (this.liveNodeIds.length === 1) {
      checkKind(kind); // refused with one node as with more
      return this.liveNodeIds[0]!;
    }
    const bounded = this.assigned.get(kind)?.get(key);
    if (bounded !== undefined) return bounded;
    const ring = this.ring as unknown as HashRingInternals;
    return ring.ring[ring.find(ring.hashValue(ringKey(kind, key)))]!.server.slice(MEMBER_PREFIX.length);
  }

  /** How many of `keys` of `kind` each live node owns, in node order; nodes with none show 0. */
  spread(kind: string, keys: Iterable<string>): Map<string, number> {
    const counts = new Map<string, number>(this.liveNodeIds.map((id) => [id, 0]));
    for (const key of keys) {
      const owner = this.ownerOf(kind, key);
      counts.set(owner, (counts.get(owner) ?? 0) + 1);
    }
    return counts;
  }
}

/** The parts of hashring's ring a lookup needs, which its types do not declare. */
interface HashRingInternals {
  /** The points, sorted by value. */
  ring: readonly { value: number; server: string }[];
  /** The index of the first point at or after `hash`, wrapping to 0. */
  find(hash: number): number;
  /** A key's point (ketama over md5): what `get` uses. */
  hashValue(key: string): number;
}

/**
 * An actor's point on the ring. A kind may not hold NUL (checked here), so `kind NUL key` names
 * one address: ('a', 'b\0c') and ('a\0b', 'c') cannot collide.
 */
function ringKey(kind: string, key: string): string {
  checkKind(kind);
  return `${kind}\u0000${key}`;
}

function checkKind(kind: string): void {
  if (kind.includes('\u0000'))
    throw new WheelhouseError('internal', `Actor kind ${JSON.stringify(kind)} contains NUL.`);
}

/** The addresses whose owner differs from `before` to `after`, in the order given. */
export function moves(before: Placement, after: Placement, addresses: Iterable<ActorAddress>): Move[] {
  const moved: Move[] = [];
  for (const { kind, key } of addresses) {
    const from = before.ownerOf(kind, key);
    const to = after.ownerOf(kind, key);
    if (from !== to) moved.push({ kind, key, from, to });
  }
  return moved;
}

/** A spread on one line, for logs and the cluster status: `node-a 17, node-b 21 (max/min 21/17)`. */
export function formatSpread(spread: ReadonlyMap<string, number>): string {
  const counts = [...spread.values()];
  if (counts.length === 0) return '(no nodes)';
  const parts = [...spread].map(([node, count]) => `${node} ${count}`).join(', ');
  return `${parts} (max/min ${Math.max(...counts)}/${Math.min(...counts)})`;
}

/**
 * The placement a node routes by: a ring over the live set as this node last read it. It
 * always holds this node itself while the node runs — a node that was declared out (a long
 * pause) goes on routing to itself until it has rejoined, and fencing refuses what it writes
 * meanwhile — and never while it leaves, so that its last messages go to the new owners.
 */
export class LivePlacement implements Placement {
  private current: RingPlacement;
  private leaving = false;

  constructor(
    readonly selfId: string,
    private readonly options: RingPlacementOptions = {},
  ) {
    this.current = new RingPlacement([selfId], options);
  }

  /** The ring now in force. */
  get ring(): RingPlacement {
    return this.current;
  }

  /** Takes a new live set. Returns the previous ring, or null when the members did not change. */
  update(liveIds: readonly string[]): RingPlacement | null {
    const ids = new Set(liveIds);
    if (this.leaving) ids.delete(this.selfId);
    else ids.add(this.selfId);
    if (ids.size === 0) ids.add(this.selfId); // the last node leaving: nowhere else to route
    const next = [...ids].sort();
    const before = this.current;
    const same = next.length === before.nodes().length && next.every((id, i) => id === before.nodes()[i]);
    if (same) return null;
    this.current = new RingPlacement(next, this.options);
    return before;
  }

  /** From now on this node is left out of the ring (graceful shutdown). */
  leave(liveIds: readonly string[]): RingPlacement | null {
    this.leaving = true;
    return this.update(liveIds);
  }

  ownerOf(kind: string, key: string): string {
    return this.current.ownerOf(kind, key);
  }
}
