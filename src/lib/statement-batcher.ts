/**
 * Group commit for callers that each bring a few items: what arrives during one event-loop
 * turn, or while a statement is in flight, goes into the next statement together, up to
 * `maxItems` per statement. Each caller gets the answers to its own items, in order, with
 * one promise however many items it brought; when a statement fails, every caller with an
 * item in it gets that error (and no other caller does).
 *
 * Callers are served first come, first served: a statement takes items from the oldest
 * caller on, so a steady stream of small callers cannot hold back a large one, nor the other
 * way round (a caller larger than `maxItems` spans several statements).
 *
 * With `keyOf`, two items of one key never share a statement: at the second, the statement
 * is closed and the item leads the next one. The results of the worker routes use it so that
 * two results for one task, sent at the same moment, are judged one after the other, as
 * they were when each went alone.
 *
 * `WriteBatcher` (write-batcher.ts) is the one-item-per-caller form the actors' own writes
 * use; this one serves the worker routes, where one caller may bring a thousand results and
 * the same task may come twice.
 */
export interface StatementBatcherOptions<I> {
  /** Most items in one statement. @default 1000 */
  maxItems?: number;
  /** Statements in flight at once. @default 1 */
  maxInFlight?: number;
  /** Items of one key never share a statement. @default none */
  keyOf?: (item: I) => string;
}

interface Caller<I, O> {
  readonly items: readonly I[];
  /** Items taken into statements so far (a prefix of `items`). */
  taken: number;
  /** Items answered so far. */
  answered: number;
  readonly answers: O[];
  /** Resolved or rejected: later answers for it are dropped. */
  settled: boolean;
  resolve(answers: O[]): void;
  reject(error: unknown): void;
}

/** Which items of a statement belong to which caller. */
interface Share<I, O> {
  caller: Caller<I, O>;
  from: number;
  count: number;
}

export class StatementBatcher<I, O> {
  private waiting: Caller<I, O>[] = [];
  private scheduled = false;
  private inFlight = 0;
  private readonly maxItems: number;
  private readonly maxInFlight: number;
  private readonly keyOf: ((item: I) => string) | undefined;

  constructor(
    /** Runs one statement for `items`; answers one value per item, in order. */
    private readonly run: (items: I[]) => Promise<O[]>,
    options: StatementBatcherOptions<I> = {},
  ) {
    this.maxItems = Math.max(1, options.maxItems ?? 1_000);
    this.maxInFlight = Math.max(1, options.maxInFlight ?? 1);
    this.keyOf = options.keyOf;
  }

  /** One item; its answer. */
  async submit(item: I): Promise<O> {
    const [answer] = await this.submitAll([item]);
    return answer as O;
  }

  /** Many items of one caller; their answers in order. */
  submitAll(items: readonly I[]): Promise<O[]> {
    if (items.length === 0) return Promise.resolve([]);
    return new Promise<O[]>((resolve, reject) => {
      this.waiting.push({
        items,
        taken: 0,
        answered: 0,
        answers: new Array<O>(items.length),
        settled: false,
        resolve,
        reject,
      });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.maxInFlight || this.waiting.length === 0) return;
    this.scheduled = true;
    // setImmediate, not a microtask: requests parsed in the same poll phase of the event
    // loop all reach `submitAll` before the statement is cut.
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    while (this.inFlight < this.maxInFlight && this.waiting.length > 0) {
      const [items, shares] = this.cut();
      if (items.length === 0) continue;
      this.inFlight++;
      let written: Promise<O[]>;
      try {
        written = this.run(items);
      } catch (error) {
        written = Promise.reject(error);
      }
      written
        .then(
          (answers) => {
            if (answers.length !== items.length) {
              throw new Error(`a statement of ${items.length} items answered ${answers.length}`);
            }
            this.answer(shares, answers);
          },
          (error: unknown) => this.fail(shares, error),
        )
        .catch((error: unknown) => this.fail(shares, error))
        .finally(() => {
          this.inFlight--;
          this.schedule();
        });
    }
  }

  /** Takes the next statement's items from the oldest callers on. */
  private cut(): [I[], Share<I, O>[]] {
    const items: I[] = [];
    const shares: Share<I, O>[] = [];
    const keys = this.keyOf === undefined ? null : new Set<string>();
    let done = 0;
    let closed = false;
    for (const caller of this.waiting) {
      if (caller.settled) {
        // Failed in an earlier statement: its other items are not sent.
        done++;
        continue;
      }
      const from = caller.taken;
      while (caller.taken < caller.items.length && items.length < this.maxItems) {
        const item = caller.items[caller.taken] as I;
        if (keys !== null) {
          const key = (this.keyOf as (item: I) => string)(item);
          if (keys.has(key)) {
            closed = true;
            break;
          }
          keys.add(key);
        }
        items.push(item);
        caller.taken++;
      }
      if (caller.taken > from) shares.push({ caller, from, count: caller.taken - from });
      if (caller.taken < caller.items.length) break;
      done++;
      if (closed || items.length >= this.maxItems) break;
    }
    this.waiting = done === this.waiting.length ? [] : this.waiting.slice(done);
    return [items, shares];
  }

  private answer(shares: readonly Share<I, O>[], answers: readonly O[]): void {
    let at = 0;
    for (const { caller, from, count } of shares) {
      for (let i = 0; i < count; i++) caller.answers[from + i] = answers[at + i] as O;
      at += count;
      caller.answered += count;
      if (!caller.settled && caller.answered === caller.items.length) {
        caller.settled = true;
        caller.resolve(caller.answers);
      }
    }
  }

  private fail(shares: readonly Share<I, O>[], error: unknown): void {
    for (const { caller } of shares) {
      if (caller.settled) continue;
      caller.settled = true;
      caller.reject(error);
    }
  }
}
