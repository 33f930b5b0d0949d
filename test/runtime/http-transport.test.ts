import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { WheelhouseError } from '../../src/lib/errors.js';
import { clusterRoutes } from '../../src/http/cluster-routes.js';
import { handleError } from '../../src/http/errors.js';
import { useRouteSchemas } from '../../src/http/server.js';

const SHARED_SECRET = 'a-cluster-secret-of-at-least-32-bytes';
/** What a peer sends with every request. */
const PEER = { 'x-wheelhouse-cluster-secret': SHARED_SECRET };
import { defineKind, type Ask, type Behavior } from '../../src/runtime/actor.js';
import { FakeClock, systemClock, type Clock } from '../../src/runtime/clock.js';
import { inspectRemote, notifyRefresh } from '../../src/runtime/cluster-wire.js';
import { HttpTransport } from '../../src/runtime/http-transport.js';
import type { TransportEnvelope } from '../../src/runtime/router.js';
import { ActorSystem } from '../../src/runtime/system.js';
import { deferred, type Deferred } from './helpers.js';
import { MemorySnapshotStore } from './memory-snapshots.js';
import { eventually } from '../support/waits.js';

/**
 * Real nodes in one process: each an ActorSystem behind a fastify server on 127.0.0.1 with the
 * cluster routes, sending through an HttpTransport. Real timers, deadlines of a few hundred ms;
 * the assertions are about outcomes, never speed.
 */

type Msg =
  | Ask<{ type: 'echo'; text: string }, string>
  | { type: 'note'; text: string }
  | Ask<{ type: 'mirror'; data: unknown }, unknown>
  | Ask<{ type: 'refuse' }, never>
  | Ask<{ type: 'crash' }, never>
  | Ask<{ type: 'hang' }, never>;
const ECHO = defineKind<Msg>('echo');

interface TestNode {
  id: string;
  system: ActorSystem;
  app: FastifyInstance;
  address: string;
  transport: HttpTransport;
  /** Texts of the notes this node's actors handled, in order. */
  notes: string[];
  /** Data of the `mirror` asks this node's actors handled. */
  mirrored: unknown[];
  /** Envelopes the cluster routes handed to the system, in order. */
  accepted: TransportEnvelope[];
  /** Requests that reached the server. */
  requests: number;
  refreshes: number;
  /** While set, the server answers 503 `not_ready`, as a closing node's does. */
  closing: boolean;
  /** Runs before each route handler with the parsed body. */
  beforeHandler: (body: unknown) => void;
  /** Whether its server has been stopped. */
  stopped: boolean;
  /** Resolves once a note with `text` has been handled here. */
  noteArrived(text: string): Promise<void>;
}

interface NodeOptions {
  /** Secret of the node's server and, unless `transportSecret` says otherwise, its transport. */
  secret?: string | null;
  transportSecret?: string | null;
  maxBatch?: number;
  maxBatchBytes?: number;
  bodyLimitBytes?: number;
  requestTimeoutMs?: number;
  /** The transport's clock (its backoffs); the actor system keeps the real one. */
  transportClock?: Clock;
}

/** Nodes, the membership they share (`addresses`) and the ring (`route`), which tests change. */
class TestCluster {
  readonly addresses = new Map<string, string>();
  readonly nodes: TestNode[] = [];
  /** The ring: keys `b-…` on node-b, `c-…` on node-c, the rest on node-a. */
  route: (kind: string, key: string) => string = (_kind, key) =>
    key.startsWith('b-') ? 'node-b' : key.startsWith('c-') ? 'node-c' : 'node-a';
  /** Called on every membership lookup; tests hook it to wait for one. */
  onAddressOf: (nodeId: string) => void = () => {};

