import { WheelhouseError } from '../lib/errors.js';
import type { Cancel, Clock } from './clock.js';

/**
 * The caller's side of one `ask`: the promise it waits on and the one timer that bounds the
 * wait. It settles exactly once; whatever comes later (a late reply, a late error) is dropped.
 *
 * A handler's `ctx.reply(value)` only records the value: the ask resolves when the handler
 * has finished, so a handler that replies and then fails (a snapshot refused, say) rejects
 * the ask instead of reporting a success that did not stick.
 */
export class PendingAsk {
  /** What `ask` returns. */
  readonly promise: Promise<unknown>;
  private resolvePromise!: (value: unknown) => void;
  private rejectPromise!: (error: unknown) => void;
  private readonly cancelTimer: Cancel;
  private settled = false;
  private replied = false;
  private replyValue: unknown = undefined;

  /**
   * Starts the timeout. `kind`, `key` and `messageType` only name the ask in its
   * `ask_timeout` error.
   */
  constructor(
    clock: Clock,
    readonly timeoutMs: number,
    private readonly kind: string,
    private readonly key: string,
    private readonly messageType: string,
  ) {
    this.promise = new Promise<unknown>((resolve, reject) => {
      this.resolvePromise = resolve;
      this.rejectPromise = reject;
    });
    this.cancelTimer = clock.setTimer(timeoutMs, () => this.timedOut());
  }

  /** True once resolved, rejected or timed out. */
  get isSettled(): boolean {
    return this.settled;
  }

  /** Records the handler's answer; the first reply wins. */
  reply(value: unknown): void {
    if (this.replied) return;
    this.replied = true;
    this.replyValue = value;
  }

  /** The handler finished: resolves with its reply, or `undefined` if it gave none. */
  complete(): void {
    this.resolve(this.replyValue);
  }

  /** Resolves with `value` (a reply carried back from another node). */
  resolve(value: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.cancelTimer();
    this.resolvePromise(value);
  }

  /** Rejects with `error`: the handler threw, or the message could not be delivered. */
  fail(error: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.cancelTimer();
    this.rejectPromise(error);
  }

  private timedOut(): void {
    if (this.settled) return;
    this.settled = true;
    this.rejectPromise(
      new WheelhouseError(
        'ask_timeout',
        `${this.kind}/${this.key} did not answer '${this.messageType}' within ${this.timeoutMs} ms.`,
        { details: { kind: this.kind, key: this.key, messageType: this.messageType, timeoutMs: this.timeoutMs } },
      ),
    );
  }
}

/** Checks an ask timeout: a positive, finite number of milliseconds. */
export function validAskTimeoutMs(timeoutMs: number, name: string): number {
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new WheelhouseError('internal', `${name} must be a positive number of milliseconds, got ${timeoutMs}.`);
  }
  return timeoutMs;
}
