import { WheelhouseError } from '../lib/errors.js';
import type { PendingAsk } from './ask.js';

/** Mailbox capacity when a behavior names none. */
export const DEFAULT_MAILBOX_CAPACITY = 10_000;

/**
 * Messages handled back to back before the mailbox yields to the event loop
 * (`setImmediate`), so an actor that keeps telling itself cannot starve I/O and timers.
 */
const MESSAGES_PER_TURN = 256;
/**
 * How long a mailbox handles messages back to back before it yields to the event loop, ms,
 * however few: a key offered a flood's 200 000 due tasks (64 messages from the wheels at the
 * top of the hour) held the loop for 250 ms, and every HTTP request waited behind it (W6).
 */
const TURN_SLICE_MS = 10;
/**
 * Messages a turn handles before its time is looked at. The clock is wall time: a process the
 * machine descheduled for a moment, or a handler that awaited I/O, would otherwise make a turn
 * of two or three messages yield too. Such a turn gives the loop nothing back, and a sender
 * would find messages still waiting that were about to be handled.
 */
const MESSAGES_BEFORE_SLICE = 8;

/** What a mailbox drives: the actor behind it. */
export interface MailboxHandler<M, R> {
  /** Names the actor in errors (`kind/key`). Read only when an error is built. */
  readonly address: string;
  /** Handles one message. Never called again until the previous call has settled. */
  handle(message: M): R | PromiseLike<R>;
  /** Takes the handler's result (the actor's next state) before the next message starts. */
  accept(result: R): void;
  /**
   * A handler call failed. `asked`: the message was an ask, which the mailbox has already
   * rejected with the error; a tell's error has nowhere else to go.
   */
  onError(error: unknown, message: M, asked: boolean): void;
  /** The mailbox has stopped running: its queue is empty, or it was halted. */
  onIdle(): void;
}

/** Messages taken out of a mailbox that will not handle them, in arrival order. */
export interface UnhandledMessages<M> {
  messages: M[];
  asks: (PendingAsk | null)[];
}

/** How many of the unhandled messages were tells (nobody waits for them). */
export function tellsIn(unhandled: UnhandledMessages<unknown>): number {
  let tells = 0;
  for (const ask of unhandled.asks) if (ask === null) tells++;
  return tells;
}

/**
 * A bounded FIFO mailbox that hands its handler exactly one message at a time: the next
 * message starts only after the previous handler call — promise included — has settled, so a
 * handler that awaits (Postgres, Redis) never interleaves with the next one.
 *
 * It starts closed (messages queue while the actor activates) and runs once `open`ed. A
 * handler that throws does not stop it: an ask is rejected with the error, a tell's error
 * goes to `onError`. Synchronous results are taken without a promise; one promise per
 * asynchronous handler call is all the mailbox adds.
 */
export class Mailbox<M, R> {
  // Two parallel arrays with a moving head: no per-message envelope object.
  private messages: (M | undefined)[] = [];
  private asks: (PendingAsk | null)[] = [];
  private head = 0;
  private opened = false;
  private halted = false;
  private running = false;
  private handledThisTurn = 0;
  /** When the current turn's first message started (`performance.now()`). */
  private turnStartedMs = 0;
  private currentMessage: M | undefined = undefined;
  private currentAsk: PendingAsk | null = null;
  // Created once per mailbox on first use, not once per message.
  private resume: (() => void) | null = null;
  private onHandled: ((result: R) => void) | null = null;
  private onFailed: ((error: unknown) => void) | null = null;

  constructor(
    private readonly handler: MailboxHandler<M, R>,
    /** Messages that may wait; one more may be in its handler. */
    readonly capacity: number = DEFAULT_MAILBOX_CAPACITY,
  ) {}

  /** Messages waiting (not counting the one being handled). */
  get waiting(): number {
    return this.messages.length - this.head;
  }

  /** True while a message is being handled or a run is scheduled. */
  get isRunning(): boolean {
    return this.running;
  }

  /** The message in its handler now, if any. */
  get handling(): M | undefined {
    return this.currentMessage;
  }

  /** Records `value` as the reply to `message`, if it is the ask being handled. */
  replyTo(message: M, value: unknown): void {
    if (message === this.currentMessage) this.currentAsk?.reply(value);
  }