  async node(id: string, options: NodeOptions = {}): Promise<TestNode> {
    // The default is one secret every test node shares: without one a node takes no
    // node-to-node request at all.
    const secret = options.secret === undefined ? SHARED_SECRET : options.secret;
    const waiters: { text: string; arrived: Deferred }[] = [];
    const node = {
      id,
      notes: [] as string[],
      mirrored: [] as unknown[],
      accepted: [] as TransportEnvelope[],
      requests: 0,
      refreshes: 0,
      closing: false,
      beforeHandler: () => {},
      stopped: false,
      noteArrived(text: string): Promise<void> {
        if (node.notes.includes(text)) return Promise.resolve();
        const arrived = deferred();
        waiters.push({ text, arrived });
        return arrived.promise;
      },
    } as Omit<TestNode, 'system' | 'app' | 'address' | 'transport'> as TestNode; // the rest is filled below
    const behavior: Behavior<null, Msg> = {
      kind: ECHO,
      persistence: 'external',
      activate: async () => null,
      receive(state, message, ctx) {
        switch (message.type) {
          case 'echo':
            ctx.reply(message, `${ctx.nodeId}: ${message.text}`);
            break;
          case 'note':
            node.notes.push(message.text);
            for (const w of waiters.filter((w) => w.text === message.text)) w.arrived.resolve();
            break;
          case 'mirror':
            node.mirrored.push(message.data);
            ctx.reply(message, message.data);
            break;
          case 'refuse':
            throw new WheelhouseError('task_finished', 'already done', { details: { taskId: 't-1' } });
          case 'crash':
            throw new Error('boom');
          case 'hang':
            return held.promise.then(() => state); // not answered while it holds the actor
        }
        return state;
      },
    };
    node.transport = new HttpTransport({
      nodeId: id,
      secret: options.transportSecret === undefined ? secret : options.transportSecret,
      addressOf: (nodeId) => {
        this.onAddressOf(nodeId);
        return this.addresses.get(nodeId);
      },
      ownerOf: (kind, key) => this.route(kind, key),
      deliverLocal: (envelope) => node.system.acceptRemote(envelope),
      maxBatch: options.maxBatch,
      maxBatchBytes: options.maxBatchBytes,
      requestTimeoutMs: options.requestTimeoutMs,
      ...(options.transportClock ? { clock: options.transportClock } : {}),
    });
    node.system = new ActorSystem({
      nodeId: id,
      clock: systemClock,
      snapshots: new MemorySnapshotStore(),
      placement: { ownerOf: (kind, key) => this.route(kind, key) },
      transport: node.transport,
      defaultAskTimeoutMs: 3_000,
      onError: () => {},
    });
    node.system.register(behavior);

    const app = Fastify();
    useRouteSchemas(app);
    app.setErrorHandler(handleError);
    app.addHook('onRequest', (_request, _reply, done) => {
      node.requests += 1;
      done(node.closing ? new WheelhouseError('not_ready', 'The node is shutting down.') : undefined);
    });
    app.addHook('preHandler', (request, _reply, done) => {
      node.beforeHandler(request.body);
      done();
    });
    await app.register(
      clusterRoutes({
        secret,
        accept: (envelope) => {
          node.accepted.push(envelope);
          return node.system.acceptRemote(envelope);
        },
        onRefresh: () => {
          node.refreshes += 1;
        },
        inspect: (kind, key) => node.system.inspect(kind, key),
        presence: () => ({ connected: 0, polling: 0, lastAskedMs: null }),
        listActors: () => [],
        bodyLimitBytes: options.bodyLimitBytes,
      }),
    );
    await app.listen({ host: '127.0.0.1', port: 0 });
    node.app = app;
    node.address = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    this.addresses.set(id, node.address);
    this.nodes.push(node);
    return node;
  }

  /** Stops a node's server: its port refuses connections from now on. */
  async stop(node: TestNode): Promise<void> {
    node.stopped = true;
    await node.app.close();
  }

  async close(): Promise<void> {
    for (const node of this.nodes) {
      await node.transport.close();
      if (!node.stopped) await this.stop(node);
      await node.system.shutdown();
    }
  }
}

let cluster: TestCluster;
/** What a `hang` waits for: released after each test, so that its actor can leave. */
let held = deferred();

afterEach(async () => {
  held.resolve();
  held = deferred();
  await cluster.close();
});

function newCluster(): TestCluster {
  cluster = new TestCluster();
  return cluster;
}

function askEcho(text: string, key = 'b-1', deadlineInMs = 3_000): TransportEnvelope {
  return { kind: 'echo', key, message: { type: 'echo', text }, deadlineMs: Date.now() + deadlineInMs, ask: true };
}

