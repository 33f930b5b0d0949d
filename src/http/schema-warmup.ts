/**
 * Route schemas are compiled on their route's first use, not as the server starts (decision
 * 0047): the embedded node's start spent 0.55–0.70 s compiling them. Once the server listens,
 * what no request has compiled yet is compiled here in the background, a few schemas per turn
 * of the event loop, so that the first requests of a node's life do not each pay for their
 * route's compile (on a loaded machine, enough to push a one-second deadline past its heartbeat).
 */

/** Compiles that have not run yet, each removed once it has (by a request or the warm-up). */
const pending = new Set<() => void>();

/** Schemas compiled per turn of the event loop while warming up. */
const PER_TURN = 4;

/**
 * A compile run at most once, by the first of `get()` and the warm-up: `compile` makes the
 * value, `get` answers it (compiling it first when needed).
 */
export function lazyCompiled<T>(compile: () => T): () => T {
  let value: T | undefined;
  let done = false;
  const run = (): void => {
    if (done) return;
    value = compile();
    done = true;
    pending.delete(run);
  };
  pending.add(run);
  return () => {
    if (!done) run();
    return value as T;
  };
}

/**
 * Compiles every schema still pending, `PER_TURN` per turn, in the background. A compile that
 * fails is left to fail again at its route's first request, where the error is answered.
 */
export function warmSchemas(): void {
  const step = (): void => {
    let n = 0;
    for (const run of pending) {
      pending.delete(run);
      try {
        run();
      } catch {
        // Its route's first request compiles it again and answers the error.
      }
      if (++n >= PER_TURN) break;
    }
    if (pending.size > 0) setImmediate(step);
  };
  setImmediate(step);
}

/** Compiles not yet run (tests). */
export function pendingSchemas(): number {
  return pending.size;
}
