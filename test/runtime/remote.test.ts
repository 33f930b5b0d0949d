import { describe, expect, it } from 'vitest';
import { defineKind, type Ask, type Behavior } from '../../src/runtime/actor.js';
import type { Placement, Transport } from '../../src/runtime/placement.js';
import type { TransportEnvelope } from '../../src/runtime/router.js';
import { deferred, flushMicrotasks, testSystem } from './helpers.js';

type Echo = Ask<{ type: 'echo'; text: string }, string>;
type Note = { type: 'note'; text: string };
type EchoMessage = Echo | Note;
const ECHO = defineKind<EchoMessage>('echo');

function echoBehavior(notes: string[] = []): Behavior<null, EchoMessage> {
  return {
    kind: ECHO,
    persistence: 'external',
    activate: async () => null,
    receive(state, message, ctx) {
      if (message.type === 'echo') ctx.reply(message, `${ctx.nodeId}: ${message.text}`);
      else notes.push(message.text);
      return state;
    },
  };
}

/** Keys starting with `b-` live on node-b; the rest on node-a. */
const splitPlacement: Placement = { ownerOf: (_kind, key) => (key.startsWith('b-') ? 'node-b' : 'node-a') };

describe('placement and transport', () => {
  it('sends a message for an actor another node owns through the transport, with a deadline', async () => {
    const notesB: string[] = [];
    const b = testSystem({ nodeId: 'node-b', placement: splitPlacement });
    b.system.register(echoBehavior(notesB));
    const sent: { nodeId: string; envelope: TransportEnvelope }[] = [];
    const transport: Transport = {
      deliver: (nodeId, envelope) => {
        sent.push({ nodeId, envelope });
        return b.system.acceptRemote(JSON.parse(JSON.stringify(envelope)) as TransportEnvelope);
      },
    };
    const a = testSystem({
      nodeId: 'node-a',
      placement: splitPlacement,
      transport,
      clock: b.clock,
      defaultAskTimeoutMs: 2_000,
    });
    a.system.register(echoBehavior());

    expect(await a.system.ref(ECHO, 'a-1').ask({ type: 'echo', text: 'hi' })).toBe('node-a: hi');
    expect(sent).toEqual([]);

    const remote = a.system.ref(ECHO, 'b-1');
    remote.tell({ type: 'note', text: 'ünïcødé ✓' });
    expect(await remote.ask({ type: 'echo', text: 'hi' }, 750)).toBe('node-b: hi');
    expect(notesB).toEqual(['ünïcødé ✓']);
    const now = a.clock.now();
    expect(sent).toEqual([
      {
        nodeId: 'node-b',
        envelope: {
          kind: 'echo',
          key: 'b-1',
          message: { type: 'note', text: 'ünïcødé ✓' },
          deadlineMs: now + 2_000,
          ask: false,
        },
      },
      {
        nodeId: 'node-b',
        envelope: { kind: 'echo', key: 'b-1', message: { type: 'echo', text: 'hi' }, deadlineMs: now + 750, ask: true },
      },
    ]);
    expect(a.system.list()).toHaveLength(1);
    expect(b.system.list().map((i) => i.key)).toEqual(['b-1']);
  });

  it('throws a clear error when a remote actor is addressed and no transport is configured', async () => {
    const { system } = testSystem({ placement: splitPlacement });
    system.register(echoBehavior());
    const ref = system.ref(ECHO, 'b-1');
    expect(() => ref.tell({ type: 'note', text: 'x' })).toThrow(
      /No transport is configured, but echo\/b-1 is owned by node node-b/,
    );
    await expect(ref.ask({ type: 'echo', text: 'x' })).rejects.toMatchObject({ code: 'internal' });
    await expect(system.ensureActive('echo', 'b-1')).rejects.toThrow(/owned by node node-b/);
  });

  it('reports a failed remote tell and rejects a failed remote ask; a late ask times out', async () => {
    const never = new Promise<unknown>(() => {});
    const transport: Transport = {
      deliver: (_nodeId, envelope) =>
        envelope.message && (envelope.message as EchoMessage).type === 'note'
          ? Promise.reject(new Error('connection refused'))
          : never,
    };
    const { system, clock, errors } = testSystem({ placement: splitPlacement, transport });
    system.register(echoBehavior());
    const ref = system.ref(ECHO, 'b-1');
    ref.tell({ type: 'note', text: 'x' });
    await flushMicrotasks();
    expect(errors.map((e) => e.info)).toEqual([
      { kind: 'echo', key: 'b-1', during: 'deliver', messageType: 'note', droppedTells: 1 },
    ]);
    const hung = ref.ask({ type: 'echo', text: 'x' }, 100);
    const check = expect(hung).rejects.toMatchObject({ code: 'ask_timeout' });
    await clock.advance(100);
    await check;
  });

  it('accepts a forwarded ask only before its deadline, and only a well-formed message', async () => {
    const { system, clock } = testSystem();
    system.register(echoBehavior());
    const now = clock.now();
    await expect(
      system.acceptRemote({ kind: 'echo', key: 'k', message: { type: 'echo', text: 'x' }, deadlineMs: now, ask: true }),
    ).rejects.toMatchObject({ code: 'ask_timeout' });
    await expect(
      system.acceptRemote({ kind: 'echo', key: 'k', message: { text: 'no type' }, deadlineMs: now + 1_000, ask: true }),
    ).rejects.toMatchObject({ code: 'validation_failed' });
    await expect(
      system.acceptRemote({ kind: 'nope', key: 'k', message: { type: 'echo' }, deadlineMs: now + 1_000, ask: true }),
    ).rejects.toThrow(/No actor kind 'nope'/);
  });

  it("answers a forwarded activation by its deadline when the actor's previous instance does not leave", async () => {
    const release = deferred();
    const { system, clock } = testSystem();
    system.register({
      kind: ECHO,
      persistence: 'external',
      activate: async () => null,
      async receive(state, message) {
        if (message.type === 'note') await release.promise;
        return state;
      },
    } satisfies Behavior<null, EchoMessage>);
    system.ref(ECHO, 'k').tell({ type: 'note', text: 'never settles' });
    await flushMicrotasks();
    const dropping = system.dropAll(); // its handler runs on: the instance cannot leave
    const activation = system.acceptRemote({
      kind: 'echo',
      key: 'k',
      message: { type: '$activate' },
      deadlineMs: clock.now() + 5_000,
      ask: true,
    });
    const check = expect(activation).rejects.toMatchObject({ code: 'ask_timeout' });
    await clock.advance(5_000);
    await check;
    release.resolve();
    await dropping;
  });
});
