import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS, api, startTestNode, type BackendName, type TestCluster } from '../support/nodes.js';
import { eventually } from '../support/waits.js';

/**
 * The built-in executors inside a node: `wheelhouse.noop` (the README's quick start) and
 * `wheelhouse.http` against a real HTTP server on loopback (which the node's allow-list opens:
 * by default it calls public addresses only, see http-executor-limits.test.ts) — 2xx succeeds,
 * 5xx is retried then fails, other 4xx and bad payloads fail at once.
 */
describe('the built-in executors', () => {
  let c: TestCluster;
  let server: Server;
  let target: string;
  const received: { method: string; path: string; body: string; contentType: string | undefined }[] = [];
  const headersOf = new Map<string, Record<string, string | string[] | undefined>>();

  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      req.on('end', () => {
        received.push({
          method: req.method ?? '',
          path: req.url ?? '',
          body,
          contentType: req.headers['content-type'],
        });
        headersOf.set(req.url ?? '', req.headers);
        const status = Number(/status=(\d+)/.exec(req.url ?? '')?.[1] ?? 200);
        res.writeHead(status, { 'content-type': 'text/plain' }).end(`answer ${status}`);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    target = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    c = await startTestNode('postgres', {
      builtinExecutors: true,
      httpExecutorAllow: ['127.0.0.1'],
      retryBaseSeconds: 0.05,
      retryMaxSeconds: 0.1,
    });
  });
  afterAll(async () => {
    await c?.cleanup();
    await new Promise((resolve) => server?.close(resolve));
  });

  const submit = async (payload: unknown, extra: Record<string, unknown> = {}): Promise<string> =>
    (await api<{ task_id: string }>(c.url, 'POST', '/api/tasks', { task_type: 'wheelhouse.http', payload, ...extra }))
      .body.task_id;
  const settled = (id: string) =>
    eventually(async () => {
      const t = await api<{ status: string; attempts: number; last_error: string | null }>(
        c.url,
        'GET',
        `/api/tasks/${id}`,
      );
      return ['succeeded', 'failed'].includes(t.body.status) ? t.body : undefined;
    }, 15_000);

  it('runs wheelhouse.noop tasks with no worker, reporting a batch at once', async () => {
    const r = await api<{ tasks: { task_id: string }[] }>(c.url, 'POST', '/api/tasks/batch', {
      tasks: Array.from({ length: 5 }, (_, i) => ({ task_type: 'wheelhouse.noop', payload: { i } })),
    });
    for (const t of r.body.tasks) expect(await settled(t.task_id)).toMatchObject({ status: 'succeeded', attempts: 1 });
    const history = await api<{ executions: { status: string; worker_id: string }[] }>(
      c.url,
      'GET',
      `/api/tasks/${r.body.tasks[0]!.task_id}/history`,
    );
    expect(history.body.executions).toEqual([
      expect.objectContaining({ status: 'succeeded', worker_id: `${c.node.options.nodeId}/wheelhouse.noop` }),
    ]);
  });

  it('calls the URL with the JSON body and succeeds on 2xx', async () => {
    const id = await submit({ url: `${target}/hook?status=204`, body: { order: 42 } });
    expect(await settled(id)).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(received).toContainEqual({
      method: 'POST',
      path: '/hook?status=204',
      body: '{"order":42}',
      contentType: 'application/json',
    });
  });

  it("sends a payload's own headers, but not host nor those of the connection", async () => {
    const id = await submit({
      url: `${target}/headers`,
      headers: {
        'X-Custom': 'kept',
        Host: 'internal.example',
        Connection: 'close, x-dropped-too',
        'x-dropped-too': 'named by connection',
        'Transfer-Encoding': 'chunked',
        TE: 'trailers',
        'Keep-Alive': 'timeout=5',
        Upgrade: 'h2c',
        'Proxy-Authorization': 'Basic eDp5',
      },
      body: { n: 1 },
    });
    expect(await settled(id)).toMatchObject({ status: 'succeeded', attempts: 1 });
    const headers = headersOf.get('/headers') ?? {};
    expect(headers['x-custom']).toBe('kept');
    expect(headers.host).toBe(new URL(target).host);
    for (const name of ['x-dropped-too', 'te', 'upgrade', 'proxy-authorization', 'keep-alive']) {
      expect(headers[name], name).toBeUndefined();
    }
    expect(headers['transfer-encoding']).toBeUndefined();
    expect(headers['content-length']).toBe('7');
  });

  it('retries a 5xx and fails once retries are spent', async () => {
    const id = await submit({ url: `${target}/flaky?status=503`, method: 'PUT', body: 'raw' }, { max_retries: 1 });
    const task = await settled(id);
    expect(task).toMatchObject({ status: 'failed', attempts: 2 });
    expect(task.last_error).toContain('HTTP 503: answer 503');
  });

  it('fails a 4xx and a payload without a URL at once', async () => {
    const notFound = await submit({ url: `${target}/missing?status=404` }, { max_retries: 5 });
    const bad = await submit({ method: 'POST' }, { max_retries: 5 });
    expect(await settled(notFound)).toMatchObject({ status: 'failed', attempts: 1 });
    const badTask = await settled(bad);
    expect(badTask).toMatchObject({ status: 'failed', attempts: 1 });
    expect(badTask.last_error).toContain('payload: url must be a string');
  });
});

