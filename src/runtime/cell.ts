import { isWheelhouseError, WheelhouseError } from '../lib/errors.js';
import type { ActorContext, ActorRef, ActorSystemApi, Behavior, DeactivationReason, Message } from './actor.js';
import type { Cancel, Clock } from './clock.js';
import { Mailbox, type MailboxHandler, type UnhandledMessages } from './mailbox.js';
import { shuttingDownError, type CellHost } from './host.js';
import type { AcquiredSnapshot } from './snapshots.js';
import { retryDelayMs } from './supervision.js';
import type { TimerEntry } from './timer-queue.js';

/**
 * The life of one activation. `activating → active → deactivating → deactivated`, or
 * `activating → deactivated` when activation fails. Anything else is a bug.
 */
export type CellPhase = 'activating' | 'active' | 'deactivating' | 'deactivated';

const LEGAL_TRANSITIONS: Readonly<Record<CellPhase, readonly CellPhase[]>> = {
  activating: ['active', 'deactivated'],
  active: ['deactivating'],
  deactivating: ['deactivated'],
  deactivated: [],
};

interface Signal {
  promise: Promise<void>;
  resolve(): void;
  reject(error: unknown): void;
}

/**
 * One activation of one actor: its state, its mailbox, its timers, and the way in and out of
 * memory. The cell is also the `ActorContext` handed to the behavior, which saves an object
 * per activation on the hot path (leases are activated tens of thousands of times a second).
 *
 * Messages posted while the cell activates wait in the mailbox and run, in order, once
 * `activate` has resolved. An `external` cell activates without I/O; a `snapshot` cell first
 * takes ownership `(node, epoch + 1)` from the snapshot store.
 */
export class ActorCell<S, M extends Message> implements ActorContext<M>, MailboxHandler<M, S> {
  readonly kind: string;
  epoch = 0;
  snapshotVersion: number | null = null;
  activatedAtMs = 0;
  lastMessageAtMs: number | null = null;
  readonly mailbox: Mailbox<M, S>;

  private phase: CellPhase = 'activating';
  private state: S | undefined;
  private stopReason: DeactivationReason | null = null;
  private passivateWhenIdle = false;
  private ownsSnapshot = false;
  private fencedBy: unknown = null;
  private idleTimer: Cancel | null = null;
  private idleSinceMs = 0;
  private timers: TimerEntry<Message>[] | null = null;
  /** Timer messages posted and not yet handled: the actor's duties (see `onError`). */
  private duties: Set<Message> | null = null;
  /** The message being handled, when it is a duty. */
  private currentDuty: M | null = null;
  /** Failures in a row of each duty (by message type); absent once it succeeds. */
  private dutyFailures: Map<string, number> | null = null;
  private selfRef: ActorRef<M> | null = null;
  private activeSignal: Signal | null = null;
  private goneSignal: Signal | null = null;

  constructor(
    private readonly host: CellHost,
    private readonly behavior: Behavior<S, M>,
    readonly key: string,
  ) {
    this.kind = behavior.kind;
    this.mailbox = new Mailbox<M, S>(this, behavior.mailboxCapacity);
  }

  // ── ActorContext ────────────────────────────────────────────────────────────────────────

  get nodeId(): string {
    return this.host.nodeId;
  }

  get clock(): Clock {
    return this.host.clock;
  }

  get system(): ActorSystemApi {
    return this.host.system;
  }

  get self(): ActorRef<M> {
    return (this.selfRef ??= this.host.ref<M>(this.kind, this.key));
  }

  reply(value: unknown): void {
    this.mailbox.current?.reply(value);
  }

  /**
   * Works from `activate` too (a timer that fires before activation completes queues its
   * message like any other). Once the actor is stopping, a new timer is a no-op: it would be
   * cancelled at deactivation anyway.
   */
  schedule(delayMs: number, message: M): Cancel {
    const live = this.phase === 'activating' || this.phase === 'active';
    if (!live || this.stopReason !== null) return noop;
    const entry = this.host.timers.add(delayMs, this, message);
    // Most actors hold one timer at a time: a small array, not a Set.
    (this.timers ??= []).push(entry);
    return () => this.cancelTimer(entry);
  }

  /** The node's timer queue calls this when a timer of this cell is due. */
  onTimer(message: Message, entry: TimerEntry<Message>): void {
    this.forgetTimer(entry);
    this.postFromTimer(message as M);
  }

