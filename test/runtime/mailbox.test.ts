import { describe, expect, it } from 'vitest';
import { isWheelhouseError } from '../../src/lib/errors.js';
import { defineKind, type Ask, type Behavior } from '../../src/runtime/actor.js';
import { PendingAsk } from '../../src/runtime/ask.js';
import { FakeClock, settle } from '../../src/runtime/clock.js';
import { Mailbox, type MailboxHandler } from '../../src/runtime/mailbox.js';
import { deferred, flushMicrotasks, testSystem } from './helpers.js';

// ── The interleaving test ──────────────────────────────────────────────────────────────────
//
// A bank account whose deposit handler reads the balance, awaits (as a handler awaiting
// Postgres does), then writes balance + amount. Run through a mailbox that really handles one
// message at a time, N concurrent deposits total exactly. Run the handler concurrently — a
// dispatcher without a mailbox, which is what `comedy` does with async handlers — and every
// deposit reads the same starting balance, so all but the last write are lost (comedy: five
// deposits of 10 left 10, not 50). The "naive dispatcher" case below runs exactly that and
// asserts the check *fails* there, so the check cannot pass with the mailbox removed.

type Deposit = { type: 'deposit'; amount: number };
type Balance = Ask<{ type: 'balance' }, number>;
type AccountMessage = Deposit | Balance;
const ACCOUNT = defineKind<AccountMessage>('account');
interface Account {
  balance: number;
}

/** A seeded PRNG (mulberry32), so the random awaits are the same on every run. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** At least one await; sometimes a macrotask turn (I/O-like), sometimes a few microtasks. */
async function randomAwait(random: () => number): Promise<void> {
  if (random() < 0.5) await new Promise<void>((resolve) => setImmediate(resolve));
  const microtasks = 1 + Math.floor(random() * 5);
  for (let i = 0; i < microtasks; i++) await Promise.resolve();
}

function accountBehavior(random: () => number, reentries: { count: number }): Behavior<Account, AccountMessage> {
  let inHandler = false;
  return {
    kind: ACCOUNT,
    persistence: 'external',
    activate: async () => ({ balance: 0 }),
    async receive(state, message, ctx) {
      if (inHandler) reentries.count++;
      inHandler = true;
      try {
        switch (message.type) {
          case 'deposit': {
            const read = state.balance;
            await randomAwait(random);
            return { balance: read + message.amount };
          }
          case 'balance':
            ctx.reply(message, state.balance);
            return state;
        }
      } finally {
        inHandler = false;
      }
    },
  };
}

describe('mailbox: one message at a time', () => {
  for (const deposits of [5, 17, 50]) {
    it(`${deposits} concurrent read-await-write deposits total exactly`, async () => {
      const reentries = { count: 0 };
      const { system, errors } = testSystem();
      system.register(accountBehavior(seeded(deposits), reentries));
      const account = system.ref(ACCOUNT, 'acc-1');

      // Asks and tells mixed, all sent in the same tick, so they all are in flight together.
      const sent: Promise<unknown>[] = [];
      for (let i = 1; i <= deposits; i++) {
        if (i % 2 === 0) account.tell({ type: 'deposit', amount: 10 });
        else sent.push(account.ask({ type: 'deposit', amount: 10 }));
      }
      await Promise.all(sent);
      const balance: number = await account.ask({ type: 'balance' });

      expect(balance).toBe(deposits * 10);
      expect(reentries.count).toBe(0);
      expect(errors).toEqual([]);
    });
  }

  it('the same check fails against a naive concurrent dispatcher (the check is not vacuous)', async () => {
    const reentries = { count: 0 };
    const account = accountBehavior(seeded(5), reentries);
    const ctx = { reply: () => {} } as unknown as Parameters<typeof account.receive>[2];
    let state = await account.activate(ctx, null);
    // No mailbox: every message's handler starts at once, as comedy runs async handlers.
    const naiveSend = async (message: AccountMessage): Promise<void> => {
      state = await account.receive(state, message, ctx);
    };
    await Promise.all(Array.from({ length: 5 }, () => naiveSend({ type: 'deposit', amount: 10 })));

    expect(state.balance).toBe(10); // comedy's number: 10, not 50
    expect(reentries.count).toBeGreaterThan(0);
  });
});

// ── The Mailbox on its own ─────────────────────────────────────────────────────────────────

interface Recorder extends MailboxHandler<string, string> {
  handled: string[];
  accepted: string[];
  /** Errors of told messages. */
  errors: unknown[];
  /** Errors of asks, which the mailbox also rejected. */
  askErrors: unknown[];
  idle: number;
}

function recorder(handle: (message: string) => string | Promise<string>): Recorder {
  const r: Recorder = {
    address: 'test/mailbox',
    handled: [],
    accepted: [],
    errors: [],
    askErrors: [],
    idle: 0,
    handle(message) {
      r.handled.push(message);
      return handle(message);
    },
    accept(result) {
      r.accepted.push(result);
    },
    onError(error, _message, asked) {
      if (!asked) r.errors.push(error);
      else r.askErrors.push(error);
    },
    onIdle() {
      r.idle++;
    },
  };
  return r;
}