/**
 * A built-in executor reports each task's result as soon as that task has finished: a slow
 * call does not hold back the results of the fast ones it was polled with (which would keep
 * them running past their leases, and have them run again).
 */
describe.each(BACKENDS)('a built-in executor with a slow task among fast ones, on %s', (backend: BackendName) => {
  let c: TestCluster;
  let server: Server;
  let target: string;
  const releaseSlow: (() => void)[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      const answer = (): void => void res.writeHead(200).end('ok');
      if (req.url?.startsWith('/slow')) releaseSlow.push(answer);
      else answer();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    target = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // One partition: tasks due at one instant are pushed, and polled, together.
    c = await startTestNode(backend, { builtinExecutors: true, httpExecutorAllow: ['127.0.0.1'], partitions: 1 });
  });
  afterAll(async () => {
    for (const answer of releaseSlow) answer();
    await c?.cleanup();
    await new Promise((resolve) => server?.close(resolve));
  });

  it('records the fast results while the slow call is still running', async () => {
    const due = new Date(Date.now() + 1_000).toISOString();
    const task = (path: string) => ({
      task_type: 'wheelhouse.http',
      timeout_seconds: 30,
      payload: { url: `${target}${path}` },
      schedule: { type: 'delayed', due_time: due },
    });
    const r = await api<{ tasks: { task_id: string }[] }>(c.url, 'POST', '/api/tasks/batch', {
      tasks: [task('/slow'), task('/fast/1'), task('/fast/2')],
    });
    const [slow, ...fast] = r.body.tasks.map((t) => t.task_id);
    const status = async (id: string) =>
      (await api<{ status: string; attempts: number }>(c.url, 'GET', `/api/tasks/${id}`)).body;
    await eventually(async () => (releaseSlow.length > 0 ? true : undefined), 15_000, 'the slow call to arrive');
    for (const id of fast) {
      expect(
        await eventually(
          async () => ((await status(id)).status === 'succeeded' ? status(id) : undefined),
          10_000,
          'a fast result',
        ),
      ).toMatchObject({ attempts: 1 });
    }
    expect((await status(slow!)).status).toBe('running');
    releaseSlow.shift()!();
    expect(
      await eventually(
        async () => ((await status(slow!)).status === 'succeeded' ? status(slow!) : undefined),
        10_000,
        'the slow result',
      ),
    ).toMatchObject({ attempts: 1 });
  });
});