  private cancelTimer(entry: TimerEntry<Message>): void {
    if (this.forgetTimer(entry)) this.host.timers.cancel(entry);
  }

  private forgetTimer(entry: TimerEntry<Message>): boolean {
    const timers = this.timers;
    const i = timers === null ? -1 : timers.indexOf(entry);
    if (i < 0) return false;
    timers!.splice(i, 1);
    return true;
  }

  snapshot(state: unknown): Promise<void> {
    if (this.behavior.persistence !== 'snapshot') {
      return Promise.reject(
        new WheelhouseError('internal', `${this.address} has persistence 'external'; it cannot snapshot.`),
      );
    }
    if (this.fencedBy !== null) return Promise.reject(this.fencedError());
    if (this.phase === 'deactivated') {
      return Promise.reject(new WheelhouseError('internal', `${this.address} has deactivated; it cannot snapshot.`));
    }
    return this.host.snapshots.save(this.kind, this.key, this.epoch, state, this.host.clock.now()).then(
      (version) => {
        if (this.snapshotVersion === null || version > this.snapshotVersion) this.snapshotVersion = version;
      },
      (error: unknown) => {
        if (isWheelhouseError(error, 'stale_epoch')) {
          // Another activation (on another node) owns the actor now: stop, write nothing more.
          this.fencedBy ??= error;
          this.requestStop('failed');
        }
        throw error;
      },
    );
  }

  stop(): void {
    this.requestStop('stopped');
  }

  // ── Mailbox handler ─────────────────────────────────────────────────────────────────────

  get address(): string {
    return `${this.kind}/${this.key}`;
  }

  handle(message: M): S | PromiseLike<S> {
    this.lastMessageAtMs = this.host.clock.now();
    this.currentDuty = this.duties?.delete(message) === true ? message : null;
    return this.behavior.receive(this.state as S, message, this);
  }

  accept(state: S): void {
    this.state = state;
    if (this.currentDuty !== null) {
      this.dutyFailures?.delete(this.currentDuty.type);
      this.currentDuty = null;
    }
  }

  /**
   * A handler failed. A duty — a message this actor's own timer delivered (a tick, a cascade,
   * a lease's expiry) — is what the actor relies on to make progress, and its handler re-arms
   * it only when it succeeds: so the runtime delivers it again after a backoff (100 ms
   * doubling to 2 s by default), for as long as the actor lives, and says so in the report.
   * A fenced activation is not retried: it stops.
   */
  onError(error: unknown, message: M, asked: boolean): void {
    const duty = message === this.currentDuty;
    this.currentDuty = null;
    if (isWheelhouseError(error, 'stale_epoch')) {
      // A write the handler made was refused for a newer owner's epoch (a fenced Redis
      // push, a version compare-and-set): this activation is stale. Stop, write nothing more.
      this.fencedBy ??= error;
      this.requestStop('failed');
    }
    const retry = duty ? this.retryDuty(message) : null;
    if (!asked) this.host.report(error, { kind: this.kind, key: this.key, during: 'receive', messageType: message.type, ...retry });
  }

  /** Delivers a failed duty again after a backoff; null when the actor is leaving anyway. */
  private retryDuty(message: M): { attempt: number; retryInMs: number } | null {
    if (this.stopReason !== null || (this.phase !== 'active' && this.phase !== 'activating')) return null;
    const failures = (this.dutyFailures ??= new Map<string, number>());
    const attempt = (failures.get(message.type) ?? 0) + 1;
    failures.set(message.type, attempt);
    const retryInMs = retryDelayMs(attempt, this.host.dutyRetry);
    this.schedule(retryInMs, message);
    return { attempt, retryInMs };
  }

  onIdle(): void {
    if (this.phase !== 'active') return;
    if (this.stopReason !== null) {
      this.deactivate(this.stopReason);
    } else if (this.mailbox.waiting > 0) {
      return; // defensive: only a halted mailbox rests with messages waiting, and halting sets stopReason
    } else if (this.passivateWhenIdle) {
      this.deactivate('passivated');
    } else {
      this.idleSinceMs = this.host.clock.now();
      const idleMs = this.behavior.idlePassivationMs;
      if (idleMs !== undefined && this.idleTimer === null) this.armIdleTimer(idleMs);
    }
  }

  // ── Lifecycle, driven by the system ────────────────────────────────────────────────────

  /** Where the cell is in its life. */
  get lifecycle(): CellPhase {
    return this.phase;
  }

