import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startTestNode, type TestCluster } from '../support/nodes.js';
import { eventually, sleep } from '../support/waits.js';

/**
 * What a `wheelhouse.http` task can make a node do, through a real node on Postgres: it cannot
 * reach the node's own network (a listener on 127.0.0.1 sees no connection, whether the URL
 * names the address, a name that resolves to it, or another spelling of it, nor after a
 * redirect from a listener the allow-list opens), and the task fails for good naming the rule;
 * what `httpExecutorAllow` names it can call; an answer is read up to a cap and its connection
 * closed past it; the call as a whole has a deadline; and a destination gets a bounded number
 * of connections at once.
 */

interface Listener {
  url: string;
  /** TCP connections accepted, ever. */
  connections: number;
  /** Requests received, by path. */
  paths: string[];
  close(): Promise<void>;
}

/** An HTTP listener on `host` that counts its connections and requests, answering with `handle`. */
async function listen(
  host: string,
  handle: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => void res.end('ok'),
): Promise<Listener> {
  const server: Server = createServer((req, res) => {
    listener.paths.push(req.url ?? '');
    handle(req, res);
  });
  server.on('connection', () => listener.connections++);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const listener: Listener = {
    url: `http://${host}:${(server.address() as AddressInfo).port}`,
    connections: 0,
    paths: [],
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  return listener;
}

/** A line of the node's log. */
interface LogLine {
  msg: string;
  taskId?: string;
}

interface TaskView {
  status: string;
  attempts: number;
  last_error: string | null;
}

function tasksOf(c: () => TestCluster) {
  const submit = async (payload: unknown, extra: Record<string, unknown> = {}): Promise<string> => {
    const r = await api<{ task_id: string }>(c().url, 'POST', '/api/tasks', {
      task_type: 'wheelhouse.http',
      payload,
      max_retries: 3,
      ...extra,
    });
    expect(r.status).toBe(201);
    return r.body.task_id;
  };
  const view = async (id: string): Promise<TaskView> => (await api<TaskView>(c().url, 'GET', `/api/tasks/${id}`)).body;
  const settled = (id: string): Promise<TaskView> =>
    eventually(
      async () => {
        const t = await view(id);
        return ['succeeded', 'failed'].includes(t.status) ? t : undefined;
      },
      20_000,
      `task ${id} to settle`,
    );
  return { submit, view, settled };
}

describe('a node calls public addresses only, unless the allow-list says otherwise', () => {
  let c: TestCluster;
  /** The node's own network: must see no connection. */
  let loopback: Listener;
  /** A listener the allow-list opens (127.0.0.2: the rest of 127.0.0.0/8 stays closed). */
  let allowed: Listener;
  const held: (() => void)[] = [];
  const logs: LogLine[] = [];
  let holding = 0;
  let mostHeld = 0;
  const { submit, view, settled } = tasksOf(() => c);

  beforeAll(async () => {
    loopback = await listen('127.0.0.1');
    allowed = await listen('127.0.0.2', (req, res) => {
      if (req.url === '/redirect') {
        res.writeHead(302, { location: `${loopback.url}/stolen` }).end();
      } else if (req.url?.startsWith('/hold')) {
        holding++;
        mostHeld = Math.max(mostHeld, holding);
        held.push(() => {
          holding--;
          res.end('done');
        });
      } else {
        res.end('ok');
      }
    });
    c = await startTestNode(
      'postgres',
      {
        builtinExecutors: true,
        httpExecutorAllow: ['127.0.0.2'],
        httpExecutorConnectionsPerDestination: 2,
        logLevel: 'warn',
        logFormat: 'json',
      },
      { logDestination: { write: (line: string) => void logs.push(JSON.parse(line) as LogLine) } },
    );
  });
  afterAll(async () => {
    for (const release of held.splice(0)) release();
    await c?.cleanup();
    await loopback?.close();
    await allowed?.close();
  });

  it('refuses 127.0.0.1 in the URL without connecting, and fails the task for good naming the rule', async () => {
    const task = await settled(await submit({ url: `${loopback.url}/hook`, body: { n: 1 } }));
    expect(task).toMatchObject({
      status: 'failed',
      attempts: 1,
      last_error: 'refused: 127.0.0.1 is a loopback address; allow it with httpExecutorAllow',
    });
    expect(loopback.connections).toBe(0);
  });

  it('refuses a name that resolves to loopback (localhost), after resolving it, telling the log what to', async () => {
    const port = new URL(loopback.url).port;
    const id = await submit({ url: `http://localhost:${port}/hook` });
    const task = await settled(id);
    expect(task).toMatchObject({ status: 'failed', attempts: 1 });
    // The submitter learns that the name is refused, not what the node's DNS answered.
    expect(task.last_error).toBe(
      'refused: localhost resolves to a non-public address; allow it with httpExecutorAllow',
    );
    const logged = logs.find((l) => l.taskId === id);
    expect(logged?.msg).toMatch(
      /^wheelhouse\.http refused: localhost resolves to (127\.0\.0\.1|::1), which is a loopback address/,
    );
    expect(loopback.connections).toBe(0);
  });

  it('refuses the other spellings of loopback, and the metadata and private addresses', async () => {
    const port = new URL(loopback.url).port;
    const cases: [string, RegExp][] = [
      [
        `http://[::ffff:127.0.0.1]:${port}/`,
        /^refused: ::ffff:7f00:1 is a loopback address \(IPv4-mapped 127\.0\.0\.1\)/,
      ],
      // 0.0.0.0 reaches this machine's own services on Linux.
      [`http://0.0.0.0:${port}/`, /^refused: 0\.0\.0\.0 is an unspecified \("this network"\) address/],
      [`http://2130706433:${port}/`, /^refused: 127\.0\.0\.1 is a loopback address/],
      [`http://0x7f.1:${port}/`, /^refused: 127\.0\.0\.1 is a loopback address/],
      ['http://169.254.169.254/latest/meta-data/', /^refused: 169\.254\.169\.254 is the cloud metadata address/],
      ['http://10.0.0.1/', /^refused: 10\.0\.0\.1 is a private address/],
      ['http://[fd00:ec2::254]/', /^refused: fd00:ec2::254 is the cloud metadata address/],
    ];
    const ids = await Promise.all(cases.map(([url]) => submit({ url, method: 'GET' })));
    for (const [i, id] of ids.entries()) {
      const task = await settled(id);
      expect(task, cases[i]![0]).toMatchObject({ status: 'failed', attempts: 1 });
      expect(task.last_error, cases[i]![0]).toMatch(cases[i]![1]);
    }
    expect(loopback.connections).toBe(0);
  });

  it('does not follow a redirect from a listener it may call to one it may not', async () => {
    const task = await settled(await submit({ url: `${allowed.url}/redirect` }));
    expect(task).toMatchObject({ status: 'failed', attempts: 1 });
    expect(task.last_error).toBe(
      `HTTP 302: a redirect to ${loopback.url}/stolen, not followed (the executor follows none)`,
    );
    expect(allowed.paths).toContain('/redirect');
    expect(loopback.connections).toBe(0);
  });

  it('fails a call that gets no connection with what happened, not the address it tried', async () => {
    // Port 1 of an allowed address: nothing listens there.
    const task = await settled(await submit({ url: 'http://127.0.0.2:1/hook' }, { max_retries: 0 }));
    expect(task).toMatchObject({ status: 'failed', attempts: 1 });
    expect(task.last_error).toBe('request failed: the connection was refused (ECONNREFUSED)');
  });

  it('calls what the allow-list names', async () => {
    expect(await settled(await submit({ url: `${allowed.url}/ok` }))).toMatchObject({
      status: 'succeeded',
      attempts: 1,
    });
  });

  it('holds at most httpExecutorConnectionsPerDestination connections to one destination', async () => {
    const ids = await Promise.all([1, 2, 3, 4, 5].map((i) => submit({ url: `${allowed.url}/hold/${i}` })));
    await eventually(
      async () => ((await Promise.all(ids.map(view))).every((t) => t.status === 'running') ? true : undefined),
      10_000,
      'all five tasks to be running',
    );
    await eventually(() => (holding === 2 ? true : undefined), 10_000, 'two calls to arrive');
    // What is tested is that nothing more arrives while two are held: only time can show it.
    await sleep(500);
    expect(holding).toBe(2);
    for (let released = 0; released < 5; released++) {
      await eventually(() => (held.length > 0 ? true : undefined), 10_000, 'a held call');
      held.shift()!();
    }
    for (const id of ids) expect(await settled(id)).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(mostHeld).toBe(2);
  });
});

describe('a call is bounded in bytes read and in time', () => {
  let c: TestCluster;
  let target: Listener;
  /** For each path, whether the server saw its connection close before it had finished answering. */
  const closedEarly = new Map<string, boolean>();
  const { submit, settled } = tasksOf(() => c);

  /** Writes `x` in 16 KiB chunks without end (up to 256 MiB), at the pace the reader takes them. */
  const endless = (res: ServerResponse, status: number): void => {
    res.writeHead(status, { 'content-type': 'text/plain' });
    const chunk = Buffer.alloc(16 * 1024, 'x');
    let written = 0;
    const write = (): void => {
      while (!res.destroyed && written < 256 * 1024 * 1024) {
        written += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', write);
      }
      if (!res.destroyed) res.end();
    };
    write();
  };

  beforeAll(async () => {
    target = await listen('127.0.0.1', (req, res) => {
      const path = req.url ?? '';
      res.on('close', () => closedEarly.set(path, !res.writableFinished));
      if (path === '/endless-error') endless(res, 503);
      else if (path === '/endless-ok') endless(res, 200);
      else if (path.startsWith('/trickle/')) {
        // Headers, then a byte every 50 ms: each read is quick, the whole is never done.
        res.writeHead(Number(path.slice('/trickle/'.length)), { 'content-type': 'text/plain' });
        const timer = setInterval(() => res.write('x'), 50);
        res.on('close', () => clearInterval(timer));
      } else if (path === '/silent') {
        // No answer at all.
      } else res.end('ok');
    });
    c = await startTestNode('postgres', {
      builtinExecutors: true,
      httpExecutorAllow: '127.0.0.1',
      httpExecutorMaxResponseBytes: 4096,
      httpExecutorTimeoutSeconds: 2,
    });
  });
  afterAll(async () => {
    await c?.cleanup();
    await target?.close();
  });

  it('calls a loopback listener the allow-list names', async () => {
    expect(await settled(await submit({ url: `${target.url}/ok` }))).toMatchObject({
      status: 'succeeded',
      attempts: 1,
    });
    expect(target.connections).toBeGreaterThan(0);
  });

  it('stops reading an error answer at the cap, closes the connection and reports its first bytes', async () => {
    const task = await settled(await submit({ url: `${target.url}/endless-error` }, { max_retries: 0 }));
    expect(task).toMatchObject({ status: 'failed', attempts: 1 });
    expect(task.last_error).toBe(`HTTP 503: ${'x'.repeat(200)} … (cut at 4096 bytes)`);
    expect(await eventually(() => closedEarly.get('/endless-error'), 10_000, 'the connection to close')).toBe(true);
  });

  it('succeeds on a 2xx whose body goes on past the cap, closing the connection there', async () => {
    const task = await settled(await submit({ url: `${target.url}/endless-ok` }, { max_retries: 0 }));
    expect(task).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(await eventually(() => closedEarly.get('/endless-ok'), 10_000, 'the connection to close')).toBe(true);
  });

  it('ends a call at httpExecutorTimeoutSeconds in all, however steadily the body comes', async () => {
    const startedMs = Date.now();
    // The payload asks for a minute and the lease allows two: the option bounds both.
    const call = async (path: string) =>
      settled(
        await submit({ url: `${target.url}${path}`, timeout_ms: 60_000 }, { max_retries: 0, timeout_seconds: 120 }),
      );
    const [silent, trickleError, trickleOk] = await Promise.all([
      call('/silent'),
      call('/trickle/503'),
      call('/trickle/200'),
    ]);
    expect(silent).toMatchObject({ status: 'failed', attempts: 1, last_error: 'timed out after 2000 ms' });
    expect(trickleError).toMatchObject({ status: 'failed', attempts: 1 });
    expect(trickleError.last_error).toMatch(/^HTTP 503: x+ … \(cut at the deadline, 2000 ms\)$/);
    // The status decided: a 2xx whose body never ends has succeeded all the same, at the deadline.
    expect(trickleOk).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(Date.now() - startedMs).toBeLessThan(15_000);
    for (const path of ['/silent', '/trickle/503', '/trickle/200'])
      expect(await eventually(() => closedEarly.get(path), 10_000, `${path}: the connection to close`)).toBe(true);
  });
});
