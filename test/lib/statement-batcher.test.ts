/**
 * The statement batcher (group commit): what shares a statement, who gets which answer,
 * who gets an error, and that nobody waits forever. The statement is a function whose
 * promise the test settles by hand, so nothing here depends on timing.
 */
import { describe, expect, it } from 'vitest';
import { StatementBatcher, type StatementBatcherOptions } from '../../src/lib/statement-batcher.js';

interface Statement<I> {
  items: I[];
  succeed(): void;
  fail(error: unknown): void;
}

/** A batcher whose statements wait until the test settles them; answers are `answerOf(item)`. */
function harness<I, O>(answerOf: (item: I) => O, options: StatementBatcherOptions<I> = {}) {
  const statements: Statement<I>[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  let onStatement: (() => void) | null = null;
  const batcher = new StatementBatcher<I, O>((items) => {
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    return new Promise<O[]>((resolve, reject) => {
      statements.push({
        items,
        succeed: () => {
          inFlight--;
          resolve(items.map(answerOf));
        },
        fail: (error) => {
          inFlight--;
          reject(error);
        },
      });
      onStatement?.();
    });
  }, options);
  /** Resolves once `n` statements have started. */
  const started = (n: number): Promise<Statement<I>> =>
    new Promise((resolve) => {
      const check = (): void => {
        if (statements.length >= n) {
          onStatement = null;
          resolve(statements[n - 1] as Statement<I>);
        }
      };
      onStatement = check;
      check();
    });
  return { batcher, statements, started, maxInFlight: () => maxInFlight };
}

describe('StatementBatcher', () => {
  it('puts what arrives in one turn into one statement, and what arrives meanwhile into the next', async () => {
    const h = harness((n: number) => n * 10);
    const first = [h.batcher.submit(1), h.batcher.submit(2), h.batcher.submitAll([3, 4])];
    const one = await h.started(1);
    expect(one.items).toEqual([1, 2, 3, 4]);

    // While the first is in flight, three callers arrive in different turns.
    const second = [h.batcher.submit(5)];
    await new Promise((r) => setImmediate(r));
    second.push(h.batcher.submit(6));
    await new Promise((r) => setImmediate(r));
    second.push(h.batcher.submit(7));
    await new Promise((r) => setImmediate(r));
    expect(h.statements).toHaveLength(1);

    one.succeed();
    expect(await Promise.all(first)).toEqual([10, 20, [30, 40]]);
    const two = await h.started(2);
    expect(two.items).toEqual([5, 6, 7]);
    two.succeed();
    expect(await Promise.all(second)).toEqual([50, 60, 70]);
    expect(h.maxInFlight()).toBe(1);
  });

  it('answers each caller its own items in order, across statements of at most maxItems', async () => {
    const h = harness((n: number) => `#${n}`, { maxItems: 1000 });
    const big = Array.from({ length: 2500 }, (_, i) => i);
    const small = [9001, 9002];
    const answers = [h.batcher.submitAll(big), h.batcher.submitAll(small)];
    for (let n = 1; n <= 3; n++) (await h.started(n)).succeed();
    expect(h.statements.map((s) => s.items.length)).toEqual([1000, 1000, 502]);
    const [bigAnswers, smallAnswers] = await Promise.all(answers);
    expect(bigAnswers).toEqual(big.map((i) => `#${i}`));
    expect(smallAnswers).toEqual(['#9001', '#9002']);
  });

  it('rejects every caller of a failed statement with its error, and no other', async () => {
    const h = harness((n: number) => n);
    const a = h.batcher.submit(1);
    const b = h.batcher.submitAll([2, 3]);
    const one = await h.started(1);
    const c = h.batcher.submit(4);
    const boom = new Error('the database went away');
    one.fail(boom);
    await expect(a).rejects.toBe(boom);
    await expect(b).rejects.toBe(boom);
    const two = await h.started(2);
    expect(two.items).toEqual([4]);
    two.succeed();
    expect(await c).toBe(4);
  });

  it('fails a caller whose statement throws before returning a promise', async () => {
    const boom = new Error('bad parameters');
    const batcher = new StatementBatcher<number, number>(() => {
      throw boom;
    });
    await expect(Promise.all([batcher.submit(1), batcher.submit(2)])).rejects.toBe(boom);
    await expect(batcher.submit(3)).rejects.toBe(boom);
  });

  it('fails the callers of a statement that answers the wrong number of items', async () => {
    const batcher = new StatementBatcher<number, number>(async (items) => items.slice(1));
    await expect(batcher.submitAll([1, 2])).rejects.toThrow(/answered 1/);
  });

  it('never puts two items of one key in one statement: the later one leads the next', async () => {
    const h = harness((item: { key: string; n: number }) => item.n, { keyOf: (i) => i.key });
    const answers = [
      h.batcher.submit({ key: 'a', n: 1 }),
      h.batcher.submit({ key: 'b', n: 2 }),
      h.batcher.submit({ key: 'a', n: 3 }),
      h.batcher.submit({ key: 'c', n: 4 }),
    ];
    const one = await h.started(1);
    expect(one.items.map((i) => i.n)).toEqual([1, 2]);
    one.succeed();
    const two = await h.started(2);
    expect(two.items.map((i) => i.n)).toEqual([3, 4]);
    two.succeed();
    expect(await Promise.all(answers)).toEqual([1, 2, 3, 4]);
  });

  it('serves callers first come, first served while new ones keep arriving', async () => {
    const h = harness((n: number) => n, { maxItems: 10 });
    const oldest = h.batcher.submitAll(Array.from({ length: 25 }, (_, i) => i));
    let settled = false;
    void oldest.then(() => (settled = true));
    // Every statement, another full statement's worth of new callers arrives first.
    for (let n = 1; n <= 3; n++) {
      const statement = await h.started(n);
      for (let i = 0; i < 10; i++) void h.batcher.submit(1000 * n + i);
      statement.succeed();
    }
    await oldest;
    expect(settled).toBe(true);
    expect(h.statements[2]!.items.slice(0, 5)).toEqual([20, 21, 22, 23, 24]);
    // ...and the newcomers follow in the order they came.
    expect(h.statements[2]!.items.slice(5)).toEqual([1000, 1001, 1002, 1003, 1004]);
  });

  it('does not starve an item held back by its key while other keys keep arriving', async () => {
    const h = harness((item: { key: string }) => item.key, { keyOf: (i) => i.key, maxItems: 3 });
    void h.batcher.submit({ key: 'k' });
    const held = h.batcher.submit({ key: 'k' });
    for (let n = 1; n <= 2; n++) {
      const statement = await h.started(n);
      for (let i = 0; i < 3; i++) void h.batcher.submit({ key: `new-${n}-${i}` });
      statement.succeed();
    }
    expect(h.statements[1]!.items[0]).toEqual({ key: 'k' });
    expect(await held).toBe('k');
  });
});
