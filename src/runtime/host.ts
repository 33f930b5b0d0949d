import { WheelhouseError } from '../lib/errors.js';
import type { ActorRef, ActorSystemApi, Message } from './actor.js';
import type { PendingAsk } from './ask.js';
import type { Clock } from './clock.js';
import type { SnapshotStore } from './snapshots.js';
import type { RetryPolicy } from './supervision.js';
import type { TimerQueue } from './timer-queue.js';

/** Where in an actor's life an error was reported. */
export type ActorErrorPhase = 'activate' | 'receive' | 'timer' | 'deactivate' | 'release' | 'deliver';

/** What the `onError` hook is told besides the error. */
export interface ActorErrorInfo {
  kind: string;
  key: string;
  during: ActorErrorPhase;
  /** The message involved, when there was one. */
  messageType?: string;
  /** Told messages that were accepted but will not be handled because of this error. */
  droppedTells?: number;
  /**
   * Set when the failed message was a duty (one of the actor's own timer messages): failures
   * of it in a row, this one included, and when it is delivered again, ms from now.
   */
  attempt?: number;
  retryInMs?: number;
}

/**
 * A run of failures of an actor's duty (one of its timer messages) is over: it succeeded, or
 * the actor left with it still failing.
 */
export interface ActorDutyEnded {
  kind: string;
  key: string;
  messageType: string;
  /** Failures in a row before it ended. */
  failures: number;
  outcome: 'recovered' | 'abandoned';
}

/** What a cell needs from the system that hosts it. */
export interface CellHost {
  readonly nodeId: string;
  readonly clock: Clock;
  /** Every actor timer of this node, on one clock timer. */
  readonly timers: TimerQueue<Message>;
  readonly snapshots: SnapshotStore;
  readonly system: ActorSystemApi;
  /** How a failed duty (an actor's timer message) is delivered again. */
  readonly dutyRetry: RetryPolicy;
  ref<M extends Message>(kind: string, key: string): ActorRef<M>;
  /** Hands an error to the system's `onError` hook. */
  report(error: unknown, info: ActorErrorInfo): void;
  /** Hands the end of a duty's failures to the system's `onDutyEnded` hook. */
  dutyEnded(ended: ActorDutyEnded): void;
  /** Routes a message that a stopped instance accepted but did not handle. */
  redeliver(kind: string, key: string, message: Message, ask: PendingAsk | null): void;
  /** The cell has left memory; forget it unless a successor already took its place. */
  gone(cell: { readonly kind: string; readonly key: string }): void;
}

/** The error for anything refused because the system is shutting down. */
export function shuttingDownError(): WheelhouseError {
  return new WheelhouseError('not_ready', 'The actor system is shutting down.');
}
