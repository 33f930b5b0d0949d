/**
 * A worker's life as a string-union phase whose legal moves are written down once, as the
 * runtime's cells keep theirs (`src/runtime/cell-lifecycle.ts`; the SDK imports nothing of the
 * server, so this is its own small copy of the idiom). A move the table does not allow is a bug
 * in the SDK: it throws instead of leaving the worker in a phase no code expects.
 */
export class Lifecycle<P extends string> {
  private current: P;

  constructor(
    /** What the phases belong to, as the error names it. */
    private readonly what: string,
    private readonly moves: Readonly<Record<P, readonly P[]>>,
    initial: P,
  ) {
    this.current = initial;
  }

  get phase(): P {
    return this.current;
  }

  /** Whether the phase is one of `phases`. */
  is(...phases: readonly P[]): boolean {
    return phases.includes(this.current);
  }

  /** Moves to `next`; throws when the table does not allow it from the current phase. */
  moveTo(next: P): void {
    if (!this.moves[this.current].includes(next))
      throw new Error(`${this.what}: illegal phase move ${this.current} → ${next} (a bug in the worker SDK)`);
    this.current = next;
  }
}
