import { describe, expect, it } from 'vitest';
import { defineKind, type Ask, type Behavior, type DeactivationReason } from '../../src/runtime/actor.js';
import type { Cancel } from '../../src/runtime/clock.js';
import { deferred, flushMicrotasks, testSystem, trusted } from './helpers.js';

type Arm = { type: 'arm'; delayMs: number; label: string };
type Disarm = { type: 'disarm'; label: string };
type Fired = { type: 'fired'; label: string };
type Stop = { type: 'stop' };
type Log = Ask<{ type: 'log' }, string[]>;
type AlarmMessage = Arm | Disarm | Fired | Stop | Log;
const ALARM = defineKind<AlarmMessage>('alarm');

interface AlarmState {
  fired: string[];
  cancels: Map<string, Cancel>;
}

function alarmBehavior(
  deactivations: DeactivationReason[] = [],
  armOnActivate?: Arm,
): Behavior<AlarmState, AlarmMessage> {
  return {
    kind: ALARM,
    persistence: 'external',
    async activate(ctx) {
      const state: AlarmState = { fired: [], cancels: new Map() };
      if (armOnActivate) {
        state.cancels.set(
          armOnActivate.label,
          ctx.schedule(armOnActivate.delayMs, { type: 'fired', label: armOnActivate.label }),
        );
      }
      return state;
    },
    receive(state, message, ctx) {
      switch (message.type) {
        case 'arm':
          state.cancels.set(message.label, ctx.schedule(message.delayMs, { type: 'fired', label: message.label }));
          return state;
        case 'disarm':
          state.cancels.get(message.label)?.();
          return state;
        case 'fired':
          state.fired.push(message.label);
          return state;
        case 'stop':
          ctx.stop();
          return state;
        case 'log':
          ctx.reply(message, [...state.fired]);
          return state;
      }
    },
    async deactivate(_state, _ctx, reason) {
      deactivations.push(reason);
    },
  };
}

describe('ctx.schedule', () => {
  it('delivers the message to the actor after the delay, on the clock', async () => {
    const { system, clock } = testSystem();
    system.register(alarmBehavior());
    const ref = system.ref(ALARM, 'a1');
    ref.tell({ type: 'arm', delayMs: 500, label: 'half' });
    ref.tell({ type: 'arm', delayMs: 2_000, label: 'two' });
    await flushMicrotasks();
    await clock.advance(499);
    expect(await ref.ask({ type: 'log' })).toEqual([]);
    await clock.advance(1);
    expect(await ref.ask({ type: 'log' })).toEqual(['half']);
    await clock.advance(1_500);
    expect(await ref.ask({ type: 'log' })).toEqual(['half', 'two']);
    expect(clock.pendingTimers).toBe(0);
  });

  it('can be cancelled with the returned function', async () => {
    const { system, clock } = testSystem();
    system.register(alarmBehavior());
    const ref = system.ref(ALARM, 'a1');
    ref.tell({ type: 'arm', delayMs: 500, label: 'x' });
    ref.tell({ type: 'disarm', label: 'x' });
    await ref.ask({ type: 'log' });
    await clock.advance(1_000);
    expect(await ref.ask({ type: 'log' })).toEqual([]);
  });

  it('works from activate (the wheel partition arms its tick there)', async () => {
    const { system, clock } = testSystem();
    system.register(alarmBehavior([], { type: 'arm', delayMs: 100, label: 'boot' }));
    await system.ensureActive('alarm', 'a1');
    await clock.advance(100);
    expect(await system.ref(ALARM, 'a1').ask({ type: 'log' })).toEqual(['boot']);
  });

  it('is cancelled when the actor stops', async () => {
    const deactivations: DeactivationReason[] = [];
    const { system, clock } = testSystem();
    system.register(alarmBehavior(deactivations));
    const ref = system.ref(ALARM, 'a1');
    ref.tell({ type: 'arm', delayMs: 500, label: 'never' });
    ref.tell({ type: 'stop' });
    await flushMicrotasks();
    expect(deactivations).toEqual(['stopped']);
    expect(system.list()).toEqual([]);
    expect(clock.pendingTimers).toBe(0);
    await clock.advance(1_000);
    expect(system.list()).toEqual([]); // nothing fired to wake it
  });
});

