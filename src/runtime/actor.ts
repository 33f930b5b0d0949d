import type { Cancel, Clock } from './clock.js';

/**
 * The public face of the actor runtime. An actor is a small reducer,
 * `(state, message, ctx) → state`, over a discriminated union of messages, addressed by
 * `(kind, key)`. The runtime guarantees one message at a time per actor.
 */

/** Every message is a discriminated union member. */
export interface Message {
  readonly type: string;
}

declare const replyBrand: unique symbol;

/**
 * A message that expects an answer of type `R`. The brand is never set at run time; it lets
 * `ask` infer its result type from the message.
 */
export type Ask<M extends Message, R> = M & { readonly [replyBrand]?: R };

/** The answer type of a message: what `ask` resolves to. */
export type ReplyOf<M> = M extends { readonly [replyBrand]?: infer R } ? R : void;

/**
 * The answer type of the member of union `M` that `T` is, looked up by `type`, so that
 * `ask({ type: 'x', … })` with a plain object literal still gets the declared reply type.
 */
export type ReplyFor<M extends Message, T extends M> = ReplyOf<Extract<M, { type: T['type'] }>>;

/** A typed address of one actor. Cheap to create; holds no state. */
export interface ActorRef<M extends Message> {
  readonly kind: string;
  readonly key: string;
  /** Fire-and-forget. Throws `mailbox_full` when the mailbox is at capacity. */
  tell(message: M): void;
  /** Sends and waits for the reply; rejects with `ask_timeout` after `timeoutMs`. */
  ask<T extends M>(message: T, timeoutMs?: number): Promise<ReplyFor<M, T>>;
}

/** What a handler can do besides returning its next state. */
export interface ActorContext<M extends Message> {
  readonly kind: string;
  readonly key: string;
  readonly nodeId: string;
  /** The fencing epoch this activation holds (0 for kinds that do not snapshot). */
  readonly epoch: number;
  readonly clock: Clock;
  readonly self: ActorRef<M>;
  readonly system: ActorSystemApi;
  /** Answers the `ask` being handled; ignored for a `tell`. */
  reply(value: unknown): void;
  /**
   * A volatile timer: delivers `message` to this actor after `delayMs` (clamped). Timers of an
   * actor are cancelled when it deactivates.
   *
   * The message is a duty: if its handler fails (a store blip), the runtime delivers it again
   * after a backoff, for as long as the actor lives, and reports each failure with the try
   * count. So a handler re-arms its next timer only on success and lets errors propagate.
   */
  schedule(delayMs: number, message: M): Cancel;
  /** Persists `state` with this activation's epoch; rejects with `stale_epoch` if fenced. */
  snapshot(state: unknown): Promise<void>;
  /** Deactivates the actor once the current message is done. */
  stop(): void;
}

/** Why an actor is leaving memory. */
export type DeactivationReason = 'passivated' | 'stopped' | 'shutdown' | 'failed';

/** The definition of one actor kind. */
export interface Behavior<S, M extends Message> {
  readonly kind: string;
  /**
   * `snapshot`: activation takes ownership `(node, epoch + 1)` in the snapshot store and
   * `activate` receives the last snapshot. `external`: the actor's durable state lives
   * elsewhere (a lease's is its task row); no snapshot row is touched.
   */
  readonly persistence: 'snapshot' | 'external';
  /** Builds the state on activation, from `snapshot` (null on first activation) and the stores. */
  activate(ctx: ActorContext<M>, snapshot: unknown): Promise<S>;
  /** Handles one message; never runs concurrently with another message of this actor. */
  receive(state: S, message: M, ctx: ActorContext<M>): Promise<S> | S;
  /** Runs before the actor leaves memory (after its last message). */
  deactivate?(state: S, ctx: ActorContext<M>, reason: DeactivationReason): Promise<void>;
  /** Idle time after which the actor passivates. Absent: it never passivates. */
  readonly idlePassivationMs?: number;
  /** Mailbox capacity. @default 10000 */
  readonly mailboxCapacity?: number;
  /** What the admin endpoint shows of the state. @default the state itself */
  describe?(state: S): unknown;
}

/** One live actor, as the admin endpoint lists it. */
export interface ActorInfo {
  kind: string;
  key: string;
  node: string;
  mailboxDepth: number;
  activatedAt: string;
  lastMessageAt: string | null;
  epoch: number;
  snapshotVersion: number | null;
  state?: unknown;
}

/** The part of the actor system that handlers and services use. */
export interface ActorSystemApi {
  readonly nodeId: string;
  ref<M extends Message>(kind: string, key: string): ActorRef<M>;
  /** Activates an actor now (for always-on kinds) and resolves when it is live. */
  ensureActive(kind: string, key: string): Promise<void>;
  list(filter?: { kind?: string; limit?: number }): ActorInfo[];
  inspect(kind: string, key: string): ActorInfo | null;
}
