import { WheelhouseError } from '../lib/errors.js';
import type { ActorRef, ActorSystemApi, Behavior, Message, PassiveActors, ReplyFor } from './actor.js';
import { PendingAsk, validAskTimeoutMs } from './ask.js';
import { ActorCell } from './cell.js';
import { shuttingDownError, type ActorDutyEnded, type ActorErrorInfo, type CellHost } from './host.js';
import type { Clock } from './clock.js';
import { TimerQueue } from './timer-queue.js';
import type { Placement, Transport } from './placement.js';
import type { SnapshotStore } from './snapshots.js';
import type { RetryPolicy } from './supervision.js';

/** What travels between nodes: one message for one actor. */
export type TransportEnvelope = Parameters<Transport['deliver']>[1];

/** One registered kind and its live cells on this node. */
export interface KindEntry {
  readonly behavior: Behavior<unknown, Message, unknown>;
  /**
   * The single-flight activation map of this kind: key → the one cell that is activating or
   * active. A cell goes in synchronously, before anything can await, so a second message for
   * the same key finds it and queues in its mailbox instead of activating again.
   */
  readonly cells: Map<string, ActorCell<unknown, Message, unknown>>;
  /** The kind's passive actors on this node, if it keeps any (`ActorSystem.registerPassive`). */
  passive: PassiveActors | null;
}

/** The dependencies of a router, filled by `ActorSystem`. */
export interface RouterOptions {
  system: ActorSystemApi;
  nodeId: string;
  clock: Clock;
  snapshots: SnapshotStore;
  placement: Placement;
  transport: Transport | undefined;
  defaultAskTimeoutMs: number;
  dutyRetry: RetryPolicy;
  report(error: unknown, info: ActorErrorInfo): void;
  dutyEnded(ended: ActorDutyEnded): void;
}

/**
 * Where a message goes: to the local cell of `(kind, key)` — activating it, single-flight,
 * if it is not in memory — or through the transport to the node placement names. Internal to
 * the runtime; `ActorSystem` is its public face.
 */
export class Router implements CellHost {
  readonly kinds = new Map<string, KindEntry>();
  readonly system: ActorSystemApi;
  readonly nodeId: string;
  readonly clock: Clock;
  readonly timers: TimerQueue<Message>;
  readonly snapshots: SnapshotStore;
  readonly defaultAskTimeoutMs: number;
  readonly dutyRetry: RetryPolicy;
  /** Set at shutdown: nothing new is accepted. */
  closed = false;
  /** Actors that left this node's memory since it started (any reason). */
  departed = 0;
  private readonly placement: Placement;
  private readonly transport: Transport | undefined;
  private readonly reportHook: RouterOptions['report'];
  private readonly dutyEndedHook: RouterOptions['dutyEnded'];

  constructor(options: RouterOptions) {
    this.system = options.system;
    this.nodeId = options.nodeId;
    this.clock = options.clock;
    this.timers = new TimerQueue<Message>(options.clock);
    this.snapshots = options.snapshots;
    this.placement = options.placement;
    this.transport = options.transport;
    this.defaultAskTimeoutMs = options.defaultAskTimeoutMs;
    this.dutyRetry = options.dutyRetry;
    this.reportHook = options.report;
    this.dutyEndedHook = options.dutyEnded;
  }

  /** The registration of `kind`; throws a clear error if there is none. */
  entry(kind: string): KindEntry {
    const entry = this.kinds.get(kind);
    if (entry === undefined) {
      const known = [...this.kinds.keys()].join(', ') || 'none';
      throw new WheelhouseError(
        'internal',
        `No actor kind '${kind}' is registered on node ${this.nodeId} (registered: ${known}).`,
      );
    }
    return entry;
  }

  ref<M extends Message>(kind: string, key: string): ActorRef<M> {
    return new RoutedRef<M>(this, this.entry(kind), key);
  }

  /** The node that owns `(kind, key)` now. */
  ownerOf(kind: string, key: string): string {
    return this.placement.ownerOf(kind, key);
  }

  /** Routes one message; throws `mailbox_full`, or when the system is shut down. */
  deliver(entry: KindEntry, key: string, message: Message, ask: PendingAsk | null): void {
    if (this.closed) throw shuttingDownError();
    if (entry.behavior.placement === 'holder') {
      const held = liveCell(entry, key);
      if (held !== undefined) {
        held.mailbox.post(message, ask);
        return;
      }
    }
    const kind = entry.behavior.kind.name;
    const owner = this.placement.ownerOf(kind, key);
    if (owner === this.nodeId) this.localCell(entry, key).mailbox.post(message, ask);
    else this.forward(owner, kind, key, message, ask);
  }

  /** Posts a tell to `(kind, key)` on this node, starting it here whatever the ring says. */
  deliverHere(entry: KindEntry, key: string, message: Message): void {
    if (this.closed) throw shuttingDownError();
    this.localCell(entry, key).mailbox.post(message, null);
  }

