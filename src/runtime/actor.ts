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

declare const messageBrand: unique symbol;

/**
 * How a kind's snapshots are written and read back. Every snapshot is stored with `version`;
 * `decode` gets the stored value and the version it was written with (0: written before
 * snapshots carried one) and returns the typed snapshot, or throws on a shape it does not
 * recognise, which fails the activation.
 */
export interface SnapshotCodec<Snap> {
  /** The version written with each snapshot now: a positive integer, raised when `Snap` changes. */
  readonly version: number;
  decode(raw: unknown, version: number): Snap;
}

/**
 * The token of one actor kind: its name, the messages its actors take (`M`, a phantom type:
 * nothing of it exists at run time) and, for kinds that snapshot, how their snapshots are
 * read (`Snap`). `ref(kind, key)` takes its message type from the token, so an address can
 * only carry messages of its kind. Made by `defineKind`.
 */
export interface ActorKind<M extends Message, Snap = never> {
  readonly name: string;
  /** null: the kind keeps no snapshot (`persistence: 'external'`). */
  readonly snapshot: SnapshotCodec<Snap> | null;
  /** Never set. In and out, so `M` is invariant: one kind's token is not another's. */
  readonly [messageBrand]?: (message: M) => M;
}

/** A kind by token or by name, where the message type does not matter (admin, activation). */
export type KindName = string | { readonly name: string };

/** The name of a kind given by token or by name. */
export function kindName(kind: KindName): string {
  return typeof kind === 'string' ? kind : kind.name;
}

/**
 * Declares an actor kind: `defineKind<LeaseMessage>('lease')`, or for a kind that snapshots
 * `defineKind<WheelMessage, WheelSnapshot>('wheel', { version: 1, decode })`.
 */
export function defineKind<M extends Message>(name: string): ActorKind<M>;
export function defineKind<M extends Message, Snap>(name: string, snapshot: SnapshotCodec<Snap>): ActorKind<M, Snap>;
export function defineKind<M extends Message, Snap>(name: string, snapshot?: SnapshotCodec<Snap>): ActorKind<M, Snap> {
  if (typeof name !== 'string' || name === '') throw new TypeError('An actor kind needs a non-empty name.');
  if (snapshot !== undefined && !(Number.isInteger(snapshot.version) && snapshot.version > 0)) {
    throw new TypeError(`Actor kind '${name}': snapshot version must be a positive integer, got ${snapshot.version}.`);
  }
  return Object.freeze({ name, snapshot: snapshot ?? null });
}

/** A typed address of one actor. Cheap to create; holds no state. */
export interface ActorRef<M extends Message> {
  readonly kind: string;
  readonly key: string;
  /** Fire-and-forget. Throws `mailbox_full` when the mailbox is at capacity. */
  tell(message: M): void;
  /** Sends and waits for the reply; rejects with `ask_timeout` after `timeoutMs`. */
  ask<T extends M>(message: T, timeoutMs?: number): Promise<ReplyFor<M, T>>;
}

/** What a handler can do besides returning its next state. `Snap`: what it may snapshot. */
export interface ActorContext<M extends Message, Snap = never> {
  readonly kind: string;
  readonly key: string;
  readonly nodeId: string;
  /** The fencing epoch this activation holds (0 for kinds that do not snapshot). */
  readonly epoch: number;
  readonly clock: Clock;
  readonly self: ActorRef<M>;
  readonly system: ActorSystemApi;
  /**
   * Answers `message`, the ask being handled, with a value of the type its `Ask` declares:
   * replying with anything else does not compile. Ignored for a tell, or for any message
   * but the one being handled. The first reply wins.
   */
  reply<T extends M>(message: T, value: NoInfer<ReplyFor<M, T>>): void;
  /**
   * A volatile timer: delivers `message` to this actor after `delayMs` (clamped). Timers of an
   * actor are cancelled when it deactivates.
   *
   * The message is a duty: if its handler fails (a store blip), the runtime delivers it again
   * after a backoff, for as long as the actor lives, and reports each failure with the try
   * count. So a handler re-arms its next timer only on success and lets errors propagate.
   */
  schedule(delayMs: number, message: M): Cancel;
  /**
   * Persists `state`, with the kind's snapshot version, under this activation's epoch;
   * rejects with `stale_epoch` if fenced. Only kinds with a snapshot codec can.
   */
  snapshot(state: Snap): Promise<void>;
  /** Deactivates the actor once the current message is done. */
  stop(): void;
  /**
   * Passivates the actor once the current message (or the activation) is handled, if no other
   * message is waiting: a waiting one runs first, and its handler decides again (a handler
   * that does not call `passivate` keeps the actor). Timers are cancelled as it leaves. For an
   * actor that knows nothing will happen until a message wakes it.
   */
  passivate(): void;
}

