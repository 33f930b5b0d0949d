import type { Message } from './actor.js';
import type { Cancel } from './clock.js';
import type { CellHost } from './host.js';
import { retryDelayMs } from './supervision.js';
import type { TimerEntry, TimerTarget } from './timer-queue.js';

/** What the timers of one actor act on: its cell. */
export interface DutyCell<M extends Message> {
  readonly kind: string;
  readonly key: string;
  /** True while the actor may arm timers: activating or active, and not stopping. */
  readonly live: boolean;
  /** Puts a message in the actor's mailbox; throws `mailbox_full` when it is at capacity. */
  post(message: M): void;
}

/** When a failed duty is delivered again: failures in a row, and the backoff. */
export interface DutyRetry {
  attempt: number;
  retryInMs: number;
}

/**
 * The timers of one actor (`ctx.schedule`) and the supervision of their messages, its
 * duties. A duty — a tick, a cascade, a lease's expiry — is what the actor relies on to make
 * progress, and its handler re-arms it only when it succeeds: so a duty whose handler fails,
 * or that a full mailbox refuses, is delivered again after a backoff (100 ms doubling to 2 s
 * by default) for as long as the actor lives. Created with the actor's first timer.
 */
export class CellTimers<M extends Message> implements TimerTarget<Message> {
  /** Most actors hold one timer at a time: a small array, not a Set. */
  private entries: TimerEntry<Message>[] = [];
  /** Timer messages posted and not yet handled. */
  private posted: Set<Message> | null = null;
  /** The message being handled, when it is a duty. */
  private current: M | null = null;
  /** Failures in a row of each duty (by message type); absent once it succeeds. */
  private failures: Map<string, number> | null = null;

  constructor(
    private readonly host: Pick<CellHost, 'timers' | 'dutyRetry' | 'report' | 'dutyEnded'>,
    private readonly cell: DutyCell<M>,
  ) {}

  /** Delivers `message` after `delayMs`; the caller has checked that the actor is live. */
  add(delayMs: number, message: M): Cancel {
    const entry = this.host.timers.add(delayMs, this, message);
    this.entries.push(entry);
    return () => this.cancel(entry);
  }

  /** The node's timer queue calls this when a timer of this actor is due. */
  onTimer(message: Message, entry: TimerEntry<Message>): void {
    this.forget(entry);
    this.post(message as M);
  }

  /** A message starts: notes whether it is a duty. */
  begin(message: M): void {
    this.current = this.posted?.delete(message) === true ? message : null;
  }

  /** The message's handler succeeded: a duty's count of failures starts again, and a run of them is over. */
  succeeded(): void {
    if (this.current === null) return;
    const type = this.current.type;
    this.current = null;
    const failures = this.failures?.get(type);
    if (failures === undefined) return;
    this.failures!.delete(type);
    this.ended(type, failures, 'recovered');
  }

  /** The message's handler failed: whether it was a duty. */
  failed(message: M): boolean {
    const duty = message === this.current;
    this.current = null;
    return duty;
  }

  /** Delivers a failed duty again after a backoff; null when the actor is leaving anyway. */
  retry(message: M): DutyRetry | null {
    if (!this.cell.live) return null;
    const failures = (this.failures ??= new Map<string, number>());
    const attempt = (failures.get(message.type) ?? 0) + 1;
    failures.set(message.type, attempt);
    const retryInMs = retryDelayMs(attempt, this.host.dutyRetry);
    this.add(retryInMs, message);
    return { attempt, retryInMs };
  }

  /** Cancels every timer; messages already posted are no longer duties, and failing ones are given up. */
  cancelAll(): void {
    for (const entry of this.entries) this.host.timers.cancel(entry);
    this.entries = [];
    this.posted = null;
    const failing = this.failures;
    this.failures = null;
    for (const [type, failures] of failing ?? []) this.ended(type, failures, 'abandoned');
  }

  private ended(messageType: string, failures: number, outcome: 'recovered' | 'abandoned'): void {
    const { kind, key } = this.cell;
    this.host.dutyEnded({ kind, key, messageType, failures, outcome });
  }

  private cancel(entry: TimerEntry<Message>): void {
    if (this.forget(entry)) this.host.timers.cancel(entry);
  }

  private forget(entry: TimerEntry<Message>): boolean {
    const i = this.entries.indexOf(entry);
    if (i < 0) return false;
    this.entries.splice(i, 1);
    return true;
  }

  /** A timer's message is a duty: a full mailbox delays it (backoff), it does not drop it. */
  private post(message: M): void {
    const posted = (this.posted ??= new Set());
    posted.add(message);
    try {
      this.cell.post(message);
    } catch (error) {
      posted.delete(message);
      const retry = this.retry(message);
      const { kind, key } = this.cell;
      this.host.report(error, { kind, key, during: 'timer', messageType: message.type, ...retry });
    }
  }
}
