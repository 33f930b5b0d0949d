import { describe, expect, expectTypeOf, it } from 'vitest';
import { LEASE, type LeaseMessage } from '../../src/actors/worker-lease.js';
import { WHEEL, wheelPartitionBehavior } from '../../src/actors/wheel-partition.js';
import type { WheelSnapshot } from '../../src/actors/wheel-state.js';
import { defineKind, type ActorContext, type ActorRef, type Ask, type Behavior } from '../../src/runtime/actor.js';
import type { ActorSystem } from '../../src/runtime/system.js';
import { testSystem } from './helpers.js';

/**
 * What the types promise: a ref carries only its kind's messages, an ask resolves to the type
 * its message declares, a handler's reply must be of that type, and `activate` gets the
 * kind's decoded snapshot. `tsc` runs over this file: each `@ts-expect-error` below fails the
 * build if the line under it ever compiles.
 */

type Ping = Ask<{ type: 'ping'; text: string }, string>;
type Count = Ask<{ type: 'count' }, number>;
type Poke = { type: 'poke' };
type PingMessage = Ping | Count | Poke;
const PING = defineKind<PingMessage>('ping');

type OtherMessage = { type: 'other' };
const OTHER = defineKind<OtherMessage>('other');

const pinger: Behavior<number, PingMessage> = {
  kind: PING,
  persistence: 'external',
  activate: async (_ctx, snapshot) => {
    expectTypeOf(snapshot).toEqualTypeOf<null>(); // an external kind has no snapshot
    return 0;
  },
  receive(pokes, message, ctx) {
    switch (message.type) {
      case 'ping':
        ctx.reply(message, `pong: ${message.text}`);
        return pokes;
      case 'count':
        ctx.reply(message, pokes);
        return pokes;
      case 'poke':
        return pokes + 1;
    }
  },
};

/** Never called: the lines in it are checked by the compiler only. */
function compileOnly(ctx: ActorContext<PingMessage>, system: ActorSystem, ping: Ping, count: Count): void {
  // @ts-expect-error 'ping' is answered with a string, not a number
  ctx.reply(ping, 42);
  // @ts-expect-error 'count' is answered with a number, not a string
  ctx.reply(count, 'three');
  // @ts-expect-error a message of another kind is not this actor's to answer
  ctx.reply({ type: 'other' }, undefined);
  // @ts-expect-error an external kind cannot snapshot
  void ctx.snapshot({ pokes: 1 });

  const ref = system.ref(PING, 'p1');
  // @ts-expect-error 'other' is not a message of kind 'ping'
  ref.tell({ type: 'other' });
  // @ts-expect-error a ref of kind 'ping' does not take the messages of kind 'other'
  system.ref<OtherMessage>(PING, 'p1');
  // @ts-expect-error nor is it a ref of kind 'other'
  const asOther: ActorRef<OtherMessage> = ref;
  // @ts-expect-error a kind is named by its token, not by a string
  system.ref('ping', 'p1');
  // @ts-expect-error the lease takes no wheel messages
  system.ref(LEASE, 't1').tell({ type: 'tick' });
  void asOther;
  void system.ref(OTHER, 'o1');
  expectTypeOf(system.ref(LEASE, 't1').ask({ type: 'heartbeat', tokenDigest: '00' })).toEqualTypeOf<
    Promise<{ leaseExpiresMs: number; deadlineMs: number; cancelRequested: boolean } | null>
  >();

  const wrongReply: Behavior<number, PingMessage> = {
    kind: PING,
    persistence: 'external',
    activate: async () => 0,
    receive(pokes, message, ctx2) {
      // @ts-expect-error a handler that answers 'count' with a string does not compile
      if (message.type === 'count') ctx2.reply(message, 'many');
      return pokes;
    },
  };
  void wrongReply;
}

describe('typed kinds', () => {
  it('infers the message and reply types from the kind token', async () => {
    expect(typeof compileOnly).toBe('function');
    const { system } = testSystem();
    system.register(pinger);
    const ref = system.ref(PING, 'p1');
    expectTypeOf(ref).toEqualTypeOf<ActorRef<PingMessage>>();
    const pong = ref.ask({ type: 'ping', text: 'hi' });
    expectTypeOf(pong).toEqualTypeOf<Promise<string>>();
    expectTypeOf(ref.ask({ type: 'count' })).toEqualTypeOf<Promise<number>>();
    ref.tell({ type: 'poke' });
    expect(await pong).toBe('pong: hi');
    expect(await ref.ask({ type: 'count' })).toBe(1);
    expect(ref.kind).toBe(PING.name);
  });

  it('types the actor kinds of the scheduler', () => {
    type Activate = ReturnType<typeof wheelPartitionBehavior>['activate'];
    expectTypeOf<Parameters<Activate>[1]>().toEqualTypeOf<WheelSnapshot | null>();
    expectTypeOf<Parameters<ActorRef<LeaseMessage>['tell']>[0]>().toEqualTypeOf<LeaseMessage>();
    expect(WHEEL.snapshot?.version).toBe(1);
    expect(LEASE.snapshot).toBeNull();
  });
});
