import { WheelhouseError } from '../lib/errors.js';
import type { ClusterNode, MembershipStore } from './membership-store.js';
import { systemClock, type Cancel, type Clock } from './clock.js';

/** Default interval between heartbeats, ms. */
export const DEFAULT_HEARTBEAT_MS = 1000;
/** Default failure timeout: a node whose last heartbeat is older is out, ms. */
export const DEFAULT_FAILURE_TIMEOUT_MS = 5000;
/** How long after a peer's estimated expiry its absence is read, ms: covers the estimate's error. */
const EXPIRY_MARGIN_MS = 30;

/** What a background step was doing when it failed. */
export type MembershipStep = 'heartbeat' | 'rejoin' | 'refresh' | 'listener';

export interface MembershipOptions {
  /** This node's id (its row in `cluster_nodes`, its name on the ring). */
  nodeId: string;
  /** Where other nodes reach this one. */
  address: string;
  store: MembershipStore;
  /** Schedules the heartbeats. Liveness itself is judged on the database's clock. @default systemClock */
  clock?: Clock;
  /** Interval between heartbeats, ms; less than half the failure timeout. @default 1000 */
  heartbeatMs?: number;
  /** A node whose heartbeat is older than this is out, ms. @default 5000 */
  failureTimeoutMs?: number;
  /**
   * Hears every failure of the background loop (a heartbeat, refresh or rejoin the store
   * refused, a listener that threw); the loop goes on and tries again on the next beat.
   */
  onError: (error: unknown, step: MembershipStep) => void;
  /**
   * Called when a heartbeat finds that the cluster had declared this node out (its heartbeat
   * aged past the timeout: a long pause, a slow store; or its row was marked left), after it
   * has rejoined as a new incarnation. The others may have taken over its actors meanwhile.
   */
  onDeclaredOut?: (rejoined: ClusterNode) => void;
  /**
   * Asked at each beat: does this node reach Redis? Sent with the heartbeat; the ring leaves
   * out the nodes that do not (`ringMembers`). @default always true
   */
  redisReachable?: () => boolean;
}

/**
 * The nodes the ring is built from: the live nodes that reach Redis, or every live node when
 * none does. A node cut off from Redis alone still heartbeats, but what it owns cannot fire:
 * its wheel partitions belong on a node that can fire them. When Redis is gone for everyone,
 * moving partitions gains nothing (and an empty ring would refuse the submissions Postgres
 * can still take), so the ring stays as it is.
 */
export function ringMembers(live: readonly ClusterNode[]): ClusterNode[] {
  const reaching = live.filter((node) => node.redisReachable);
  return reaching.length > 0 ? reaching : [...live];
}

/** Receives the new live set, in id order, each time it changes. */
export type LiveSetListener = (live: readonly ClusterNode[]) => void;

/**
 * The life of a `Membership`: `idle → starting → running → stopping → stopped`, or
 * `starting → stopped` when the first join fails, or `idle → stopped`. Anything else is a bug.
 */
export type MembershipPhase = 'idle' | 'starting' | 'running' | 'stopping' | 'stopped';

const LEGAL_TRANSITIONS: Readonly<Record<MembershipPhase, readonly MembershipPhase[]>> = {
  idle: ['starting', 'stopped'],
  starting: ['running', 'stopped'],
  running: ['stopping'],
  stopping: ['stopped'],
  stopped: [],
};

/**
 * One node's membership loop: joins the cluster, heartbeats every `heartbeatMs` on the clock's
 * timers, and after each beat reads the live set, telling listeners when it changed (so a
 * `RingPlacement` can be rebuilt). `stop` leaves at once instead of waiting for the timeout.
 * Independent of the node: it needs only a `MembershipStore` and a clock.
 *
 * Beats never overlap: the next is scheduled when one ends, `heartbeatMs` after it began.
 */