  /** Sends an ask and returns what the caller awaits: it never throws, it rejects. */
  ask(entry: KindEntry, key: string, message: Message, timeoutMs: number): Promise<unknown> {
    let pending: PendingAsk;
    try {
      pending = new PendingAsk(
        this.clock,
        validAskTimeoutMs(timeoutMs, 'timeoutMs'),
        entry.behavior.kind.name,
        key,
        message.type,
      );
    } catch (error) {
      return Promise.reject(error);
    }
    try {
      this.deliver(entry, key, message, pending);
    } catch (error) {
      pending.fail(error);
    }
    return pending.promise;
  }

  /** The local cell for `(kind, key)`, creating and starting one if none is live. */
  localCell(entry: KindEntry, key: string): ActorCell<unknown, Message, unknown> {
    const live = liveCell(entry, key);
    if (live !== undefined) return live;
    const existing = entry.cells.get(key);
    // None live, or the previous instance is still deactivating: a new instance, which
    // activates only once the previous one has left (so they never both own the actor).
    const cell = new ActorCell<unknown, Message, unknown>(this, entry.behavior, key);
    entry.cells.set(key, cell);
    cell.start(existing === undefined ? null : existing.whenGone());
    return cell;
  }

  /** A message from another node, for an actor this node hosts. */
  acceptRemote(envelope: TransportEnvelope): Promise<unknown> {
    try {
      if (this.closed) throw shuttingDownError();
      const entry = this.entry(envelope.kind);
      const message = envelope.message;
      if (!isMessage(message)) {
        throw new WheelhouseError(
          'validation_failed',
          `A message for ${envelope.kind}/${envelope.key} has no string 'type'.`,
        );
      }
      // While two nodes' views of the ring differ (a change is ~a heartbeat old on one of
      // them), a message can reach a node that no longer owns its actor. Forwarding it on
      // could loop; refusing with `not_ready` makes the sender retry against its own, soon
      // updated, ring. Fencing keeps two owners from both writing meanwhile.
      const owner = this.placement.ownerOf(envelope.kind, envelope.key);
      if (owner !== this.nodeId) {
        throw new WheelhouseError(
          'not_ready',
          `Node ${this.nodeId} does not own ${envelope.kind}/${envelope.key}; its ring names ${owner}.`,
          {
            details: { kind: envelope.kind, key: envelope.key, owner },
          },
        );
      }
      const cell = this.localCell(entry, envelope.key);
      if (message.type === ACTIVATE) return this.byDeadline(cell.whenActive(), envelope);
      if (!envelope.ask) {
        cell.mailbox.post(message, null);
        return Promise.resolve(undefined);
      }
      const timeoutMs = answerWithinMs(envelope.deadlineMs - this.clock.now());
      if (timeoutMs <= 0) {
        throw new WheelhouseError(
          'ask_timeout',
          `An ask for ${envelope.kind}/${envelope.key} arrived after its deadline.`,
        );
      }
      const pending = new PendingAsk(this.clock, timeoutMs, envelope.kind, envelope.key, message.type);
      cell.mailbox.post(message, pending);
      return pending.promise;
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * `active` within the envelope's deadline, as an ask's answer is: the batch it came in is
   * answered once every envelope of it settles, so one activation that never ends (its
   * previous instance has not left) would otherwise hold the answer to every tell beside it.
   */
  private byDeadline(active: Promise<void>, envelope: TransportEnvelope): Promise<void> {
    const timeoutMs = answerWithinMs(envelope.deadlineMs - this.clock.now());
    const late = (): WheelhouseError =>
      new WheelhouseError(
        'ask_timeout',
        `${envelope.kind}/${envelope.key} was not active by its activation's deadline (${Math.max(0, timeoutMs)} ms).`,
      );
    if (timeoutMs <= 0) return Promise.reject(late());
    return new Promise((resolve, reject) => {
      const cancel = this.clock.setTimer(timeoutMs, () => reject(late()));
      active.then(
        () => (cancel(), resolve()),
        (error: unknown) => (cancel(), reject(error)),
      );
    });
  }

  /**
   * Activates `(kind, key)` on its owner, here or through the transport, and resolves once it
   * is live there; rejects if activation fails.
   */
  activate(entry: KindEntry, key: string, timeoutMs: number = this.defaultAskTimeoutMs): Promise<void> {
    if (this.closed) return Promise.reject(shuttingDownError());
    const kind = entry.behavior.kind.name;
    const owner = this.placement.ownerOf(kind, key);
    if (owner === this.nodeId) return this.localCell(entry, key).whenActive();
    if (this.transport === undefined) return Promise.reject(noTransport(kind, key, owner, this.nodeId));
    const envelope: TransportEnvelope = {
      kind,
      key,
      message: { type: ACTIVATE },
      deadlineMs: this.clock.now() + timeoutMs,
      ask: true,
    };
    try {
      return this.transport.deliver(owner, envelope).then(() => undefined);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Stops every local actor that placement now puts on another node, after its current
   * message; the messages it had queued follow it to the new owner. Returns how many.
   */
  handOff(): number {
    let moved = 0;
    for (const [kind, entry] of this.kinds) {
      // A holder kind stays with the node that started it while that node lives.
      if (entry.behavior.placement === 'holder') continue;
      for (const cell of entry.cells.values()) {
        if (cell.lifecycle === 'deactivating' || cell.lifecycle === 'deactivated') continue;
        if (this.placement.ownerOf(kind, cell.key) === this.nodeId) continue;
        cell.requestStop('passivated');
        moved++;
      }
    }
    return moved;
  }

  redeliver(kind: string, key: string, message: Message, ask: PendingAsk | null): void {
    try {
      this.deliver(this.entry(kind), key, message, ask);
    } catch (error) {
      if (ask !== null) ask.fail(error);
      else this.report(error, { kind, key, during: 'deliver', messageType: message.type, droppedTells: 1 });
    }
  }

  gone(cell: ActorCell<unknown, Message, unknown>): void {
    const cells = this.kinds.get(cell.kind)?.cells;
    if (cells?.get(cell.key) === cell) cells.delete(cell.key);
    this.departed++;
  }

  report(error: unknown, info: ActorErrorInfo): void {
    try {
      this.reportHook(error, info);
    } catch (hookError) {
      console.error('wheelhouse: the actor onError hook threw', hookError, 'while reporting', error, info);
    }
  }

  dutyEnded(ended: ActorDutyEnded): void {
    try {
      this.dutyEndedHook(ended);
    } catch (hookError) {
      console.error('wheelhouse: the actor onDutyEnded hook threw', hookError, 'while reporting', ended);
    }
  }

  /** Hands a message to the owner's node. Remote delivery proper lands with the cluster. */
  private forward(owner: string, kind: string, key: string, message: Message, ask: PendingAsk | null): void {
    const transport = this.transport;
    if (transport === undefined) throw noTransport(kind, key, owner, this.nodeId);
    const envelope: TransportEnvelope = {
      kind,
      key,
      message,
      deadlineMs: this.clock.now() + (ask?.timeoutMs ?? this.defaultAskTimeoutMs),
      ask: ask !== null,
    };
    let sent: Promise<unknown>;
    try {
      sent = transport.deliver(owner, envelope);
    } catch (error) {
      sent = Promise.reject(error);
    }
    if (ask !== null) {
      sent.then(
        (value) => ask.resolve(value),
        (error: unknown) => ask.fail(error),
      );
    } else {
      sent.then(undefined, (error: unknown) =>
        this.report(error, { kind, key, during: 'deliver', messageType: message.type, droppedTells: 1 }),
      );
    }
  }
}

/**
 * How long a forwarded ask (or activation) may wait here for its answer, of the `remainingMs`
 * to its deadline: a little less, so that its answer — an `ask_timeout` included — reaches the
 * sender before the sender stops waiting for the request that carried it. The request answers
 * once every envelope of its batch has settled; were a slow actor's ask to time out here only
 * at the deadline, the sender would already have given the request up, and with it the
 * answers of every other envelope in it (a lease's heartbeat, a limit's grant), its tells
 * reported dropped and sent again. Seen in the nemesis: one limit actor slow to answer on a
 * node made every batch to that node time out for minutes.
 */
export function answerWithinMs(remainingMs: number): number {
  return remainingMs - Math.min(1_000, Math.max(100, remainingMs / 5));
}

/** The cell of `(kind, key)` on this node if it is activating or active. */
function liveCell(entry: KindEntry, key: string): ActorCell<unknown, Message, unknown> | undefined {
  const cell = entry.cells.get(key);
  if (cell === undefined) return undefined;
  const phase = cell.lifecycle;
  return phase === 'activating' || phase === 'active' ? cell : undefined;
}

/** A typed address; resolves the kind once, so each send is one map lookup. */
class RoutedRef<M extends Message> implements ActorRef<M> {
  readonly kind: string;

  constructor(
    private readonly router: Router,
    private readonly entry: KindEntry,
    readonly key: string,
  ) {
    this.kind = entry.behavior.kind.name;
  }

  tell(message: M): void {
    this.router.deliver(this.entry, this.key, message, null);
  }

  ask<T extends M>(message: T, timeoutMs: number = this.router.defaultAskTimeoutMs): Promise<ReplyFor<M, T>> {
    return this.router.ask(this.entry, this.key, message, timeoutMs) as Promise<ReplyFor<M, T>>;
  }
}

/**
 * The message type of a remote activation (`ActorSystem.ensureActive` of an actor another node
 * owns): the receiving node activates the actor and answers once it is live; no behavior sees it.
 */
const ACTIVATE = '$activate';

function noTransport(kind: string, key: string, owner: string, nodeId: string): WheelhouseError {
  return new WheelhouseError(
    'internal',
    `No transport is configured, but ${kind}/${key} is owned by node ${owner}, not ${nodeId}.`,
  );
}

function isMessage(value: unknown): value is Message {
  return typeof value === 'object' && value !== null && typeof (value as { type?: unknown }).type === 'string';
}
