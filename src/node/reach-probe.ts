import type { Clock } from '../runtime/clock.js';

/**
 * Whether a store still answers, asked once an interval: a node cut off from Redis alone (its
 * Postgres, and so its heartbeat, still fine) says so in its heartbeat, and the ring moves its
 * wheel partitions to nodes that can fire them (migration 000015, `ringMembers`). The node's
 * own commands cannot tell it: on a silent cut they wait out their timeout (5 s) one by one,
 * and an idle node sends none.
 *
 * One probe in flight at a time; the store counts as reached while a probe was answered less
 * than `patienceMs` ago — the failure timeout, the patience the cluster has with a silent
 * node, so a stall or a slow answer that would not put a node out does not move its
 * partitions either.
 */
export class ReachProbe {
  private lastAnswerMs: number;
  private inFlight = false;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly probe: () => Promise<unknown>,
    private readonly options: { intervalMs: number; patienceMs: number; clock: Clock },
  ) {
    // Opened a moment ago: the backend's open reached the store.
    this.lastAnswerMs = options.clock.now();
  }

  start(): this {
    this.timer ??= setInterval(() => this.ask(), this.options.intervalMs);
    this.timer.unref();
    return this;
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  /** True while the store answered within the patience. */
  reached(): boolean {
    return this.options.clock.now() - this.lastAnswerMs < this.options.patienceMs;
  }

  private ask(): void {
    if (this.inFlight) return;
    this.inFlight = true;
    this.probe()
      .then(() => {
        this.lastAnswerMs = this.options.clock.now();
      })
      .catch(() => undefined)
      .finally(() => {
        this.inFlight = false;
      });
  }
}