export class Membership {
  readonly nodeId: string;
  readonly address: string;
  readonly heartbeatMs: number;
  readonly failureTimeoutMs: number;
  private readonly store: MembershipStore;
  private readonly clock: Clock;
  private readonly onError: MembershipOptions['onError'];
  private readonly onDeclaredOut: MembershipOptions['onDeclaredOut'];
  private readonly redisReachable: () => boolean;
  private readonly listeners = new Set<LiveSetListener>();
  private phase: MembershipPhase = 'idle';
  private liveSet: readonly ClusterNode[] = [];
  private timer: Cancel | null = null;
  /** A read of the live set at the moment a peer's heartbeat will have aged out. */
  private expiryTimer: Cancel | null = null;
  private beating: Promise<void> | null = null;
  /** When the last heartbeat the store accepted was sent, on this node's clock. */
  private lastBeatMs = -Infinity;

  constructor(options: MembershipOptions) {
    this.nodeId = options.nodeId;
    this.address = options.address;
    this.store = options.store;
    this.clock = options.clock ?? systemClock;
    this.heartbeatMs = options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
    this.failureTimeoutMs = options.failureTimeoutMs ?? DEFAULT_FAILURE_TIMEOUT_MS;
    this.onError = options.onError;
    this.onDeclaredOut = options.onDeclaredOut;
    this.redisReachable = options.redisReachable ?? (() => true);
    if (this.nodeId === '') throw new WheelhouseError('internal', 'membership: nodeId is empty.');
    if (!Number.isFinite(this.failureTimeoutMs) || this.failureTimeoutMs <= 0) {
      throw new WheelhouseError(
        'internal',
        `membership: failureTimeoutMs must be positive, got ${this.failureTimeoutMs}.`,
      );
    }
    // Two beats must fit in a timeout: one late beat (a GC pause, a slow query) must not be
    // enough to put a healthy node out.
    if (!Number.isFinite(this.heartbeatMs) || this.heartbeatMs <= 0 || this.heartbeatMs * 2 > this.failureTimeoutMs) {
      throw new WheelhouseError(
        'internal',
        `membership: heartbeatMs must be positive and at most half of failureTimeoutMs (${this.failureTimeoutMs}), got ${this.heartbeatMs}.`,
      );
    }
  }

  get state(): MembershipPhase {
    return this.phase;
  }

  /**
   * The ring's members as of the last beat, in id order: the live set less the nodes that do
   * not reach Redis (`ringMembers`). Empty before `start` and after `stop`.
   */
  get live(): readonly ClusterNode[] {
    return this.liveSet;
  }

  /**
   * Whether the others still count this node in, as far as it can tell: its last accepted
   * heartbeat was sent less than the failure timeout ago. A node that was paused or cut off
   * longer must not take actors over — the others may hold them — until a beat (or the
   * rejoin that follows being declared out) succeeds again.
   */
  get inGoodStanding(): boolean {
    return this.phase === 'running' && this.clock.now() - this.lastBeatMs < this.failureTimeoutMs;
  }

  /** Ids of the ring's members, in id order: what a `RingPlacement` is built from. */
  get liveIds(): string[] {
    return this.liveSet.map((node) => node.id);
  }

