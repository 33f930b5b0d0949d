import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';

import type { NodeEvents } from '../domain/events.js';
import type { BackoffPolicy } from '../domain/model.js';
import type { CompiledOptions } from '../lib/config.js';
import type { TypedEvents } from '../lib/events.js';
import { AlignedClock } from '../runtime/aligned-clock.js';
import { offsetClock, systemClock, type Clock } from '../runtime/clock.js';
import type { Backend } from '../store/backend.js';
import type { LimitCatalog } from '../services/limit-catalog.js';

/** What every part of a node is built with. */
export interface NodeContext {
  readonly options: CompiledOptions;
  readonly backend: Backend;
  /** The node's time: the database's on Postgres (see `nodeClock`). */
  readonly clock: Clock;
  readonly log: Logger;
  readonly events: TypedEvents<NodeEvents>;
  readonly backoff: BackoffPolicy;
  /** Every limit declaration, as this node last read them (flow control). */
  readonly limits: LimitCatalog;
  onError(error: unknown, context: string): void;
}

/** Samples of the database's clock taken before a node starts, to align its own on it. */
const CLOCK_SAMPLES_AT_START = 5;

/**
 * A Postgres node reads time as the database does (docs/decisions/0007-…): whatever its own
 * clock says, it fires, claims and expires leases on the same time as every other node. A
 * clock given by a test is used as it is.
 */
export async function nodeClock(
  options: CompiledOptions,
  backend: Backend,
  given: Clock | undefined,
): Promise<{ clock: Clock; aligned: AlignedClock | null }> {
  const own = given ?? ownClock(options);
  if (given !== undefined || backend.kind !== 'postgres') return { clock: own, aligned: null };
  const aligned = new AlignedClock(own, () => backend.databaseNowMs());
  for (let i = 0; i < CLOCK_SAMPLES_AT_START; i++) await aligned.sample();
  return { clock: aligned, aligned };
}

/** The machine's clock, set wrong on purpose where a test of clock skew or steps asks for it. */
function ownClock(options: CompiledOptions): Clock {
  const offset = offsetClock(systemClock, options.testClockOffsetMs);
  const file = options.testClockStepFile;
  if (file === null) return offset;
  let stepMs = 0;
  const read = (): void => {
    try {
      const seconds = Number(readFileSync(file, 'utf8').trim());
      if (Number.isFinite(seconds)) stepMs = Math.round(seconds * 1000);
    } catch {
      // No file (yet): no step.
    }
  };
  read();
  // Read every 100 ms (a step lands within that), for the node's life; never keeps a process
  // alive. Timers keep running on the monotonic clock, as on a real machine whose clock is stepped.
  setInterval(read, 100).unref();
  return { now: () => offset.now() + stepMs, setTimer: (delayMs, fn) => offset.setTimer(delayMs, fn) };
}
