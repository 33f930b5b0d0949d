import { systemClock } from './clock.js';
import { notifyRefresh } from './cluster-wire.js';
import { HttpTransport } from './http-transport.js';
import { Membership, type MembershipStep } from './membership.js';
import type { ClusterNode, ClusterNodeStatus, MembershipStore } from './membership-store.js';
import { LivePlacement, type RingPlacement, type RingPlacementOptions } from './ring.js';
import type { TransportEnvelope } from './router.js';

/** Upper bound of one node-to-node request, ms; the envelopes' own deadlines are shorter. */
const LONGEST_REQUEST_MS = 120_000;

/** How a node takes part in the cluster. */
export interface ClusterOptions {
  nodeId: string;
  store: MembershipStore;
  /** Shared secret of node-to-node requests; null: loopback peers only. */
  secret: string | null;
  heartbeatMs: number;
  failureTimeoutMs: number;
  /** How the ring is built (the bounded kinds). */
  ring?: RingPlacementOptions;
  /** Delivers an envelope here when a retry finds that the ring now names this node. */
  deliverLocal(envelope: TransportEnvelope): Promise<unknown>;
  /**
   * The ring changed (a node joined, left or was declared out; or this node rejoined).
   * Calls never overlap; changes that arrive meanwhile are folded into one more call.
   */
  onRingChange(change: RingChange): Promise<void>;
  /** This node was declared out and has rejoined: its actors may live elsewhere now. */
  onDeclaredOut(): Promise<void>;
  onError(error: unknown, context: string): void;
  /** Whether this node reaches Redis, told with each heartbeat (see `ringMembers`). @default always */
  redisReachable?: () => boolean;
}

/** One change of the ring as this node saw it. */
export interface RingChange {
  before: RingPlacement;
  after: RingPlacement;
}

/**
 * One node's part in the cluster: its membership (heartbeats in Postgres), the ring it routes
 * by (`LivePlacement`, rebuilt on every change of the live set) and the HTTP transport to
 * the other nodes. It reacts to changes in one place and one at a time, so the node's
 * hand-over logic never runs twice at once.
 */
export class Cluster {
  readonly nodeId: string;
  readonly placement: LivePlacement;
  readonly transport: HttpTransport;
  readonly failureTimeoutMs: number;
  private readonly options: ClusterOptions;
  private readonly addresses = new Map<string, string>();
  private membership: Membership | null = null;
  private reacting: Promise<void> | null = null;
  private again = false;
  /** The ring the last handled change ended on. */
  private handled: RingPlacement;
  private changes = 0;

  constructor(options: ClusterOptions) {
    this.options = options;
    this.nodeId = options.nodeId;
    this.failureTimeoutMs = options.failureTimeoutMs;
    this.placement = new LivePlacement(options.nodeId, options.ring);
    this.handled = this.placement.ring;
    this.transport = new HttpTransport({
      nodeId: options.nodeId,
      secret: options.secret,
      addressOf: (id) => this.addresses.get(id),
      ownerOf: (kind, key) => this.placement.ownerOf(kind, key),
      deliverLocal: (envelope) => options.deliverLocal(envelope),
      // The envelopes' deadlines bound each request: a long ask (a DAG delivery may take a
      // minute) must not be cut short and sent again.
      requestTimeoutMs: LONGEST_REQUEST_MS,
    });
  }

  /** The base URL of a live node, as the membership table has it. */
  addressOf(nodeId: string): string | undefined {
    return this.addresses.get(nodeId);
  }

  /**
   * Reads the live set without joining and routes by it, so that requests served before this
   * node has joined (it joins once it listens and knows its address) already reach the owners.
   */
  async prime(): Promise<void> {
    const live = await this.options.store.live(this.failureTimeoutMs);
    for (const node of live) this.addresses.set(node.id, node.address);
    this.placement.update(live.map((node) => node.id));
    this.handled = this.placement.ring;
  }

  /**
   * Whether this node may take actors over now: it has joined, and its last heartbeat was
   * accepted less than the failure timeout ago (see `Membership.inGoodStanding`).
   */
  get mayOwn(): boolean {
    return this.membership?.inGoodStanding ?? false;
  }

  /** How many times the ring changed since start. */
  get ringChanges(): number {
    return this.changes;
  }

  /**
   * Joins at `address` and takes the first live set. Resolves once the first ring change it
   * causes (this node's actors placed) has been handled.
   */
  async start(address: string): Promise<void> {
    const membership = new Membership({
      nodeId: this.nodeId,
      address,
      store: this.options.store,
      clock: systemClock,
      heartbeatMs: this.options.heartbeatMs,
      failureTimeoutMs: this.options.failureTimeoutMs,
      onError: (error, step: MembershipStep) => this.options.onError(error, `membership ${step}`),
      ...(this.options.redisReachable === undefined ? {} : { redisReachable: this.options.redisReachable }),
      onDeclaredOut: () => {
        void this.options
          .onDeclaredOut()
          .catch((error: unknown) => this.options.onError(error, 'after being declared out'));
      },
    });
    membership.onChange((live) => this.take(live));
    this.membership = membership;
    await membership.start();
    await this.settled();
    // The others would hear of this node at their next beat. Told now, they route by the new
    // ring (and begin handing over what moves here) before this node takes anything over,
    // so two views of the ring fight over a partition for as short a time as possible.
    await Promise.all(this.peerAddresses().map((address) => notifyRefresh(address, this.options.secret)));
  }

  /** Re-reads the live set now (a peer joined or is leaving); never rejects. */
  async refresh(): Promise<void> {
    await this.membership?.refresh();
  }

  /** Resolves once no ring change is being handled. */
  async settled(): Promise<void> {
    while (this.reacting !== null) await this.reacting;
  }

  /**
   * Graceful shutdown, after the node's actors have handed off: leaves the cluster (out of
   * every live set at once) and tells the peers, so they take over without waiting for the
   * failure timeout. Then closes the transport.
   */
  async leave(): Promise<void> {
    const membership = this.membership;
    const peers = this.peerAddresses();
    this.placement.leave(membership?.liveIds ?? []);
    if (membership !== null && membership.state === 'running') {
      await membership.stop().catch((error: unknown) => this.options.onError(error, 'leaving the cluster'));
    }
    await Promise.all(peers.map((address) => notifyRefresh(address, this.options.secret)));
    await this.transport.close();
  }

  /** Every node the membership table holds, with liveness. */
  nodes(): Promise<ClusterNodeStatus[]> {
    return this.options.store.all(this.failureTimeoutMs);
  }

  private take(live: readonly ClusterNode[]): void {
    for (const node of live) this.addresses.set(node.id, node.address);
    if (this.placement.update(live.map((node) => node.id)) === null) return;
    this.changes++;
    this.transport.ringChanged();
    if (this.reacting !== null) {
      this.again = true;
      return;
    }
    this.reacting = this.react().finally(() => {
      this.reacting = null;
    });
  }

  /** Handles ring changes one at a time; changes that came meanwhile make one more pass. */
  private async react(): Promise<void> {
    do {
      this.again = false;
      const before = this.handled;
      const after = this.placement.ring;
      this.handled = after;
      try {
        await this.options.onRingChange({ before, after });
      } catch (error) {
        this.options.onError(error, 'handling a ring change');
      }
    } while (this.again);
  }

  private peerAddresses(): string[] {
    const ids = this.membership?.liveIds ?? [];
    return ids.filter((id) => id !== this.nodeId).flatMap((id) => this.addresses.get(id) ?? []);
  }
}