function caught(promise: Promise<unknown>): Promise<WheelhouseError> {
  return promise.then(
    (value) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(value)}`);
    },
    (error: unknown) => error as WheelhouseError,
  );
}

const UNICODE = 'ünïcødé ✓ — 日本語 😀 𝄞 "quoted" \\ \u2028\u2029 \u0000 and a lone \ud800';

describe('HttpTransport between real nodes', () => {
  it('carries tells and asks with arbitrary unicode JSON both ways, exactly', async () => {
    newCluster();
    const a = await cluster.node('node-a');
    const b = await cluster.node('node-b');
    const ref = a.system.ref(ECHO, 'b-1');

    ref.tell({ type: 'note', text: UNICODE });
    expect(await ref.ask({ type: 'echo', text: UNICODE })).toBe(`node-b: ${UNICODE}`);
    expect(b.notes).toEqual([UNICODE]);

    const dataJson = `{"__proto__":{"polluted":true},"nested":[1,2.5,null,true,"${'😀'}",{"a":{"b":[]}}],"big":1e+308,"text":${JSON.stringify(UNICODE)}}`;
    const data: unknown = JSON.parse(dataJson);
    const back = await ref.ask({ type: 'mirror', data });
    expect(JSON.stringify(back)).toBe(JSON.stringify(data));
    expect(JSON.stringify(b.mirrored[0])).toBe(JSON.stringify(data));
    expect(Object.hasOwn(b.mirrored[0] as object, '__proto__')).toBe(true);
    expect(({} as { polluted?: boolean }).polluted).toBeUndefined();
    expect(a.system.list()).toEqual([]);
    expect(b.system.list().map((actor) => actor.key)).toEqual(['b-1']);
  });

  it('sends 1 000 tells of one turn in ONE request, and they arrive in order', async () => {
    newCluster();
    const a = await cluster.node('node-a');
    const b = await cluster.node('node-b');
    const ref = a.system.ref(ECHO, 'b-1');
    const texts = Array.from({ length: 1_000 }, (_, i) => `tell ${i}`);
    for (const text of texts) ref.tell({ type: 'note', text });
    await b.noteArrived('tell 999');
    expect(b.notes).toEqual(texts);
    expect(a.transport.stats()).toEqual({ requests: 1, envelopes: 1_000, retries: 0, failed: 0 });
  });

  it('splits a turn into batches of maxBatch and keeps their order', async () => {
    newCluster();
    const a = await cluster.node('node-a', { maxBatch: 64 });
    const b = await cluster.node('node-b');
    const ref = a.system.ref(ECHO, 'b-1');
    const texts = Array.from({ length: 1_000 }, (_, i) => `tell ${i}`);
    for (const text of texts) ref.tell({ type: 'note', text });
    expect(await ref.ask({ type: 'echo', text: 'last' })).toBe('node-b: last');
    expect(b.notes).toEqual(texts);
    expect(a.transport.stats().requests).toBe(Math.ceil(1_001 / 64));
  });

  it('splits a turn into batches of at most maxBatchBytes, a larger envelope alone', async () => {
    newCluster();
    const a = await cluster.node('node-a', { maxBatchBytes: 1_000 });
    const b = await cluster.node('node-b');
    const ref = a.system.ref(ECHO, 'b-1');
    const texts = ['x'.repeat(400), 'y'.repeat(400), 'z'.repeat(2_000), 'w'.repeat(400)];
    for (const text of texts) ref.tell({ type: 'note', text });
    await b.noteArrived(texts[3] as string);
    expect(b.notes).toEqual(texts);
    expect(a.transport.stats()).toMatchObject({ requests: 3, envelopes: 4 });
  });

  it('answers the rest of a batch when one ask in it is never answered', async () => {
    newCluster();
    const a = await cluster.node('node-a');
    const b = await cluster.node('node-b');
    // One turn, one request: an ask its actor never answers, an ask answered at once, a tell.
    const hung = caught(a.system.ref(ECHO, 'b-hang').ask({ type: 'hang' }, 1_500));
    const echoed = a.system.ref(ECHO, 'b-1').ask({ type: 'echo', text: 'beside' }, 1_500);
    a.system.ref(ECHO, 'b-2').tell({ type: 'note', text: 'told beside' });
    expect(await echoed).toBe('node-b: beside');
    expect((await hung).code).toBe('ask_timeout');
    expect(b.notes).toEqual(['told beside']);
    // Answered within the request: nothing sent again, only the hung ask failed.
    expect(a.transport.stats()).toEqual({ requests: 1, envelopes: 3, retries: 0, failed: 1 });
  });

  it('sends an ask given longer than a request may wait in a request of its own, so the rest is answered', async () => {
    newCluster();
    const a = await cluster.node('node-a', { requestTimeoutMs: 1_000 });
    const b = await cluster.node('node-b');
    // One turn: an ask given 5 s whose actor answers after 2 s, beside an ask and a tell due
    // within the request's bound. In one request, bounded by 1 s, all three would be given up.
    const slow = a.system.ref(ECHO, 'b-hang').ask({ type: 'hang' }, 5_000);
    const echoed = a.system.ref(ECHO, 'b-1').ask({ type: 'echo', text: 'beside' }, 900);
    a.system.ref(ECHO, 'b-2').tell({ type: 'note', text: 'told beside' });
    const released = setTimeout(() => held.resolve(), 2_000);
    try {
      expect(await echoed).toBe('node-b: beside');
      await slow;
      expect(b.notes).toEqual(['told beside']);
      expect(a.transport.stats()).toEqual({ requests: 2, envelopes: 3, retries: 0, failed: 0 });
    } finally {
      clearTimeout(released);
    }
  });

  it('rejects with the remote error and its code; an unknown kind is internal', async () => {
    newCluster();
    const a = await cluster.node('node-a');
    await cluster.node('node-b');
    const ref = a.system.ref(ECHO, 'b-1');

    const refused = await caught(ref.ask({ type: 'refuse' }));
    expect(refused).toBeInstanceOf(WheelhouseError);
    expect(refused).toMatchObject({ code: 'task_finished', message: 'already done', details: { taskId: 't-1' } });

    const crashed = await caught(ref.ask({ type: 'crash' }));
    expect(crashed).toMatchObject({ code: 'internal', message: 'boom' });

    const unknown = await caught(
      a.transport.deliver('node-b', {
        kind: 'nope',
        key: 'b-1',
        message: { type: 'x' },
        deadlineMs: Date.now() + 3_000,
        ask: true,
      }),
    );
    expect(unknown).toMatchObject({ code: 'internal' });
    expect(unknown.message).toMatch(/No actor kind 'nope'/);
    expect(a.transport.stats()).toMatchObject({ retries: 0, failed: 3 });
  });

  it('fails at once, without retrying, when the cluster secrets differ', async () => {
    newCluster();
    await cluster.node('node-b', { secret: 'the-secret' });
    const wrong = await cluster.node('node-a', { secret: 'the-secret', transportSecret: 'not-the-secret' });
    const none = await cluster.node('node-c', { secret: 'the-secret', transportSecret: null });

    const forbidden = await caught(wrong.transport.deliver('node-b', askEcho('hi', 'b-1', 5_000)));
    expect(forbidden).toMatchObject({ code: 'internal' });
    expect(forbidden.message).toMatch(/403 forbidden.*the cluster secrets of the two nodes differ/);
    expect(wrong.transport.stats()).toEqual({ requests: 1, envelopes: 1, retries: 0, failed: 1 });

    const unauthorized = await caught(none.transport.deliver('node-b', askEcho('hi', 'b-1', 5_000)));
    expect(unauthorized.message).toMatch(/401 unauthorized.*the cluster secrets of the two nodes differ/);
    expect(none.transport.stats().retries).toBe(0);

    const right = await cluster.node('node-d', { secret: 'the-secret' });
    expect(await right.transport.deliver('node-b', askEcho('hi'))).toBe('node-b: hi');
  });

  it('answers 401 without the secret header, 403 with a wrong one', async () => {
    newCluster();
    const b = await cluster.node('node-b', { secret: 's3cret' });
    const post = (headers: Record<string, string>) =>
      b.app.inject({ method: 'POST', url: '/internal/cluster/refresh', headers });
    const missing = await post({});
    expect(missing.statusCode).toBe(401);
    expect(missing.json()).toMatchObject({ error: { code: 'unauthorized' } });
    const wrong = await post({ 'x-wheelhouse-cluster-secret': 's3cres' });
    expect(wrong.statusCode).toBe(403);
    expect(wrong.json()).toMatchObject({ error: { code: 'forbidden' } });
    expect((await post({ 'x-wheelhouse-cluster-secret': 's3cret' })).statusCode).toBe(204);
    expect(b.refreshes).toBe(1);
  });

  it('with a null secret refuses every request, loopback included', async () => {
    newCluster();
    const b = await cluster.node('node-b', { secret: null });
    const from = (remoteAddress: string) =>
      b.app.inject({ method: 'POST', url: '/internal/cluster/refresh', remoteAddress });
    for (const address of ['127.0.0.1', '::1', '::ffff:127.0.0.1', '10.1.2.3']) {
      const res = await from(address);
      expect(res.statusCode, address).toBe(401);
      expect(res.json<{ error: { code: string; message: string } }>().error).toMatchObject({ code: 'unauthorized' });
      expect(res.json<{ error: { message: string } }>().error.message).toMatch(/same clusterSecret/i);
    }
    expect(b.refreshes).toBe(0);
  });

  it('answers 400 naming the bad field of a malformed batch', async () => {
    newCluster();
    const b = await cluster.node('node-b');
    const good = {
      kind: 'echo',
      key: 'b-1',
      message: { type: 'note', text: 'x' },
      deadline: Date.now() + 1_000,
      ask: false,
    };
    const cases: [unknown, string][] = [
      [[good], 'body'],
      [{ envelopes: [good] }, 'from'],
      [{ from: 'node-a' }, 'envelopes'],
      [{ from: 'node-a', envelopes: [good, 'x'] }, 'envelopes[1]'],
      [{ from: 'node-a', envelopes: [good, { ...good, kind: 7 }] }, 'envelopes[1].kind'],
      [{ from: 'node-a', envelopes: [good, { ...good, message: null }] }, 'envelopes[1].message'],
      [{ from: 'node-a', envelopes: [good, good, good, { ...good, deadline: 'soon' }] }, 'envelopes[3].deadline'],
      [{ from: 'node-a', envelopes: [{ ...good, ask: 'yes' }] }, 'envelopes[0].ask'],
      [{ from: 'node-a', order: { stream: 's', seq: 1, since: 2 }, envelopes: [] }, 'order.since'],
    ];
    for (const [payload, field] of cases) {
      const response = await b.app.inject({
        method: 'POST',
        url: '/internal/actors',
        headers: PEER,
        payload: payload as object,
      });
      expect(response.statusCode, field).toBe(400);
      expect(response.json(), field).toMatchObject({ error: { code: 'validation_failed', details: { field } } });
      expect(response.json<{ error: { message: string } }>().error.message).toContain(field);
    }
    const notJson = await b.app.inject({
      method: 'POST',
      url: '/internal/actors',
      headers: { ...PEER, 'content-type': 'application/json' },
      payload: '{"from": "node-a", "envelopes": [',
    });
    expect(notJson.statusCode).toBe(400);
    expect(notJson.json()).toMatchObject({ error: { code: 'malformed_json' } });
    expect(b.accepted).toEqual([]);
  });

  it('fails a batch the receiver refuses with another status, naming it', async () => {
    newCluster();
    const a = await cluster.node('node-a');
    await cluster.node('node-b', { bodyLimitBytes: 2_048 });
    const big = { type: 'mirror', data: 'x'.repeat(10_000) };
    const error = await caught(
      a.transport.deliver('node-b', {
        kind: 'echo',
        key: 'b-1',
        message: big,
        deadlineMs: Date.now() + 3_000,
        ask: true,
      }),
    );
    expect(error).toMatchObject({ code: 'internal' });
    expect(error.message).toMatch(/answered 413 payload_too_large/);
    expect(a.transport.stats().retries).toBe(0);
  });

  it('hands envelopes to mailboxes in the order sent, across batches that arrive out of order', async () => {
    newCluster();
    const b = await cluster.node('node-b');
    const waiting = deferred();
    b.beforeHandler = (body) => {
      if ((body as { order?: { seq: number } }).order?.seq === 1) waiting.resolve();
    };
    const post = (seq: number, texts: string[]) =>
      b.app.inject({
        method: 'POST',
        url: '/internal/actors',
        headers: PEER,
        payload: {
          from: 'node-x',
          order: { stream: 'stream-1', seq, since: 0 },
          envelopes: texts.map((text) => ({
            kind: 'echo',
            key: 'b-1',
            message: { type: 'note', text },
            deadline: Date.now() + 5_000,
            ask: false,
          })),
        },
      });
    const second = post(1, ['2', '3']);
    await waiting.promise;
    expect(b.accepted).toEqual([]); // batch 1 waits for batch 0
    const first = post(0, ['0', '1']);
    const answers = await Promise.all([first, second]);
    expect(answers.map((r) => r.statusCode)).toEqual([200, 200]);
    expect(answers[1]?.json()).toEqual({ results: [{ ok: true }, { ok: true }] });
    expect(b.accepted.map((e) => (e.message as { text: string }).text)).toEqual(['0', '1', '2', '3']);
  });

  it('accepts a batch whose predecessor never comes, after a bounded wait', async () => {
    newCluster();
    const b = await cluster.node('node-b');
    const response = await b.app.inject({
      method: 'POST',
      url: '/internal/actors',
      headers: PEER,
      payload: {
        from: 'node-x',
        order: { stream: 'stream-2', seq: 1, since: 0 },
        envelopes: [
          {
            kind: 'echo',
            key: 'b-1',
            message: { type: 'note', text: 'orphan' },
            deadline: Date.now() + 5_000,
            ask: false,
          },
        ],
      },
    });
    expect(response.statusCode).toBe(200);
    await b.noteArrived('orphan');
  });
});

describe('HttpTransport retries against the ring’s new owner', () => {
  it('delivers to the new owner when the old owner’s server is gone', async () => {
    newCluster();
    const a = await cluster.node('node-a');
    const b = await cluster.node('node-b');
    await cluster.node('node-c');
    await cluster.stop(b); // membership still lists node-b: the connection is refused
    cluster.route = () => 'node-c';
    expect(await a.transport.deliver('node-b', askEcho('hi'))).toBe('node-c: hi');
    expect(a.transport.stats().retries).toBeGreaterThanOrEqual(1);
  });

  it('retries a tell whose owner membership no longer knows, once the ring names another node', async () => {
    newCluster();
    const a = await cluster.node('node-a');
    const c = await cluster.node('node-c');
    let lookups = 0;
    cluster.route = () => (lookups++ === 0 ? 'node-b' : 'node-c'); // the ring catches up after the send
    a.system.ref(ECHO, 'b-1').tell({ type: 'note', text: 'moved' });
    await c.noteArrived('moved');
    expect(c.notes).toEqual(['moved']);
  });

  it('delivers locally when the ring now names this node', async () => {
    newCluster();
    const a = await cluster.node('node-a');
    const b = await cluster.node('node-b');
    await cluster.stop(b);
    cluster.route = () => 'node-a';
    expect(await a.transport.deliver('node-b', askEcho('hi'))).toBe('node-a: hi');
    expect(a.system.list().map((actor) => actor.key)).toEqual(['b-1']);
  });

  it('retries a node that answers 503 (closing) against the new owner', async () => {
    newCluster();
    const a = await cluster.node('node-a');
    const b = await cluster.node('node-b');
    await cluster.node('node-c');
    b.closing = true;
    cluster.route = () => 'node-c';
    expect(await a.transport.deliver('node-b', askEcho('hi'))).toBe('node-c: hi');
    expect(b.requests).toBe(1);
    expect(b.accepted).toEqual([]);
  });

  it('retries envelopes a shutting-down actor system refuses with not_ready', async () => {
    newCluster();
    const a = await cluster.node('node-a');
    const b = await cluster.node('node-b');
    const c = await cluster.node('node-c');
    await b.system.shutdown();
    cluster.route = () => 'node-c';
    const tell = a.transport.deliver('node-b', {
      kind: 'echo',
      key: 'b-1',
      message: { type: 'note', text: 'n' },
      deadlineMs: Date.now() + 3_000,
      ask: false,
    });
    const ask = a.transport.deliver('node-b', askEcho('hi'));
    expect(await ask).toBe('node-c: hi');
    expect(await tell).toBeUndefined();
    expect(b.accepted).toHaveLength(2);
    expect(c.notes).toEqual(['n']);
  });

  it('sends the envelopes waiting out a backoff on at once when the ring changes', async () => {
    newCluster();
    // Backoffs run on a clock that never moves: only the ring change can send the ask on.
    const clock = new FakeClock(Date.now());
    const a = await cluster.node('node-a', { transportClock: clock });
    const b = await cluster.node('node-b');
    await cluster.node('node-c');
    await cluster.stop(b);
    const reply = a.transport.deliver('node-b', { ...askEcho('hi'), deadlineMs: Date.now() + 60_000 });
    const backingOff = (a.transport as unknown as { backingOff: Set<unknown> }).backingOff;
    await eventually(() => (backingOff.size > 0 ? true : undefined), 10_000, 'the ask to be refused and back off', 5);
    cluster.route = () => 'node-c';
    a.transport.ringChanged();
    expect(await reply).toBe('node-c: hi');
    expect(a.transport.stats().retries).toBe(1);
  });

  it('rejects with ask_timeout at the deadline, not before, when no node is reachable', async () => {
    newCluster();
    const a = await cluster.node('node-a');
    const b = await cluster.node('node-b');
    await cluster.stop(b);
    cluster.route = () => 'node-b';
    const envelope = askEcho('hi', 'b-1', 300);
    const error = await caught(a.transport.deliver('node-b', envelope));
    expect(Date.now()).toBeGreaterThanOrEqual(envelope.deadlineMs);
    expect(error).toMatchObject({ code: 'ask_timeout' });
    expect(error.message).toMatch(
      /^echo\/b-1: no node accepted the message before its deadline \(last error: POST \/internal\/actors to node node-b at http:\/\/127\.0\.0\.1:\d+ failed: /,
    );
    expect(a.transport.stats().retries).toBeGreaterThanOrEqual(1);
    expect(a.transport.stats().failed).toBe(1);

    cluster.addresses.delete('node-b');
    const tell: TransportEnvelope = {
      kind: 'echo',
      key: 'b-1',
      message: { type: 'note', text: 'n' },
      deadlineMs: Date.now() + 200,
      ask: false,
    };
    const unknown = await caught(a.transport.deliver('node-b', tell));
    expect(Date.now()).toBeGreaterThanOrEqual(tell.deadlineMs);
    expect(unknown.message).toMatch(/last error: node node-b has no known address/);
  });

  it('rejects queued and backing-off envelopes with not_ready on close', async () => {
    newCluster();
    const a = await cluster.node('node-a');
    const looked = deferred();
    cluster.onAddressOf = (nodeId) => {
      if (nodeId === 'node-b') looked.resolve();
    };
    const backingOff = a.transport.deliver('node-b', askEcho('first'));
    await looked.promise; // node-b is unknown: the envelope now backs off
    const queued = a.transport.deliver('node-b', askEcho('second'));
    await a.transport.close();
    expect(await caught(backingOff)).toMatchObject({ code: 'not_ready' });
    expect(await caught(queued)).toMatchObject({ code: 'not_ready' });
    expect(await caught(a.transport.deliver('node-b', askEcho('third')))).toMatchObject({ code: 'not_ready' });
  });
});

describe('peer helpers', () => {
  it('notifies a refresh and inspects a remote actor', async () => {
    newCluster();
    const a = await cluster.node('node-a');
    const b = await cluster.node('node-b', { secret: 'shared', transportSecret: 'shared' });
    expect(await notifyRefresh(b.address, 'shared')).toBe(true);
    expect(b.refreshes).toBe(1);
    expect(await notifyRefresh(b.address, 'wrong')).toBe(false);

    const key = 'b-x/ü 1';
    await b.transport.deliver('node-b', askEcho('wake', key)); // deliverLocal on node-b
    expect(await inspectRemote(b.address, 'shared', 'echo', key)).toMatchObject({
      kind: 'echo',
      key,
      node: 'node-b',
      state: null,
    });
    expect(await inspectRemote(b.address, 'shared', 'echo', 'b-absent')).toBeNull();
    const refused = await caught(inspectRemote(b.address, 'wrong', 'echo', key));
    expect(refused).toMatchObject({ code: 'internal' });
    expect(refused.message).toMatch(/cluster secrets of the two nodes differ/);

    await cluster.stop(b);
    expect(await notifyRefresh(b.address, 'shared')).toBe(false);
    expect(await caught(inspectRemote(b.address, 'shared', 'echo', key))).toMatchObject({ code: 'not_ready' });
    expect(a.refreshes).toBe(0);
  });
});
