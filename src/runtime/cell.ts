import { isWheelhouseError, WheelhouseError } from '../lib/errors.js';
import type {
  ActorContext,
  ActorRef,
  ActorSystemApi,
  Behavior,
  DeactivationReason,
  Message,
  ReplyFor,
} from './actor.js';
import type { Cancel, Clock } from './clock.js';
import { CellTimers, type DutyCell } from './duties.js';
import { IdleTimer, type IdleCell } from './idle-timer.js';
import {
  checkedTransition,
  fencedError,
  handOver,
  refuseUnhandled,
  signal,
  type CellPhase,
  type Signal,
} from './cell-lifecycle.js';
import { Mailbox, type MailboxHandler } from './mailbox.js';
import { shuttingDownError, type CellHost } from './host.js';
import { readSnapshot, wrapSnapshot, type AcquiredSnapshot } from './snapshots.js';

/**
 * One activation of one actor: its state, its mailbox, its timers, and the way in and out of
 * memory. The cell is also the `ActorContext` handed to the behavior, which saves an object
 * per activation on the hot path (leases are activated tens of thousands of times a second).
 *
 * Messages posted while the cell activates wait in the mailbox and run, in order, once
 * `activate` has resolved. An `external` cell activates without I/O; a `snapshot` cell first
 * takes ownership `(node, epoch + 1)` from the snapshot store and decodes the last snapshot
 * with its kind's codec (a snapshot that does not decode fails the activation, which gives
 * ownership back). Its timers and their retries are in `duties.ts`; its phases, and what
 * becomes of the messages it leaves unhandled, in `cell-lifecycle.ts`.
 */
export class ActorCell<S, M extends Message, Snap = unknown>
  implements ActorContext<M, Snap>, MailboxHandler<M, S>, DutyCell<M>, IdleCell<S>
{
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
  /** The actor asked to leave after the message it is handling (`passivate`). */
  private leaveAfterMessage = false;
  private ownsSnapshot = false;
  private fencedBy: unknown = null;
  /** Its idle passivation; created when it first goes idle, for kinds that passivate. */
  private idleTimer: IdleTimer<S> | null = null;
  /** The actor's timers and their duties; created with its first timer. */
  private timers: CellTimers<M> | null = null;
  private selfRef: ActorRef<M> | null = null;
  private activeSignal: Signal | null = null;
  private goneSignal: Signal | null = null;

  constructor(
    private readonly host: CellHost,
    private readonly behavior: Behavior<S, M, Snap>,
    readonly key: string,
  ) {
    this.kind = behavior.kind.name;
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

  reply<T extends M>(message: T, value: NoInfer<ReplyFor<M, T>>): void {
    this.mailbox.replyTo(message, value);
  }

  /**
   * Works from `activate` too (a timer that fires before activation completes queues its
   * message like any other). Once the actor is stopping, a new timer is a no-op: it would be
   * cancelled at deactivation anyway.
   */
  schedule(delayMs: number, message: M): Cancel {
    if (!this.live) return noop;
    return (this.timers ??= new CellTimers<M>(this.host, this)).add(delayMs, message);
  }

  snapshot(state: Snap): Promise<void> {
    const codec = this.behavior.kind.snapshot;
    if (this.behavior.persistence !== 'snapshot' || codec === null) {
      return Promise.reject(
        new WheelhouseError('internal', `${this.address} has persistence 'external'; it cannot snapshot.`),
      );
    }
    if (this.fencedBy !== null) return Promise.reject(fencedError(this, this.fencedBy));
    if (this.phase === 'deactivated') {
      return Promise.reject(new WheelhouseError('internal', `${this.address} has deactivated; it cannot snapshot.`));
    }
    const stored = wrapSnapshot(codec.version, state);
    return this.host.snapshots.save(this.kind, this.key, this.epoch, stored, this.host.clock.now()).then(
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

  passivate(): void {
    if (this.live) this.leaveAfterMessage = true;
  }

  // ── Duty cell ──────────────────────────────────────────────────────────────────────────

  /** Activating or active, and not stopping: timers may be armed. */
  get live(): boolean {
    return (this.phase === 'activating' || this.phase === 'active') && this.stopReason === null;
  }

  post(message: M): void {
    this.mailbox.post(message);
  }

  // ── Mailbox handler ─────────────────────────────────────────────────────────────────────

  get address(): string {
    return `${this.kind}/${this.key}`;
  }

  handle(message: M): S | PromiseLike<S> {
    this.lastMessageAtMs = this.host.clock.now();
    this.leaveAfterMessage = false;
    this.timers?.begin(message);
    return this.behavior.receive(this.state as S, message, this);
  }

  accept(state: S): void {
    this.state = state;
    this.timers?.succeeded();
  }

  /**
   * A handler failed. A duty (a message this actor's own timer delivered, see `CellTimers`)
   * is delivered again after a backoff, for as long as the actor lives, and the report says
   * so. A fenced activation is not retried: it stops.
   */
  onError(error: unknown, message: M, asked: boolean): void {
    const duty = this.timers?.failed(message) ?? false;
    if (isWheelhouseError(error, 'stale_epoch')) {
      // A write the handler made was refused for a newer owner's epoch (a fenced Redis
      // push, a version compare-and-set): this activation is stale. Stop, write nothing more.
      this.fencedBy ??= error;
      this.requestStop('failed');
    }
    const retry = duty ? this.timers!.retry(message) : null;
    if (!asked)
      this.host.report(error, {
        kind: this.kind,
        key: this.key,
        during: 'receive',
        messageType: message.type,
        ...retry,
      });
  }

  onIdle(): void {
    if (this.phase !== 'active') return;
    if (this.stopReason !== null) {
      this.deactivate(this.stopReason);
    } else if (this.mailbox.waiting > 0) {
      return; // defensive: only a halted mailbox rests with messages waiting, and halting sets stopReason
    } else if (this.passivateWhenIdle || this.leaveAfterMessage) {
      this.deactivate('passivated');
    } else if (this.behavior.idlePassivationMs !== undefined) {
      (this.idleTimer ??= new IdleTimer(this.host.clock, this.behavior, this)).idle();
    }
  }

  // ── Idle cell ──────────────────────────────────────────────────────────────────────────

  get restful(): boolean {
    return this.phase === 'active' && this.stopReason === null && !this.mailbox.isRunning && this.mailbox.waiting === 0;
  }

  /** The idle timer's end: the actor leaves memory (`IdleCell`). */
  passivateIdle(): void {
    this.deactivate('passivated');
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
        let snapshot: Snap | null;
        try {
          snapshot = readSnapshot(this.behavior.kind.snapshot!, acquired.state, this.address);
        } catch (error) {
          this.activationFailed(error);
          return;
        }
        this.runActivate(snapshot);
      },
      (error: unknown) => this.activationFailed(error),
    );
  }

  private runActivate(snapshot: Snap | null): void {
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
    const waited = this.activeSignal !== null;
    this.activeSignal?.reject(error);
    refuseUnhandled(this.host, this, unhandled, error, 'activate', waited);
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
    handOver(this.host, this, unhandled, reason, () =>
      reason === 'shutdown' ? shuttingDownError() : fencedError(this, this.fencedBy),
    );
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

  // ── Timers ─────────────────────────────────────────────────────────────────────────────

  private cancelTimers(): void {
    this.idleTimer?.cancel();
    this.timers?.cancelAll();
  }

  private transition(next: CellPhase): void {
    this.phase = checkedTransition(this.address, this.phase, next);
  }
}

const noop: Cancel = () => {};
