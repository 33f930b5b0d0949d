import { WheelhouseError } from '../lib/errors.js';
import {
  kindName,
  type ActorInfo,
  type ActorKind,
  type ActorRef,
  type ActorSystemApi,
  type Behavior,
  type KindName,
  type Message,
  type PassiveActors,
} from './actor.js';
import { validAskTimeoutMs } from './ask.js';
import type { ActorCell } from './cell.js';
import { shuttingDownError, type ActorDutyEnded, type ActorErrorInfo } from './host.js';
import type { Clock } from './clock.js';
import type { Placement, Transport } from './placement.js';
import { Router, type KindEntry, type TransportEnvelope } from './router.js';
import type { SnapshotStore } from './snapshots.js';
import { DEFAULT_DUTY_RETRY, type RetryPolicy } from './supervision.js';

/** How an `ActorSystem` is built. */
export interface ActorSystemOptions {
  /** This node's id; placement compares owners against it. */
  nodeId: string;
  /** Every timer of the runtime (asks, passivation, `ctx.schedule`) runs on it. */
  clock: Clock;
  /** Where `snapshot` actors keep their state and their fencing epoch. */
  snapshots: SnapshotStore;
  /** Which node owns `(kind, key)`; `LocalPlacement` on one node. */
  placement: Placement;
  /** Carries messages to actors other nodes own. Absent: sending to one throws. */
  transport?: Transport;
  /** Timeout of an `ask` that names none, ms. @default 5000 */
  defaultAskTimeoutMs?: number;
  /**
   * How an actor's timer message whose handler failed is delivered again (see
   * `ActorContext.schedule`). @default DEFAULT_DUTY_RETRY (100 ms doubling to 2 s)
   */
  dutyRetry?: RetryPolicy;
  /**
   * Errors nobody awaits: a told message's handler failed, a `deactivate` hook or a release
   * failed, a message was dropped. @default logs to the console
   */
  onError?: (error: unknown, info: ActorErrorInfo) => void;
  /**
   * A duty that had failed (reported to `onError` with its `attempt`) succeeded, or its actor
   * left with it still failing: the run of failures is over. @default ignores it
   */
  onDutyEnded?: (ended: ActorDutyEnded) => void;
}

/** Ask timeout when neither the caller nor the options name one, ms. */
export const DEFAULT_ASK_TIMEOUT_MS = 5_000;

/** How many actors `list` returns when no limit is given. */
export const DEFAULT_LIST_LIMIT = 1_000;

/** After this long, `dropAll` reports the actors that have not left yet (and why), ms. */
const SLOW_DROP_MS = 10_000;

/**
 * The actor host of one node: registered kinds, the actors live here, and the way messages
 * reach them. Each actor handles one message at a time from a bounded mailbox; it is
 * activated on its first message (single-flight), passivates when idle, and — for
 * `snapshot` kinds — holds a fencing epoch that stops it the moment another node takes over.
 */
export class ActorSystem implements ActorSystemApi {
  readonly nodeId: string;
  private readonly router: Router;
  private shutdownDone: Promise<void> | null = null;

  constructor(options: ActorSystemOptions) {
    if (typeof options.nodeId !== 'string' || options.nodeId === '') {
      throw new WheelhouseError('internal', 'ActorSystem option nodeId must be a non-empty string.');
    }
    this.nodeId = options.nodeId;
    const onError = options.onError ?? logActorError;
    this.router = new Router({
      system: this,
      nodeId: options.nodeId,
      clock: options.clock,
      snapshots: options.snapshots,
      placement: options.placement,
      transport: options.transport,
      defaultAskTimeoutMs: validAskTimeoutMs(
        options.defaultAskTimeoutMs ?? DEFAULT_ASK_TIMEOUT_MS,
        'ActorSystem option defaultAskTimeoutMs',
      ),
      dutyRetry: options.dutyRetry ?? DEFAULT_DUTY_RETRY,
      report: onError,
      dutyEnded: options.onDutyEnded ?? (() => undefined),
    });
  }