  /** The actor's current state (undefined before activation completes). */
  get currentState(): S | undefined {
    return this.state;
  }

  /**
   * Starts activation, after `predecessor` (the previous instance's deactivation) if there is
   * one, so the two never hold the actor at once.
   */
  start(predecessor: Promise<void> | null): void {
    if (predecessor === null) this.acquire();
    else void predecessor.then(() => this.acquire());
  }

  /** Resolves once active; rejects with the activation error. */
  whenActive(): Promise<void> {
    if (this.phase === 'active') return Promise.resolve();
    if (this.phase !== 'activating') {
      return Promise.reject(new WheelhouseError('internal', `${this.address} is deactivating.`));
    }
    return (this.activeSignal ??= signal()).promise;
  }

  /** Resolves once the cell has left memory (never rejects). */
  whenGone(): Promise<void> {
    if (this.phase === 'deactivated') return Promise.resolve();
    return (this.goneSignal ??= signal()).promise;
  }

  /** Deactivates with `reason` once the current message is done; the queue is not handled. */
  requestStop(reason: DeactivationReason): void {
    if (this.phase === 'deactivating' || this.phase === 'deactivated') return;
    if (this.stopReason === null) this.stopReason = reason;
    this.cancelTimers();
    if (this.phase === 'activating') return; // acted on when activation settles
    this.mailbox.halt();
    if (!this.mailbox.isRunning) this.deactivate(this.stopReason);
  }

  /** Passivates once the mailbox is empty and idle. */
  requestPassivation(): void {
    if (this.phase === 'deactivating' || this.phase === 'deactivated') return;
    this.passivateWhenIdle = true;
    if (this.phase === 'active' && !this.mailbox.isRunning && this.mailbox.waiting === 0) {
      this.deactivate('passivated');
    }
  }

  // ── Activation ─────────────────────────────────────────────────────────────────────────

  private acquire(): void {
    if (this.stopReason === 'shutdown') {
      this.activationFailed(shuttingDownError());
      return;
    }
    if (this.behavior.persistence !== 'snapshot') {
      this.runActivate(null);
      return;
    }
    let acquiring: Promise<AcquiredSnapshot>;
    try {
      acquiring = this.host.snapshots.acquire(this.kind, this.key, this.host.nodeId, this.host.clock.now());
    } catch (error) {
      this.activationFailed(error);
      return;
    }
    acquiring.then(
      (acquired) => {
        this.epoch = acquired.epoch;
        this.snapshotVersion = acquired.version;
        this.ownsSnapshot = true;
        this.runActivate(acquired.state);
      },
      (error: unknown) => this.activationFailed(error),
    );
  }

  private runActivate(snapshot: unknown): void {
    let activation: Promise<S>;
    try {
      activation = Promise.resolve(this.behavior.activate(this, snapshot));
    } catch (error) {
      this.activationFailed(error);
      return;
    }
    activation.then(
      (state) => this.activated(state),
      (error: unknown) => this.activationFailed(error),
    );
  }

  private activated(state: S): void {
    this.state = state;
    this.transition('active');
    this.activatedAtMs = this.host.clock.now();
    this.activeSignal?.resolve();
    // Whoever waited holds the promise; the cell need not (100 000 idle actors × a promise).
    this.activeSignal = null;
    if (this.stopReason !== null) this.deactivate(this.stopReason);
    else this.mailbox.open();
  }

  private activationFailed(error: unknown): void {
    this.transition('deactivated');
    this.cancelTimers();
    const unhandled = this.mailbox.takeAll();
    let answered = this.activeSignal !== null;
    this.activeSignal?.reject(error);
    for (const ask of unhandled.asks) {
      if (ask === null) continue;
      ask.fail(error);
      answered = true;
    }
    const droppedTells = countTells(unhandled);
    if (droppedTells > 0 || !answered) {
      this.host.report(error, { kind: this.kind, key: this.key, during: 'activate', droppedTells });
    }
    if (this.ownsSnapshot) void this.release();
    this.host.gone(this);
    this.goneSignal?.resolve();
  }

  // ── Deactivation ───────────────────────────────────────────────────────────────────────

  private deactivate(reason: DeactivationReason): void {
    this.transition('deactivating');
    this.cancelTimers();
    this.mailbox.halt();
    const unhandled = this.mailbox.takeAll();
    if (this.behavior.deactivate === undefined && !this.ownsSnapshot) this.finish();
    else void this.runDeactivate(reason);
    this.handOver(unhandled, reason);
  }

