import type { Behavior, Message } from './actor.js';
import type { Cancel, Clock } from './clock.js';

/** What the idle timer of one actor asks of its cell. */
export interface IdleCell<S> {
  readonly currentState: S | undefined;
  /** True while it is idle and may passivate: active, not stopping, no message running or waiting. */
  readonly restful: boolean;
  passivateIdle(): void;
}

type IdleRules<S> = Pick<Behavior<S, Message, unknown>, 'idlePassivationMs' | 'idlePassivationMsFor'>;

/**
 * When an idle actor passivates: one timer per idle stretch, re-armed for the remainder when
 * it fires if a message came since. An earlier deadline than the armed one — the actor went
 * idle in a state that may leave sooner (`idlePassivationMsFor`) — moves it; a later one is
 * re-armed for the remainder when the armed one fires. The actor's other timers are in duties.ts.
 */
export class IdleTimer<S> {
  private cancelTimer: Cancel | null = null;
  private atMs = 0;
  private sinceMs = 0;

  constructor(
    private readonly clock: Clock,
    private readonly rules: IdleRules<S>,
    private readonly cell: IdleCell<S>,
  ) {}

  /** The actor went idle (its mailbox is empty). */
  idle(): void {
    const now = this.clock.now();
    this.sinceMs = now;
    const limitMs = this.limitMs(now);
    if (limitMs === undefined) return;
    if (this.cancelTimer !== null && now + limitMs >= this.atMs) return;
    this.cancelTimer?.();
    this.arm(limitMs);
  }

  cancel(): void {
    this.cancelTimer?.();
    this.cancelTimer = null;
  }

  /** How long the actor may stay idle in its state now (undefined: for ever). */
  private limitMs(nowMs: number): number | undefined {
    const longest = this.rules.idlePassivationMs;
    if (longest === undefined || this.rules.idlePassivationMsFor === undefined) return longest;
    const forState = this.rules.idlePassivationMsFor(this.cell.currentState as S, nowMs);
    return forState === undefined ? longest : Math.max(0, forState);
  }

  private arm(delayMs: number): void {
    this.atMs = this.clock.now() + delayMs;
    this.cancelTimer = this.clock.setTimer(delayMs, () => this.fired());
  }

  private fired(): void {
    this.cancelTimer = null;
    if (!this.cell.restful) return; // a message runs: the cell calls `idle` again when it is done
    const now = this.clock.now();
    const limitMs = this.limitMs(now);
    if (limitMs === undefined) return;
    if (now < this.sinceMs) this.sinceMs = now; // the clock went backwards
    const idleMs = now - this.sinceMs;
    if (idleMs >= limitMs) this.cell.passivateIdle();
    else this.arm(limitMs - idleMs);
  }
}
