/**
 * Whether a store is reachable, as its connections show it, told as transitions: one `lost`
 * when the store stops answering, one `restored` when it answers again — never one report per
 * failed command or per reconnection attempt, which is what a down store produces many times
 * a second. The drivers feed it (`db.ts`: the outcome of each statement; `redis.ts`: ioredis's
 * connection events), and whoever watches (the node's log) says what the outage means.
 */

/** The stores a node reaches over the network. */
export type StoreName = 'postgres' | 'redis';

/** The store stopped answering. */
export interface ConnectionLost {
  store: StoreName;
  /** What the driver reported, when it said why. */
  error: unknown;
}

/** The store answers again. */
export interface ConnectionRestored {
  store: StoreName;
  /** How long it was lost, ms. */
  downMs: number;
  /** Failures reported while it was lost: failed statements, or failed reconnection attempts. */
  failures: number;
}

/** Hears the transitions of one store. */
export interface ConnectionWatcher {
  lost(event: ConnectionLost): void;
  restored(event: ConnectionRestored): void;
}

/**
 * The reachability of one store. The drivers report what they see — a statement that could
 * not reach the server, a connection that closed (`down`); a statement answered, a connection
 * ready (`up`) — and the first `down` after an `up` is the `lost` transition, the first `up`
 * after a `down` the `restored` one.
 *
 * Statement outcomes arrive out of order — a statement sent before the store went away may
 * fail after another has already succeeded on a new connection — so an outcome may carry the
 * `generation` its operation began in (`begin()`): an outcome from before the last transition
 * says nothing about now and is ignored.
 */
export class ConnectionHealth {
  private readonly watchers = new Set<ConnectionWatcher>();
  private lostAtMs: number | null = null;
  /** What the driver reported at the `lost` transition. */
  private lostBecause: unknown = null;
  private failures = 0;
  private transitions = 0;
  private closed = false;

  /** @param now wall time, ms: an outage is measured in real time whatever clock the node runs on */
  constructor(
    readonly store: StoreName,
    private readonly now: () => number = Date.now,
  ) {}

  /** False from the `lost` transition until the `restored` one. */
  get available(): boolean {
    return this.lostAtMs === null;
  }

  /**
   * Tells `watcher` of the transitions from now on — and at once of a loss in progress, so
   * that its `restored` never comes without a `lost` before it. Returns how to stop.
   */
  watch(watcher: ConnectionWatcher): () => void {
    this.watchers.add(watcher);
    if (this.lostAtMs !== null && !this.closed) watcher.lost({ store: this.store, error: this.lostBecause });
    return () => void this.watchers.delete(watcher);
  }

  /** The generation an operation starting now belongs to; pass it with its outcome. */
  begin(): number {
    return this.transitions;
  }

  /** The store could not be reached: a statement failed to reach it, a connection closed. */
  down(error: unknown, generation?: number): void {
    if (this.closed || this.stale(generation)) return;
    if (this.lostAtMs !== null) {
      this.failures++;
      return;
    }
    this.lostAtMs = this.now();
    this.lostBecause = error;
    this.failures = 1;
    this.transitions++;
    for (const watcher of [...this.watchers]) watcher.lost({ store: this.store, error });
  }

  /** The store was reached: a statement got an answer, a connection is ready. */
  up(generation?: number): void {
    if (this.closed || this.lostAtMs === null || this.stale(generation)) return;
    const downMs = this.now() - this.lostAtMs;
    this.lostAtMs = null;
    this.lostBecause = null;
    this.transitions++;
    for (const watcher of [...this.watchers]) watcher.restored({ store: this.store, downMs, failures: this.failures });
  }

  /**
   * The store is being closed on purpose: what its connections do from now on (they end) is
   * not an outage, and nothing more is reported.
   */
  close(): void {
    this.closed = true;
  }

  private stale(generation: number | undefined): boolean {
    return generation !== undefined && generation !== this.transitions;
  }
}