  private async runDeactivate(reason: DeactivationReason): Promise<void> {
    if (this.behavior.deactivate !== undefined) {
      try {
        await this.behavior.deactivate(this.state as S, this, reason);
      } catch (error) {
        this.host.report(error, { kind: this.kind, key: this.key, during: 'deactivate' });
      }
    }
    if (this.ownsSnapshot && this.fencedBy === null) await this.release();
    this.finish();
  }

  private async release(): Promise<void> {
    try {
      await this.host.snapshots.release(this.kind, this.key, this.epoch, this.host.clock.now());
    } catch (error) {
      this.host.report(error, { kind: this.kind, key: this.key, during: 'release' });
    }
  }

  private finish(): void {
    this.transition('deactivated');
    this.host.gone(this);
    this.goneSignal?.resolve();
  }

  /**
   * Messages accepted but not handled by this instance. After `stop` or passivation they go
   * on to the next instance (wherever placement now puts it), in order. After fencing or at
   * shutdown they are refused: asks reject, dropped tells are reported.
   */
  private handOver(unhandled: UnhandledMessages<M>, reason: DeactivationReason): void {
    const { messages, asks } = unhandled;
    if (messages.length === 0) return;
    if (reason === 'stopped' || reason === 'passivated') {
      for (let i = 0; i < messages.length; i++) {
        this.host.redeliver(this.kind, this.key, messages[i] as M, asks[i] ?? null);
      }
      return;
    }
    const error = reason === 'shutdown' ? shuttingDownError() : this.fencedError();
    for (const ask of asks) ask?.fail(error);
    const droppedTells = countTells(unhandled);
    if (droppedTells > 0) {
      this.host.report(error, { kind: this.kind, key: this.key, during: 'deliver', droppedTells });
    }
  }

  // ── Timers ─────────────────────────────────────────────────────────────────────────────

  private armIdleTimer(delayMs: number): void {
    this.idleTimer = this.host.clock.setTimer(delayMs, () => this.idleTimerFired());
  }

  /** One idle timer per idle stretch, re-armed for the remainder if a message came since. */
  private idleTimerFired(): void {
    this.idleTimer = null;
    const limitMs = this.behavior.idlePassivationMs;
    if (limitMs === undefined || this.phase !== 'active' || this.stopReason !== null) return;
    if (this.mailbox.isRunning || this.mailbox.waiting > 0) return; // onIdle re-arms
    const now = this.host.clock.now();
    if (now < this.idleSinceMs) this.idleSinceMs = now; // the clock went backwards
    const idleMs = now - this.idleSinceMs;
    if (idleMs >= limitMs) this.deactivate('passivated');
    else this.armIdleTimer(limitMs - idleMs);
  }

  /** A timer's message is a duty: a full mailbox delays it (backoff), it does not drop it. */
  private postFromTimer(message: M): void {
    const duties = (this.duties ??= new Set());
    duties.add(message);
    try {
      this.mailbox.post(message);
    } catch (error) {
      duties.delete(message);
      const retry = this.retryDuty(message);
      this.host.report(error, { kind: this.kind, key: this.key, during: 'timer', messageType: message.type, ...retry });
    }
  }

  private cancelTimers(): void {
    if (this.idleTimer !== null) {
      this.idleTimer();
      this.idleTimer = null;
    }
    if (this.timers !== null) {
      for (const entry of this.timers) this.host.timers.cancel(entry);
      this.timers = null;
    }
    this.duties = null;
  }

  private transition(next: CellPhase): void {
    if (!LEGAL_TRANSITIONS[this.phase].includes(next)) {
      throw new WheelhouseError('internal', `${this.address}: illegal transition ${this.phase} → ${next}.`);
    }
    this.phase = next;
  }

  private fencedError(): WheelhouseError {
    return new WheelhouseError(
      'stale_epoch',
      `${this.address} was fenced: a newer activation than epoch ${this.epoch} owns it.`,
      { cause: this.fencedBy, details: { kind: this.kind, key: this.key, epoch: this.epoch } },
    );
  }
}

function countTells<M>(unhandled: UnhandledMessages<M>): number {
  let tells = 0;
  for (const ask of unhandled.asks) if (ask === null) tells++;
  return tells;
}

function signal(): Signal {
  let resolve!: () => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

const noop: Cancel = () => {};
