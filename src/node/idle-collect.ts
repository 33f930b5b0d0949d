import { performance } from 'node:perf_hooks';
import v8 from 'node:v8';
import vm from 'node:vm';

/**
 * Gives back the memory of actors that left once the node has gone quiet (decision 0050).
 *
 * V8 collects its old generation when allocation reaches a limit it set at a multiple of what
 * the last full collection left (up to 4× without a heap ceiling), and nothing collects an
 * idle Node process: a node that ran 1 000 000 limit keys one after another and then went
 * quiet held 585 MiB of their garbage 45 s later, against 60 MiB live. So, checked every
 * CHECK_MS: when at least MIN_DEPARTED actors left since the last collection, the event loop
 * was busy less than QUIET_UTILIZATION of the interval, and the heap holds at least
 * MIN_GARBAGE_BYTES more than the last collection left, full collections run. One frees the
 * garbage, but the pages its survivors are scattered over stay committed (V8 moves a few MB of
 * them a collection); so more follow, ROUND_GAP_MS apart, while the heap commits at least
 * MIN_GARBAGE_BYTES more than it uses and each shrinks it by MIN_SHRINK_BYTES, at most
 * MAX_ROUNDS. A busy node is left to V8 (its allocation reaches the limit soon, and a full
 * pause would cost its work), as is a node whose actors stay.
 */
export const CHECK_MS = 5_000;
export const MIN_DEPARTED = 10_000;
export const QUIET_UTILIZATION = 0.1;
export const MIN_GARBAGE_BYTES = 64 * 1024 * 1024;
export const MIN_SHRINK_BYTES = 4 * 1024 * 1024;
export const MAX_ROUNDS = 16;
export const ROUND_GAP_MS = 100;

/** A full collection, resolved once it ran. */
export type Collect = () => Promise<void>;

export interface HeapSize {
  /** Bytes of objects, live or not. */
  used: number;
  /** Bytes of pages the heap holds. */
  committed: number;
}

export interface IdleCollectDeps {
  /** Actors that left this node's memory since it started (`ActorSystem.departedTotal`). */
  departed(): number;
  /** @default v8.getHeapStatistics's used and total heap sizes */
  heap?: () => HeapSize;
  /** Share of the time since the last call that the event loop was busy, 0 – 1. @default eventLoopUtilization */
  utilization?: () => number;
  /**
   * Null: this process cannot be asked to collect, and the check does nothing.
   * @default fullCollection(), taken when first needed
   */
  collect?: Collect | null;
  /** Waits between two collections. @default a timer */
  pause?: (ms: number) => Promise<void>;
}

export interface IdleCollection {
  before: HeapSize;
  after: HeapSize;
  departed: number;
  rounds: number;
  ms: number;
}

export class IdleCollector {
  private readonly departed: () => number;
  private readonly heap: () => HeapSize;
  private readonly utilization: () => number;
  /** Undefined until first needed: a node that never collects never touches V8's flags. */
  private collect: Collect | null | undefined;
  private readonly pause: (ms: number) => Promise<void>;
  private departedAtLast: number;
  private usedAfterLast: number;

  constructor(deps: IdleCollectDeps) {
    this.departed = deps.departed;
    this.heap = deps.heap ?? v8HeapSize;
    this.utilization = deps.utilization ?? loopUtilization();
    this.collect = deps.collect;
    this.pause = deps.pause ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.departedAtLast = this.departed();
    this.usedAfterLast = this.heap().used;
  }

  /** One check (every CHECK_MS): the collections it ran, or null. */
  async check(): Promise<IdleCollection | null> {
    const busy = this.utilization();
    const departed = this.departed() - this.departedAtLast;
    if (departed < MIN_DEPARTED || busy >= QUIET_UTILIZATION) return null;
    const before = this.heap();
    if (before.used - this.usedAfterLast < MIN_GARBAGE_BYTES) return null;
    if (this.collect === undefined) this.collect = fullCollection();
    const collect = this.collect;
    if (collect === null) return null;
    const started = performance.now();
    let after = before;
    let rounds = 0;
    for (;;) {
      await collect();
      rounds++;
      const last = after;
      after = this.heap();
      const unused = after.committed - after.used;
      const shrank = last.committed - after.committed;
      if (rounds >= MAX_ROUNDS || unused < MIN_GARBAGE_BYTES || (rounds > 1 && shrank < MIN_SHRINK_BYTES)) break;
      await this.pause(ROUND_GAP_MS);
    }
    this.departedAtLast += departed;
    this.usedAfterLast = after.used;
    return { before, after, departed, rounds, ms: performance.now() - started };
  }
}

function v8HeapSize(): HeapSize {
  const stats = v8.getHeapStatistics();
  return { used: stats.used_heap_size, committed: stats.total_heap_size };
}

/** The event loop's utilization since the previous call (the first call: since the process started). */
function loopUtilization(): () => number {
  let last = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const delta = performance.eventLoopUtilization(now, last);
    last = now;
    return delta.utilization;
  };
}

type GcFunction = (options: { type: 'major'; execution: 'async' }) => Promise<void>;

/**
 * V8's own full collection. A process started with `--expose-gc` has it as `gc`; otherwise it
 * is taken from a context created while the flag is set, and the flag is cleared again so no
 * other context gets it. Null if neither works (the check then never collects).
 */
export function fullCollection(): Collect | null {
  const exposed = (globalThis as { gc?: GcFunction }).gc;
  let gc: GcFunction | undefined = typeof exposed === 'function' ? exposed : undefined;
  if (gc === undefined) {
    try {
      v8.setFlagsFromString('--expose-gc');
      const fromContext: unknown = vm.runInNewContext('gc');
      if (typeof fromContext === 'function') gc = fromContext as GcFunction;
    } catch {
      return null;
    } finally {
      v8.setFlagsFromString('--no-expose-gc');
    }
  }
  if (gc === undefined) return null;
  const run = gc;
  return () => run({ type: 'major', execution: 'async' });
}
