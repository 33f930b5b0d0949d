import { randomUUID } from 'node:crypto';
import { Pool } from 'undici';
import type { Clock } from './clock.js';

/**
 * The keep-alive connections of the cluster transport: one pool per node address, each with
 * the stream of batches sent on it, closed once unused for a while.
 */

/** Keep-alive connections to one node. */
const CONNECTIONS_PER_NODE = 4;
/** A node's pool unused this long is closed (the next message opens a new one), ms. */
const POOL_IDLE_MS = 60_000;

/** The connections to one node's address and the stream of batches sent on them. */
export interface Destination {
  readonly address: string;
  readonly pool: Pool;
  readonly basePath: string;
  /** A fresh id per pool: the receiver orders batches per stream. */
  readonly stream: string;
  nextSeq: number;
  /** Sequence numbers of the batches awaiting their answer. */
  readonly awaiting: Set<number>;
  lastUsedMs: number;
}

export class PeerPools {
  private readonly destinations = new Map<string, Destination>();
  private lastSweepMs: number;

  constructor(
    private readonly clock: Clock,
    /** Base URL of a node as membership knows it; undefined if it is not live. */
    private readonly addressOf: (nodeId: string) => string | undefined,
  ) {
    this.lastSweepMs = clock.now();
  }

  /** The pool and stream for `nodeId`'s current address; throws if membership knows none. */
  destination(nodeId: string): Destination {
    const address = this.addressOf(nodeId);
    if (address === undefined) throw new Error(`node ${nodeId} has no known address (not a live member)`);
    const existing = this.destinations.get(address);
    if (existing !== undefined) return existing;
    const url = new URL(address);
    const destination: Destination = {
      address,
      pool: new Pool(url.origin, { connections: CONNECTIONS_PER_NODE, pipelining: 1, keepAliveTimeout: 30_000 }),
      basePath: url.pathname.replace(/\/+$/, ''),
      stream: randomUUID(),
      nextSeq: 0,
      awaiting: new Set(),
      lastUsedMs: this.clock.now(),
    };
    this.destinations.set(address, destination);
    return destination;
  }

  /** Closes pools unused for a while (nodes that left, or went quiet); checked once a minute. */
  closeIdle(now: number): void {
    if (now - this.lastSweepMs < POOL_IDLE_MS) return;
    this.lastSweepMs = now;
    for (const [address, destination] of this.destinations) {
      if (destination.awaiting.size > 0 || now - destination.lastUsedMs < POOL_IDLE_MS) continue;
      this.destinations.delete(address);
      // close() rejects only for a pool closed before, and this one was not.
      destination.pool.close().catch(() => undefined);
    }
  }

  /** Forgets every pool; resolves once each has closed (after its requests in flight). */
  closeAll(): Promise<void> {
    const pools = [...this.destinations.values()].map((d) => d.pool);
    this.destinations.clear();
    return Promise.all(pools.map((pool) => pool.close())).then(() => undefined);
  }
}