  /** Registers an actor kind. Throws if the kind is taken or the behavior is malformed. */
  register<S, M extends Message, Snap = never>(behavior: Behavior<S, M, Snap>): void {
    if (this.router.closed) throw shuttingDownError();
    const erased = behavior as unknown as Behavior<unknown, Message, unknown>;
    validateBehavior(erased);
    const name = behavior.kind.name;
    if (this.router.kinds.has(name)) {
      throw new WheelhouseError('internal', `Actor kind '${name}' is already registered.`);
    }
    this.router.kinds.set(name, {
      behavior: erased,
      cells: new Map(),
      passive: null,
    });
  }

  /**
   * A typed address of `(kind, key)`: its messages are those of the kind's token. Throws if
   * the kind is not registered.
   */
  ref<M extends Message>(kind: ActorKind<M, unknown>, key: string): ActorRef<M> {
    return this.router.ref<M>(kind.name, key);
  }

  /**
   * Lists, inspects and counts `passive` with the live actors of `kind` on this node (see
   * `PassiveActors`). For a `holder` kind, whose passive actors are this node's to wake.
   */
  registerPassive(kind: KindName, passive: PassiveActors): void {
    const entry = this.router.entry(kindName(kind));
    if (entry.behavior.placement !== 'holder') {
      throw new WheelhouseError(
        'internal',
        `Actor kind '${kindName(kind)}' is placed by the ring: it has no passive actors.`,
      );
    }
    entry.passive = passive;
  }

  /**
   * Tells `(kind, key)` on this node, starting it here if it is not: for `holder` kinds only
   * (see `Behavior.placement`), whose actors live where they were started.
   */
  tellHere<M extends Message>(kind: ActorKind<M, unknown>, key: string, message: M): void {
    const entry = this.router.entry(kind.name);
    if (entry.behavior.placement !== 'holder') {
      throw new WheelhouseError('internal', `Actor kind '${kind.name}' is placed by the ring: send through ref().`);
    }
    this.router.deliverHere(entry, key, message);
  }

