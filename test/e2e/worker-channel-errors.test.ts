import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { WheelhouseError } from '../../src/lib/errors.js';
import type { WorkerChannel } from '../../src/services/worker-channel.js';
import { BACKENDS, api, startTestNode, type TestCluster } from '../support/nodes.js';
import { RawWorker } from '../support/raw-worker.js';
import { uniqueType } from '../support/tasks.js';

/**
 * What the worker channel tells a worker of the node's own failures (security review N11): what
 * an HTTP client is told of the same error — the store named, never its host or port.
 */
describe.each(BACKENDS)('server-side errors on the worker channel, on %s', (backend) => {
  let c: TestCluster;
  const open: RawWorker[] = [];
  beforeAll(async () => {
    c = await startTestNode(backend);
  });
  afterEach(() => {
    vi.restoreAllMocks();
    for (const w of open.splice(0)) w.terminate();
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  it('acks results the store could not take with the message an HTTP 503 carries, without the address', async () => {
    const type = uniqueType('n11-acks');
    await api(c.url, 'POST', '/api/tasks/batch', { tasks: [{ task_type: type }, { task_type: type }] });
    const { worker } = await RawWorker.hello(c.url, { worker_id: `w-${randomUUID()}`, task_types: [type], credits: 2 });
    open.push(worker);
    const [viaSocket, viaHttp] = await worker.received(2);
    const outage = () =>
      new WheelhouseError('store_unavailable', 'the database cannot be reached: connect ECONNREFUSED 10.0.0.5:5432');
    vi.spyOn(c.node.services.workers, 'complete').mockImplementation(() => Promise.reject(outage()));

    const [ack] = await worker.results([{ task_id: viaSocket!.task_id, lease_token: viaSocket!.lease_token }]);
    const http = await api<{ error: { code: string; message: string } }>(
      c.url,
      'POST',
      `/api/tasks/${viaHttp!.task_id}/complete`,
      { lease_token: viaHttp!.lease_token, status: 'succeeded' },
    );
    expect(http.status).toBe(503);
    expect(ack).toEqual({
      task_id: viaSocket!.task_id,
      ok: false,
      error: { code: 'store_unavailable', message: http.body.error.message },
    });
    expect(ack!.error!.message).toBe('The node cannot reach its database right now.');
    expect(JSON.stringify(worker.frames)).not.toMatch(/10\.0\.0\.5|5432|ECONNREFUSED/);
  });

  it('closes with an error frame that names the store, not where it is, when the node cannot open the session', async () => {
    vi.spyOn(c.node.channel as WorkerChannel, 'open').mockRejectedValue(
      new WheelhouseError('store_unavailable', 'Redis is unavailable (take): connect ECONNREFUSED 10.0.0.7:6379'),
    );
    const worker = await RawWorker.connect(c.url);
    open.push(worker);
    worker.send({ type: 'hello', worker_id: `w-${randomUUID()}`, task_types: [uniqueType('n11-error')], credits: 1 });
    const error = await worker.next('error');
    expect(error.error).toEqual({ code: 'store_unavailable', message: 'The node cannot reach its Redis right now.' });
    expect((await worker.closed).code).toBe(1013);
  });

  it('hides an unexpected error behind the catalogue sentence', async () => {
    vi.spyOn(c.node.channel as WorkerChannel, 'open').mockRejectedValue(
      new Error('TypeError in /srv/app/node_modules/secret-path.js: cannot read x of undefined'),
    );
    const worker = await RawWorker.connect(c.url);
    open.push(worker);
    worker.send({
      type: 'hello',
      worker_id: `w-${randomUUID()}`,
      task_types: [uniqueType('n11-internal')],
      credits: 1,
    });
    const error = await worker.next('error');
    expect(error.error).toEqual({ code: 'internal', message: 'An unexpected error happened.' });
    expect((await worker.closed).code).toBe(1011);
  });
});