/** Why an actor is leaving memory. */
export type DeactivationReason = 'passivated' | 'stopped' | 'shutdown' | 'failed';

/** The definition of one actor kind. */
export interface Behavior<S, M extends Message, Snap = never> {
  readonly kind: ActorKind<M, Snap>;
  /**
   * `snapshot`: activation takes ownership `(node, epoch + 1)` in the snapshot store and
   * `activate` receives the last snapshot, decoded by the kind's codec (which it must have).
   * `external`: the actor's durable state lives elsewhere (a lease's is its task row); no
   * snapshot row is touched.
   */
  readonly persistence: 'snapshot' | 'external';
  /**
   * `ring` (the default): the actor lives on the node the ring names, and moves when the ring
   * does. `holder`: it lives on the node that started it (`ActorSystem.startHere`) for as long
   * as that node holds it — messages sent on that node reach it there, and a ring change does
   * not move it; messages sent on other nodes go to the ring's owner, which is also where it is
   * started again when its holder is gone (recovery). For an actor that stands for work one
   * node does, such as a lease on the node that claimed the task. Only `external` kinds may be
   * `holder`: two instances may briefly live on two nodes, so every write the actor makes must
   * be a compare-and-set on its durable state.
   */
  readonly placement?: 'ring' | 'holder';
  /** Builds the state on activation, from `snapshot` (null on first activation) and the stores. */
  activate(ctx: ActorContext<M, Snap>, snapshot: Snap | null): Promise<S>;
  /** Handles one message; never runs concurrently with another message of this actor. */
  receive(state: S, message: M, ctx: ActorContext<M, Snap>): Promise<S> | S;
  /** Runs before the actor leaves memory (after its last message). */
  deactivate?(state: S, ctx: ActorContext<M, Snap>, reason: DeactivationReason): Promise<void>;
  /** Idle time after which the actor passivates. Absent: it never passivates. */
  readonly idlePassivationMs?: number;
  /**
   * The idle time after which the actor passivates in `state`, instead of `idlePassivationMs`
   * (undefined: `idlePassivationMs`; only kinds that have it passivate). Asked each time the
   * actor goes idle, and again when its idle timer fires. For kinds with many keys that each
   * wake once and then hold nothing — they leave memory soon, the others keep theirs — or whose
   * state must outlive a longer idle time than the kind's.
   */
  idlePassivationMsFor?(state: S, nowMs: number): number | undefined;
  /** Mailbox capacity. @default 10000 */
  readonly mailboxCapacity?: number;
  /** What the admin endpoint shows of the state. @default the state itself */
  describe?(state: S): unknown;
}

/**
 * The actors of a kind that a node keeps passive — as one small entry each rather than a cell
 * — until a message needs them (the lease book). The runtime lists, inspects and counts them
 * with the kind's live actors.
 */
export interface PassiveActors {
  readonly size: number;
  has(key: string): boolean;
  keys(): Iterable<string>;
  describe(key: string): PassiveActor | null;
  /** Forgets one: it leaves this node's memory (`ActorSystem.passivate`). */
  forget(key: string): void;
  /** Forgets them all: the node shuts down, or was declared out (others recover them). */
  clear(): void;
}

/** A passive actor as the admin endpoint shows it. */
export interface PassiveActor {
  /** Since when it is held here, ms. */
  sinceMs: number;
  state: unknown;
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
  /** A typed address of `(kind, key)`: it takes the messages of `kind` and no others. */
  ref<M extends Message>(kind: ActorKind<M, unknown>, key: string): ActorRef<M>;
  /** Tells an actor of a `holder` kind on this node, starting it here if it is not. */
  tellHere<M extends Message>(kind: ActorKind<M, unknown>, key: string, message: M): void;
  /** Activates an actor now (for always-on kinds) and resolves when it is live. */
  ensureActive(kind: KindName, key: string): Promise<void>;
  list(filter?: { kind?: KindName; limit?: number }): ActorInfo[];
  inspect(kind: KindName, key: string): ActorInfo | null;
}