  /**
   * Activates an actor on its owner — here, or on another node through the transport — and
   * resolves when it is live there; rejects if activation fails.
   */
  ensureActive(kind: KindName, key: string, timeoutMs?: number): Promise<void> {
    try {
      return this.router.activate(this.router.entry(kindName(kind)), key, timeoutMs);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** The node that owns `(kind, key)` under the current placement. */
  ownerOf(kind: KindName, key: string): string {
    return this.router.ownerOf(kindName(kind), key);
  }

  /**
   * After a placement change: stops the local actors another node now owns, each after its
   * current message (snapshot kinds take a final snapshot and release ownership); messages
   * they had queued follow them. Returns how many were asked to go.
   */
  handOff(): number {
    return this.router.handOff();
  }

  /**
   * Stops every local actor without a final snapshot (reason `failed`): for a node the cluster
   * declared out, whose actors may have newer activations elsewhere. Queued messages are
   * refused. Resolves when all have left; the node then activates what it owns again.
   */
  dropAll(): Promise<void> {
    const gone: Promise<void>[] = [];
    const cells: ActorCell<unknown, Message, unknown>[] = [];
    for (const entry of this.router.kinds.values()) {
      entry.passive?.clear();
      for (const cell of [...entry.cells.values()]) {
        cell.requestStop('failed');
        gone.push(cell.whenGone());
        cells.push(cell);
      }
    }
    // An actor leaves once its current message is done: one whose handler never settles
    // keeps its key from activating again here, and the node from taking over what it owns.
    const cancel = this.router.clock.setTimer(SLOW_DROP_MS, () => this.reportStragglers(cells));
    return Promise.all(gone).then(() => cancel());
  }

  private reportStragglers(cells: readonly ActorCell<unknown, Message, unknown>[]): void {
    const now = this.router.clock.now();
    for (const cell of cells) {
      if (cell.lifecycle === 'deactivated') continue;
      const message = cell.mailbox.handling;
      const since = cell.lastMessageAtMs === null ? '' : ` for ${now - cell.lastMessageAtMs} ms`;
      const error = new WheelhouseError(
        'internal',
        `${cell.address} has not left ${SLOW_DROP_MS} ms after the node dropped its actors: ` +
          (message === undefined ? `it is ${cell.lifecycle}` : `its '${message.type}' handler has run${since}`),
      );
      this.router.report(error, { kind: cell.kind, key: cell.key, during: 'deactivate', messageType: message?.type });
    }
  }

  /** How many actors have left this node's memory since it started (passivated, stopped, moved, failed). */
  departedTotal(): number {
    return this.router.departed;
  }

  /** How many actors of each kind this node holds (activating or live): O(kinds), for metrics. */
  countByKind(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const [kind, entry] of this.router.kinds) counts.set(kind, entry.cells.size + (entry.passive?.size ?? 0));
    return counts;
  }

  /** The live actors of this node (activated, not yet leaving), without their state. */
  list(filter: { kind?: KindName; limit?: number } = {}): ActorInfo[] {
    const limit = filter.limit ?? DEFAULT_LIST_LIMIT;
    const entries =
      filter.kind === undefined ? [...this.router.kinds.values()] : [this.router.kinds.get(kindName(filter.kind))];
    const infos: ActorInfo[] = [];
    for (const entry of entries) {
      if (entry === undefined) continue;
      for (const cell of entry.cells.values()) {
        if (infos.length >= limit) return infos;
        if (cell.lifecycle === 'active') infos.push(this.describe(entry, cell, false));
      }
      if (entry.passive === null) continue;
      for (const key of entry.passive.keys()) {
        if (infos.length >= limit) return infos;
        const passive = this.describePassive(entry, key, false);
        if (passive !== null && !entry.cells.has(key)) infos.push(passive);
      }
    }
    return infos;
  }

  /** One actor with its state (through `behavior.describe`), live or passive; null if neither. */
  inspect(kind: KindName, key: string): ActorInfo | null {
    const entry = this.router.kinds.get(kindName(kind));
    if (entry === undefined) return null;
    const cell = entry.cells.get(key);
    if (cell !== undefined && cell.lifecycle === 'active') return this.describe(entry, cell, true);
    return this.describePassive(entry, key, true);
  }

  /** Whether this node holds the actor (activating, live or passive), without describing it. */
  holds(kind: KindName, key: string): boolean {
    const entry = this.router.kinds.get(kindName(kind));
    return entry !== undefined && (entry.cells.has(key) || entry.passive?.has(key) === true);
  }

  /** Whether this node has the actor in memory, activating or active (not passive, not leaving). */
  holdsLive(kind: KindName, key: string): boolean {
    const phase = this.router.kinds.get(kindName(kind))?.cells.get(key)?.lifecycle;
    return phase === 'activating' || phase === 'active';
  }

  /**
   * Passivates a local actor once its mailbox is empty (a passive one is forgotten at once);
   * resolves when it has left memory.
   */
  passivate(kind: KindName, key: string): Promise<void> {
    this.router.kinds.get(kindName(kind))?.passive?.forget(key);
    const cell = this.router.kinds.get(kindName(kind))?.cells.get(key);
    if (cell === undefined) return Promise.resolve();
    cell.requestPassivation();
    return cell.whenGone();
  }

  /**
   * Stops accepting messages and deactivates every actor (reason `shutdown`) after its current
   * message; queued messages are refused with `not_ready`. Resolves when all have left.
   */
  shutdown(): Promise<void> {
    if (this.shutdownDone !== null) return this.shutdownDone;
    this.router.closed = true;
    const gone: Promise<void>[] = [];
    for (const entry of this.router.kinds.values()) {
      entry.passive?.clear();
      for (const cell of [...entry.cells.values()]) {
        cell.requestStop('shutdown');
        gone.push(cell.whenGone());
      }
    }
    this.shutdownDone = Promise.all(gone).then(() => undefined);
    return this.shutdownDone;
  }

  /**
   * Delivers a message another node forwarded here (the transport's receiving side calls
   * this). Resolves with the reply for an ask, at once for a tell.
   */
  acceptRemote(envelope: TransportEnvelope): Promise<unknown> {
    return this.router.acceptRemote(envelope);
  }

  private describePassive(entry: KindEntry, key: string, withState: boolean): ActorInfo | null {
    const passive = entry.passive?.describe(key);
    if (passive === undefined || passive === null) return null;
    const info: ActorInfo = {
      kind: entry.behavior.kind.name,
      key,
      node: this.nodeId,
      mailboxDepth: 0,
      activatedAt: new Date(passive.sinceMs).toISOString(),
      lastMessageAt: null,
      epoch: 0,
      snapshotVersion: null,
    };
    if (withState) info.state = passive.state;
    return info;
  }

  private describe(entry: KindEntry, cell: ActorCell<unknown, Message, unknown>, withState: boolean): ActorInfo {
    const info: ActorInfo = {
      kind: cell.kind,
      key: cell.key,
      node: this.nodeId,
      mailboxDepth: cell.mailbox.waiting,
      activatedAt: new Date(cell.activatedAtMs).toISOString(),
      lastMessageAt: cell.lastMessageAtMs === null ? null : new Date(cell.lastMessageAtMs).toISOString(),
      epoch: cell.epoch,
      snapshotVersion: cell.snapshotVersion,
    };
    if (withState) {
      const state = cell.currentState;
      info.state = entry.behavior.describe === undefined ? state : entry.behavior.describe(state);
    }
    return info;
  }
}

function validateBehavior(
  behavior: Pick<
    Behavior<unknown, Message, unknown>,
    'kind' | 'persistence' | 'placement' | 'mailboxCapacity' | 'idlePassivationMs'
  >,
): void {
  const { kind, persistence, placement, mailboxCapacity, idlePassivationMs } = behavior;
  const name: unknown = (kind as Partial<ActorKind<Message, unknown>> | undefined)?.name;
  const fail = (what: string): never => {
    throw new WheelhouseError('internal', `Actor kind '${String(name)}': ${what}`);
  };
  if (typeof name !== 'string' || name === '') fail('kind must be a token from defineKind, with a non-empty name.');
  if (persistence !== 'snapshot' && persistence !== 'external') fail(`persistence must be 'snapshot' or 'external'.`);
  const codec = kind.snapshot;
  if (persistence === 'snapshot' && (codec === null || codec === undefined)) {
    fail(`persistence 'snapshot' needs a snapshot codec: defineKind(name, { version, decode }).`);
  }
  if (persistence === 'external' && codec !== null && codec !== undefined)
    fail(`persistence 'external' keeps no snapshot, but the kind has a codec.`);
  if (placement !== undefined && placement !== 'ring' && placement !== 'holder')
    fail(`placement must be 'ring' or 'holder'.`);
  if (placement === 'holder' && persistence !== 'external')
    fail(`placement 'holder' needs persistence 'external': two nodes may briefly hold the actor.`);
  if (mailboxCapacity !== undefined && !(Number.isInteger(mailboxCapacity) && mailboxCapacity > 0)) {
    fail(`mailboxCapacity must be a positive integer, got ${mailboxCapacity}.`);
  }
  if (idlePassivationMs !== undefined && !(Number.isFinite(idlePassivationMs) && idlePassivationMs > 0)) {
    fail(`idlePassivationMs must be a positive number of milliseconds, got ${idlePassivationMs}.`);
  }
}

/** The default `onError`: one console line per error, never silence. */
function logActorError(error: unknown, info: ActorErrorInfo): void {
  const message = info.messageType === undefined ? '' : ` (message '${info.messageType}')`;
  const dropped = info.droppedTells ? `, ${info.droppedTells} told message(s) dropped` : '';
  console.error(`wheelhouse: actor ${info.kind}/${info.key} failed during ${info.during}${message}${dropped}:`, error);
}