  /** Calls `listener` with each new live set. Returns a function that unsubscribes it. */
  onChange(listener: LiveSetListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /**
   * Joins, reads the first live set (listeners hear it) and starts heartbeating. Rejects
   * when the store refuses the join; the membership is then stopped.
   */
  async start(): Promise<void> {
    this.transition('starting');
    try {
      const began = this.clock.now();
      await this.store.join({ id: this.nodeId, address: this.address });
      this.lastBeatMs = began;
      this.publish(await this.store.live(this.failureTimeoutMs));
    } catch (error) {
      this.transition('stopped');
      throw error;
    }
    this.transition('running');
    this.schedule(this.clock.now());
  }

  /**
   * Stops heartbeating and leaves: the node is out of every live set at once. Waits for a beat
   * in flight first, so that no heartbeat lands after the leave. Rejects if the leave fails
   * (the node then drops out after the failure timeout instead).
   */
  async stop(): Promise<void> {
    if (this.phase === 'idle') {
      this.transition('stopped');
      return;
    }
    if (this.phase !== 'running')
      throw new WheelhouseError('internal', `membership ${this.nodeId}: stop while ${this.phase}.`);
    this.transition('stopping');
    this.timer?.();
    this.timer = null;
    this.expiryTimer?.();
    this.expiryTimer = null;
    await this.beating;
    try {
      await this.store.leave(this.nodeId);
    } finally {
      this.transition('stopped');
      this.liveSet = [];
      this.listeners.clear();
    }
  }

  /**
   * Reads the live set now instead of at the next beat (a peer said it joined or is leaving).
   * Never rejects: a failed read is reported and the next beat reads again.
   */
  async refresh(): Promise<void> {
    if (this.phase !== 'running') return;
    try {
      const live = await this.store.live(this.failureTimeoutMs);
      if (this.phase !== 'running') return;
      this.publish(live);
      this.watchExpiries(live);
    } catch (error) {
      this.onError(error, 'refresh');
    }
  }

  /**
   * Arms a read of the live set for the moment the first peer's heartbeat ages past the
   * timeout, if that comes before the next beat. Without it a dead node is noticed up to a
   * heartbeat interval late: its partitions would fire again only after timeout + interval.
   * Heartbeats are stamped on the database's clock; this node's own stamp in `live` was made
   * when its last accepted beat was sent (`lastBeatMs`, on its own clock), which converts one
   * into the other to within a round trip.
   */
  private watchExpiries(live: readonly ClusterNode[]): void {
    const self = live.find((node) => node.id === this.nodeId);
    if (self === undefined) return;
    let soonest = Infinity;
    for (const node of live) {
      if (node.id !== this.nodeId)
        soonest = Math.min(soonest, node.heartbeatMs + this.failureTimeoutMs - self.heartbeatMs);
    }
    const atMs = this.lastBeatMs + soonest + EXPIRY_MARGIN_MS;
    if (!(atMs < this.lastBeatMs + this.heartbeatMs)) return; // the next beat reads it anyway
    this.expiryTimer?.();
    // Read too early (the estimate is off by a round trip), the peer is still live: read again
    // shortly, until the next beat.
    this.expiryTimer = this.clock.setTimer(Math.max(EXPIRY_MARGIN_MS, atMs - this.clock.now()), () => {
      this.expiryTimer = null;
      void this.refresh();
    });
  }

  private schedule(beganMs: number): void {
    const delayMs = Math.max(0, this.heartbeatMs - (this.clock.now() - beganMs));
    this.timer = this.clock.setTimer(delayMs, () => {
      this.timer = null;
      const began = this.clock.now();
      this.beating = this.beat().finally(() => {
        this.beating = null;
        if (this.phase === 'running') this.schedule(began);
      });
    });
  }

  /** One beat: heartbeat (rejoining if declared out), then read the live set. Never rejects. */
  private async beat(): Promise<void> {
    let stillIn: boolean;
    const began = this.clock.now();
    try {
      stillIn = await this.store.heartbeat(this.nodeId, this.failureTimeoutMs, this.redisReachable());
    } catch (error) {
      this.onError(error, 'heartbeat');
      return;
    }
    if (stillIn) this.lastBeatMs = began;
    if (!stillIn && this.phase === 'running') {
      try {
        const rejoined = await this.store.join({ id: this.nodeId, address: this.address });
        this.lastBeatMs = began;
        this.onDeclaredOut?.(rejoined);
      } catch (error) {
        this.onError(error, 'rejoin');
        return;
      }
    }
    try {
      const live = await this.store.live(this.failureTimeoutMs);
      if (this.phase !== 'running') return;
      this.publish(live);
      if (stillIn) this.watchExpiries(live);
    } catch (error) {
      this.onError(error, 'refresh');
    }
  }

  /**
   * Takes the new live set; tells listeners when its ring members changed (the ring depends on
   * their ids alone).
   */
  private publish(all: ClusterNode[]): void {
    const live = ringMembers(all);
    const changed = live.length !== this.liveSet.length || live.some((node, i) => node.id !== this.liveSet[i]!.id);
    this.liveSet = Object.freeze(live);
    if (!changed) return;
    for (const listener of [...this.listeners]) {
      try {
        listener(this.liveSet);
      } catch (error) {
        this.onError(error, 'listener');
      }
    }
  }

  private transition(next: MembershipPhase): void {
    if (!LEGAL_TRANSITIONS[this.phase].includes(next)) {
      throw new WheelhouseError('internal', `membership ${this.nodeId}: illegal transition ${this.phase} → ${next}.`);
    }
    this.phase = next;
  }
}
