import { describe, expect, expectTypeOf, it } from 'vitest';
import { isWheelhouseError } from '../../src/lib/errors.js';
import { defineKind, type Ask, type Behavior } from '../../src/runtime/actor.js';
import { deferred, flushMicrotasks, testSystem, type Deferred } from './helpers.js';

type Add = { type: 'add'; n: number };
type Get = Ask<{ type: 'get' }, number>;
type Describe = Ask<{ type: 'describe' }, { total: number; label: string }>;
type Hang = Ask<{ type: 'hang' }, string>;
type Boom = Ask<{ type: 'boom' }, never>;
type Silent = Ask<{ type: 'silent' }, string | undefined>;
type CounterMessage = Add | Get | Describe | Hang | Boom | Silent;
const COUNTER = defineKind<CounterMessage>('counter');

function counter(gates: Deferred[] = [], capacity?: number): Behavior<number, CounterMessage> {
  return {
    kind: COUNTER,
    persistence: 'external',
    mailboxCapacity: capacity,
    activate: async () => 0,
    async receive(total, message, ctx) {
      switch (message.type) {
        case 'add':
          return total + message.n;
        case 'get':
          ctx.reply(message, total);
          return total;
        case 'describe':
          ctx.reply(message, { total, label: `total ${total}` });
          return total;
        case 'hang': {
          const gate = gates.shift();
          if (gate) await gate.promise;
          ctx.reply(message, 'late');
          return total;
        }
        case 'boom':
          throw new Error(`boom at ${total}`);
        case 'silent':
          return total;
      }
    },
  };
}

describe('ask', () => {
  it('infers the reply type from the message and resolves with ctx.reply', async () => {
    const { system } = testSystem();
    system.register(counter());
    const ref = system.ref(COUNTER, 'c1');
    ref.tell({ type: 'add', n: 2 });
    const total = ref.ask({ type: 'get' });
    const described = ref.ask({ type: 'describe' });
    expectTypeOf(total).toEqualTypeOf<Promise<number>>();
    expectTypeOf(described).toEqualTypeOf<Promise<{ total: number; label: string }>>();
    expect(await total).toBe(2);
    expect(await described).toEqual({ total: 2, label: 'total 2' });
  });

  it('resolves with undefined when the handler gives no reply', async () => {
    const { system } = testSystem();
    system.register(counter());
    await expect(system.ref(COUNTER, 'c1').ask({ type: 'silent' })).resolves.toBeUndefined();
  });

  it('rejects with ask_timeout after the timeout; the late reply is dropped, the actor goes on', async () => {
    const gate = deferred();
    const { system, clock, errors } = testSystem({ defaultAskTimeoutMs: 1_000 });
    system.register(counter([gate]));
    const ref = system.ref(COUNTER, 'c1');
    let outcome: unknown = 'pending';
    const hung = ref.ask({ type: 'hang' }).then(
      (v) => (outcome = v),
      (e: unknown) => (outcome = e),
    );
    const queued = ref.ask({ type: 'get' }, 5_000);

    await clock.advance(999);
    expect(outcome).toBe('pending');
    await clock.advance(1);
    await hung;
    expect(isWheelhouseError(outcome, 'ask_timeout')).toBe(true);
    expect((outcome as Error).message).toMatch(/counter\/c1 did not answer 'hang' within 1000 ms/);

    gate.resolve(); // the handler finishes after its caller gave up
    expect(await queued).toBe(0); // the queued message still runs
    expect(outcome).not.toBe('late');
    expect(errors).toEqual([]);
  });

  it('takes a per-call timeout over the default', async () => {
    const { system, clock } = testSystem({ defaultAskTimeoutMs: 60_000 });
    system.register(counter([deferred()]));
    const hung = system.ref(COUNTER, 'c1').ask({ type: 'hang' }, 50);
    const check = expect(hung).rejects.toMatchObject({ code: 'ask_timeout' });
    await clock.advance(50);
    await check;
  });

  it('uses one timer per ask and cancels it when the ask is answered', async () => {
    const { system, clock } = testSystem();
    system.register(counter());
    const ref = system.ref(COUNTER, 'c1');
    ref.tell({ type: 'add', n: 1 });
    expect(clock.pendingTimers).toBe(0); // a tell arms no timer
    const answer = ref.ask({ type: 'get' });
    expect(clock.pendingTimers).toBe(1);
    await answer;
    expect(clock.pendingTimers).toBe(0);
  });

  it('rejects the ask with the handler error, and the mailbox goes on', async () => {
    const { system, errors } = testSystem();
    system.register(counter());
    const ref = system.ref(COUNTER, 'c1');
    ref.tell({ type: 'add', n: 5 });
    await expect(ref.ask({ type: 'boom' })).rejects.toThrow('boom at 5');
    ref.tell({ type: 'add', n: 1 });
    expect(await ref.ask({ type: 'get' })).toBe(6);
    expect(errors).toEqual([]); // the asker got the error; nothing else to report
  });

  it('reports a failed tell through onError, with the actor and message named', async () => {
    const { system, errors } = testSystem();
    system.register(counter());
    const ref = system.ref(COUNTER, 'c1');
    ref.tell({ type: 'boom' });
    expect(await ref.ask({ type: 'get' })).toBe(0);
    expect(errors).toHaveLength(1);
    expect((errors[0]!.error as Error).message).toBe('boom at 0');
    expect(errors[0]!.info).toEqual({ kind: 'counter', key: 'c1', during: 'receive', messageType: 'boom' });
  });

  it('throws mailbox_full from tell and rejects ask when the mailbox is at capacity', async () => {
    const gate = deferred();
    const { system } = testSystem();
    system.register(counter([gate], 2));
    const ref = system.ref(COUNTER, 'c1');
    const hung = ref.ask({ type: 'hang' }, 60_000);
    await flushMicrotasks(); // 'hang' is in its handler; two more may wait
    ref.tell({ type: 'add', n: 1 });
    ref.tell({ type: 'add', n: 1 });
    expect(() => ref.tell({ type: 'add', n: 1 })).toThrow(expect.objectContaining({ code: 'mailbox_full' }));
    await expect(ref.ask({ type: 'get' })).rejects.toMatchObject({ code: 'mailbox_full' });

    gate.resolve();
    expect(await hung).toBe('late');
    expect(await ref.ask({ type: 'get' })).toBe(2); // the refused ones never counted
  });

  it('refuses a timeout that is not a positive number of milliseconds', async () => {
    const { system } = testSystem();
    system.register(counter());
    const ref = system.ref(COUNTER, 'c1');
    await expect(ref.ask({ type: 'get' }, 0)).rejects.toThrow(/timeoutMs must be a positive number/);
    await expect(ref.ask({ type: 'get' }, Number.POSITIVE_INFINITY)).rejects.toThrow(/positive number/);
  });
});
