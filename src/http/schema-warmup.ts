/**
 * Route schemas are compiled on their route's first use, not as the server starts (decision
 * 0047): the embedded node's start spent 0.55–0.70 s compiling them. Once the server listens,
 * what no request has compiled yet is compiled in the background, a few schemas per turn of the
 * event loop, so that the first requests of a node's life do not each pay for their route's
 * compile (on a loaded machine, enough to push a one-second deadline past its heartbeat).
 * One per server: it holds that server's compiles, and stops when the server closes.
 */
export class SchemaWarmup {
  /** Compiles that have not run yet, each removed once it has (by a request or the warm-up). */
  private readonly pending = new Set<() => void>();
  private stopped = false;

  /**
   * A compile run at most once, by the first of the answered function and the warm-up:
   * `compile` makes the value, the function answers it (compiling it first when needed).
   */
  lazy<T>(compile: () => T): () => T {
    let value: T | undefined;
    let done = false;
    const run = (): void => {
      if (done) return;
      value = compile();
      done = true;
      this.pending.delete(run);
    };
    this.pending.add(run);
    return () => {
      if (!done) run();
      return value as T;
    };
  }

  /**
   * Compiles every schema still pending, `PER_TURN` per turn, in the background, until done or
   * stopped. A compile that fails is left to its route's first request, where the error is
   * answered.
   */
  warm(): void {
    const step = (): void => {
      let n = 0;
      for (const run of this.pending) {
        if (this.stopped || n++ >= PER_TURN) break;
        this.pending.delete(run);
        try {
          run();
        } catch {
          // Its route's first request compiles it again and answers the error.
        }
      }
      if (!this.stopped && this.pending.size > 0) setImmediate(step);
    };
    setImmediate(step);
  }

  stop(): void {
    this.stopped = true;
  }

  /** Compiles not yet run. */
  get size(): number {
    return this.pending.size;
  }
}

/** Schemas compiled per turn of the event loop while warming up. */
const PER_TURN = 4;