describe('Mailbox', () => {
  it('queues while closed, then handles in order, each after the previous settled', async () => {
    const gates = [deferred<string>(), deferred<string>()];
    const r = recorder((m) => (m === 'a' ? gates[0]!.promise : m === 'b' ? gates[1]!.promise : m));
    const mailbox = new Mailbox<string, string>(r, 10);
    mailbox.post('a');
    mailbox.post('b');
    mailbox.post('c');
    await flushMicrotasks();
    expect(r.handled).toEqual([]); // not open yet

    mailbox.open();
    await flushMicrotasks();
    expect(r.handled).toEqual(['a']);
    expect(mailbox.waiting).toBe(2);

    gates[0]!.resolve('A');
    await flushMicrotasks();
    expect(r.handled).toEqual(['a', 'b']);
    gates[1]!.resolve('B');
    await flushMicrotasks();
    expect(r.handled).toEqual(['a', 'b', 'c']);
    expect(r.accepted).toEqual(['A', 'B', 'c']);
    expect(mailbox.isRunning).toBe(false);
    expect(r.idle).toBe(1);
  });

  it('reports a failed tell to onError and rejects a failed ask; it goes on either way', async () => {
    const clock = new FakeClock();
    const r = recorder((m) => {
      if (m === 'throw') throw new Error('sync boom');
      if (m === 'reject') return Promise.reject(new Error('async boom'));
      return m;
    });
    const mailbox = new Mailbox<string, string>(r, 10);
    mailbox.open();
    const ask = new PendingAsk(clock, 1000, 'test', 'mailbox', 'reject');
    mailbox.post('throw');
    mailbox.post('reject', ask);
    mailbox.post('ok');
    await expect(ask.promise).rejects.toThrow('async boom');
    await flushMicrotasks();
    expect(r.errors.map((e) => (e as Error).message)).toEqual(['sync boom']);
    expect(r.askErrors.map((e) => (e as Error).message)).toEqual(['async boom']);
    expect(r.accepted).toEqual(['ok']);
    expect(clock.pendingTimers).toBe(0); // the ask's timer went with it
  });

  it('throws mailbox_full past capacity and accepts again once drained', async () => {
    const gate = deferred<string>();
    const r = recorder((m) => (m === 'slow' ? gate.promise : m));
    const mailbox = new Mailbox<string, string>(r, 2);
    mailbox.open();
    mailbox.post('slow');
    await flushMicrotasks(); // 'slow' is in its handler; the queue is empty again
    mailbox.post('x');
    mailbox.post('y');
    let full: unknown;
    try {
      mailbox.post('z');
    } catch (error) {
      full = error;
    }
    expect(isWheelhouseError(full, 'mailbox_full')).toBe(true);
    expect((full as Error).message).toContain('test/mailbox');
    gate.resolve('SLOW');
    await flushMicrotasks();
    mailbox.post('z');
    await flushMicrotasks();
    expect(r.handled).toEqual(['slow', 'x', 'y', 'z']);
  });

  it('halt lets the current message finish, starts no other, and hands the rest back', async () => {
    const gate = deferred<string>();
    const r = recorder((m) => (m === 'first' ? gate.promise : m));
    const mailbox = new Mailbox<string, string>(r, 10);
    mailbox.open();
    mailbox.post('first');
    mailbox.post('second');
    await flushMicrotasks();
    mailbox.halt();
    mailbox.post('third');
    const idleBefore = r.idle;
    gate.resolve('FIRST');
    await flushMicrotasks();
    expect(r.handled).toEqual(['first']);
    expect(r.idle).toBe(idleBefore + 1); // at rest: the owner is told once the current one is done
    expect(mailbox.takeAll().messages).toEqual(['second', 'third']);
    expect(mailbox.waiting).toBe(0);
  });

  it('yields to the event loop in a long run of synchronous messages', async () => {
    const r = recorder((m) => m);
    const mailbox = new Mailbox<string, string>(r, 10_000);
    for (let i = 0; i < 1000; i++) mailbox.post(String(i));
    mailbox.open();
    expect(r.handled.length).toBeLessThan(1000); // stopped for a turn of the event loop
    for (let turn = 0; turn < 10 && r.handled.length < 1000; turn++) await settle();
    expect(r.handled.length).toBe(1000);
    expect(r.handled[999]).toBe('999');
  });

  it('yields to the event loop once a run of few messages has taken long (a flood offered to one actor)', async () => {
    const busy = (ms: number): void => {
      const until = performance.now() + ms;
      while (performance.now() < until);
    };
    const r = recorder((m) => {
      busy(4);
      return m;
    });
    const mailbox = new Mailbox<string, string>(r, 10_000);
    for (let i = 0; i < 20; i++) mailbox.post(String(i));
    let handledAtImmediate = -1;
    setImmediate(() => (handledAtImmediate = r.handled.length));
    mailbox.open();
    // 20 messages of 4 ms are far fewer than a turn's count, but 80 ms is far past its time.
    expect(r.handled.length).toBeLessThan(20);
    for (let turn = 0; turn < 40 && r.handled.length < 20; turn++) await settle();
    expect(r.handled.length).toBe(20);
    expect(handledAtImmediate).toBeGreaterThan(0);
    expect(handledAtImmediate).toBeLessThan(20);
  });

  it('does not yield for time in a turn of a few messages, however long they took (a descheduled process, an awaited read)', async () => {
    const r = recorder((m) => {
      const until = performance.now() + 6;
      while (performance.now() < until);
      return m;
    });
    const mailbox = new Mailbox<string, string>(r, 10);
    for (let i = 0; i < 4; i++) mailbox.post(String(i));
    mailbox.open();
    expect(r.handled).toEqual(['0', '1', '2', '3']); // 24 ms, all in the one turn
  });

  it('starts a new turn each time it comes to rest: a message posted to an idle mailbox never waits for the event loop', async () => {
    const r = recorder((m) => m);
    const mailbox = new Mailbox<string, string>(r, 10_000);
    mailbox.open();
    for (let i = 0; i < 600; i++) {
      mailbox.post(String(i));
      await flushMicrotasks(2);
      expect(r.handled.length, `message ${i}`).toBe(i + 1);
    }
  });
});