  /**
   * Queues a message. Throws `mailbox_full` at capacity; the message is then not queued.
   * Handling starts on a later microtask, never inside the caller's stack.
   */
  post(message: M, ask: PendingAsk | null = null): void {
    if (this.messages.length - this.head >= this.capacity) {
      throw new WheelhouseError(
        'mailbox_full',
        `The mailbox of ${this.handler.address} is full (${this.capacity} messages waiting).`,
        { details: { capacity: this.capacity }, retryAfterSeconds: 1 },
      );
    }
    this.messages.push(message);
    this.asks.push(ask);
    if (this.opened && !this.running && !this.halted) {
      this.running = true;
      queueMicrotask((this.resume ??= () => this.run()));
    }
  }

  /** Starts handling: the queued messages in order, or `onIdle` at once if there are none. */
  open(): void {
    if (this.opened) return;
    this.opened = true;
    if (this.halted || this.running) return;
    if (this.waiting === 0) {
      this.handler.onIdle();
      return;
    }
    this.running = true;
    this.run();
  }

  /**
   * No further message will start. If one is being handled, `onIdle` follows when it is done;
   * otherwise (`isRunning` false) the mailbox is already at rest.
   */
  halt(): void {
    this.halted = true;
  }

  /** Empties the queue, handing back what was waiting. */
  takeAll(): UnhandledMessages<M> {
    if (this.head === this.messages.length) return NOTHING_WAITING;
    const messages = this.messages.slice(this.head) as M[];
    const asks = this.asks.slice(this.head);
    this.messages = [];
    this.asks = [];
    this.head = 0;
    return { messages, asks };
  }

  private run(): void {
    while (!this.halted && this.head < this.messages.length) {
      const handled = ++this.handledThisTurn;
      if (handled === 1) this.turnStartedMs = performance.now();
      else if (
        handled > MESSAGES_PER_TURN ||
        (handled > MESSAGES_BEFORE_SLICE && performance.now() - this.turnStartedMs > TURN_SLICE_MS)
      ) {
        this.handledThisTurn = 0;
        setImmediate((this.resume ??= () => this.run()));
        return;
      }
      const message = this.messages[this.head] as M;
      const ask = this.asks[this.head] ?? null;
      this.messages[this.head] = undefined;
      this.asks[this.head] = null;
      this.head++;
      this.compact();
      this.currentMessage = message;
      this.currentAsk = ask;
      let result: R | PromiseLike<R>;
      try {
        result = this.handler.handle(message);
      } catch (error) {
        this.failed(error);
        continue;
      }
      if (isPromiseLike(result)) {
        // Resumes in `onHandled` / `onFailed`, which read the current message from fields.
        result.then(
          (this.onHandled ??= (value) => {
            this.succeeded(value);
            this.run();
          }),
          (this.onFailed ??= (error) => {
            this.failed(error);
            this.run();
          }),
        );
        return;
      }
      this.succeeded(result);
    }
    // At rest, the turn is over: the next message starts a new count. (Counting across idle
    // spells made every 257th message of an actor's life wait for the event loop.)
    this.handledThisTurn = 0;
    this.running = false;
    this.handler.onIdle();
  }

  private succeeded(result: R): void {
    const ask = this.currentAsk;
    this.currentMessage = undefined;
    this.currentAsk = null;
    this.handler.accept(result);
    ask?.complete();
  }

  private failed(error: unknown): void {
    const message = this.currentMessage as M;
    const ask = this.currentAsk;
    this.currentMessage = undefined;
    this.currentAsk = null;
    ask?.fail(error);
    this.handler.onError(error, message, ask !== null);
  }

  /** Drops consumed slots: all of them when the queue is empty, else once they dominate. */
  private compact(): void {
    if (this.head === this.messages.length) {
      this.messages.length = 0;
      this.asks.length = 0;
      this.head = 0;
    } else if (this.head >= 1024 && this.head * 2 >= this.messages.length) {
      this.messages.splice(0, this.head);
      this.asks.splice(0, this.head);
      this.head = 0;
    }
  }
}

/** What `takeAll` returns for an empty queue, without allocating. Never mutated. */
const NOTHING_WAITING = Object.freeze({
  messages: Object.freeze([]),
  asks: Object.freeze([]),
}) as unknown as UnhandledMessages<never>;

function isPromiseLike<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}