describe('shutdown', () => {
  it('deactivates every actor with reason shutdown, releases snapshot epochs, and stops all timers', async () => {
    const deactivations: DeactivationReason[] = [];
    const { system, clock, snapshots } = testSystem();
    system.register(alarmBehavior(deactivations));
    const saved: DeactivationReason[] = [];
    system.register<number, { type: 'noop' }, number>({
      kind: defineKind<{ type: 'noop' }, number>('saved', trusted()),
      persistence: 'snapshot',
      idlePassivationMs: 60_000,
      activate: async () => 7,
      receive: (s) => s,
      async deactivate(state, ctx, reason) {
        saved.push(reason);
        await ctx.snapshot(state);
      },
    });
    for (const key of ['a1', 'a2', 'a3']) system.ref(ALARM, key).tell({ type: 'arm', delayMs: 1_000, label: key });
    await system.ensureActive('saved', 's1');
    await flushMicrotasks();
    expect(system.list()).toHaveLength(4);
    expect(clock.pendingTimers).toBe(2); // the three alarms share the node's timer queue; one idle timer

    await system.shutdown();
    expect(deactivations).toEqual(['shutdown', 'shutdown', 'shutdown']);
    expect(saved).toEqual(['shutdown']);
    expect(await snapshots.read('saved', 's1')).toMatchObject({
      ownerNode: null,
      version: 1,
      state: { v: 1, state: 7 },
    });
    expect(system.list()).toEqual([]);
    expect(clock.pendingTimers).toBe(0);
  });

  it('lets the current message finish, refuses the queue, and refuses new messages', async () => {
    const gate = deferred();
    const deactivations: string[] = [];
    const { system, errors } = testSystem();
    type WorkerMessage = { type: 'work' } | { type: 'note' } | Ask<{ type: 'read' }, string[]>;
    const WORKER = defineKind<WorkerMessage>('worker');
    system.register<string[], WorkerMessage>({
      kind: WORKER,
      persistence: 'external',
      activate: async () => [],
      async receive(log, message, ctx) {
        if (message.type === 'work') await gate.promise;
        if (message.type === 'read') ctx.reply(message, log);
        return [...log, message.type];
      },
      async deactivate(log, _ctx, reason) {
        deactivations.push(`${reason}:${log.join(',')}`);
      },
    });
    const ref = system.ref(WORKER, 'w1');
    const work = ref.ask({ type: 'work' });
    const read = ref.ask({ type: 'read' });
    ref.tell({ type: 'note' });
    await flushMicrotasks();

    const down = system.shutdown();
    expect(() => ref.tell({ type: 'note' })).toThrow('The actor system is shutting down.');
    gate.resolve();
    await down;
    await expect(work).resolves.toBeUndefined();
    await expect(read).rejects.toMatchObject({ code: 'not_ready' });
    expect(deactivations).toEqual(['shutdown:work']);
    expect(errors.map((e) => e.info)).toEqual([{ kind: 'worker', key: 'w1', during: 'deliver', droppedTells: 1 }]);
    await expect(system.ensureActive('worker', 'w1')).rejects.toMatchObject({ code: 'not_ready' });
    expect(system.shutdown()).toBe(down); // idempotent
  });

  it('waits for an actor still activating, and refuses what queued for it', async () => {
    const gate = deferred();
    let deactivated = 0;
    const { system } = testSystem();
    const SLOW = defineKind<Ask<{ type: 'get' }, number>>('slow');
    system.register({
      kind: SLOW,
      persistence: 'external',
      activate: async () => {
        await gate.promise;
        return 1;
      },
      receive: (s, message, ctx) => {
        ctx.reply(message, s);
        return s;
      },
      async deactivate() {
        deactivated++;
      },
    });
    const get = system.ref(SLOW, 'k').ask({ type: 'get' });
    const down = system.shutdown();
    gate.resolve();
    await down;
    await expect(get).rejects.toMatchObject({ code: 'not_ready' });
    expect(deactivated).toBe(1);
  });
});
