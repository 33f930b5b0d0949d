import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { createWorker } from '../../src/worker/index.js';
import { eventually } from '../support/waits.js';

/**
 * The SDK's credit accounting over random interleavings: a fake node that pushes as many
 * tasks as the credit it has seen allows (in random slices, at random moments), acknowledges
 * results at once or a little later, against handlers of random lengths. Whatever the
 * interleaving, the credit the node holds plus the tasks it has not had a result for never
 * exceed the worker's concurrency (so an honest node can never overfill it), no more
 * handlers run at once than that, and every task's result arrives.
 */

interface Run {
  concurrency: number;
  durationsMs: number[];
  slices: number[];
  ackLater: boolean[];
}

async function exercise({ concurrency, durationsMs, slices, ackLater }: Run): Promise<void> {
  const total = durationsMs.length;
  const violations: string[] = [];
  let running = 0;
  let maxRunning = 0;

  const server = createServer((_req, res) => res.writeHead(404).end());
  const wss = new WebSocketServer({ server, path: '/api/workers/connect' });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  wss.on('connection', (ws) => {
    let credit = 0;
    let pushed = 0;
    let resulted = 0;
    let slice = 0;
    let frames = 0;
    const push = (): void => {
      const n = Math.min(credit, total - pushed, slices[slice++ % slices.length]!);
      if (n <= 0) return;
      const tasks = Array.from({ length: n }, (_, k) => {
        const i = pushed + k;
        return {
          task_id: `0190d4a0-0000-7000-8000-${String(i).padStart(12, '0')}`,
          task_type: 'fake.type',
          payload: { ms: durationsMs[i] },
          attempt: 1,
          lease_token: `tok-${i}`,
          lease_expires_at: new Date(Date.now() + 60_000).toISOString(),
        };
      });
      credit -= n;
      pushed += n;
      ws.send(JSON.stringify({ type: 'tasks', tasks }));
      // Sometimes push the rest of the credit a moment later rather than at once.
      if (credit > 0) setImmediate(push);
    };
    ws.on('message', (data: Buffer) => {
      const frame = JSON.parse(data.toString()) as { type: string; credits?: number; n?: number; results?: unknown[] };
      if (frame.type === 'hello') {
        credit = frame.credits ?? 0;
        ws.send(JSON.stringify({ type: 'welcome', node_id: 'fake', heartbeat_ms: 5_000, resumed: [] }));
      } else if (frame.type === 'credit') {
        credit += frame.n ?? 0;
      } else if (frame.type === 'results') {
        const results = frame.results as { task_id: string }[];
        resulted += results.length;
        const ack = () =>
          ws.send(JSON.stringify({ type: 'acks', acks: results.map((r) => ({ task_id: r.task_id, ok: true })) }));
        if (ackLater[frames++ % ackLater.length]) setTimeout(ack, 2);
        else ack();
      }
      if (credit + (pushed - resulted) > concurrency)
        violations.push(`credit ${credit} + unresulted ${pushed - resulted} > ${concurrency} after ${frame.type}`);
      push();
    });
  });

  const worker = createWorker({
    url,
    concurrency,
    taskTypes: ['fake.type'],
    batchCompletions: { lingerMs: 1 },
    onError: (error) => violations.push(`onError: ${String(error)}`),
    handler: async ({ payload }) => {
      running++;
      maxRunning = Math.max(maxRunning, running);
      await new Promise((resolve) => setTimeout(resolve, (payload as { ms: number }).ms));
      running--;
    },
  });
  worker.start();
  try {
    await eventually(() => (worker.stats.reported === total ? true : undefined), 10_000, `${total} results`, 2);
    expect(violations).toEqual([]);
    expect(maxRunning).toBeLessThanOrEqual(concurrency);
    expect(worker.stats).toMatchObject({ started: total, succeeded: total, discarded: 0 });
  } finally {
    await worker.stop();
    for (const client of wss.clients) client.terminate();
    wss.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

describe('worker SDK credit accounting on the channel', () => {
  it('never lets credit outstanding plus tasks not yet resulted exceed concurrency', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          concurrency: fc.integer({ min: 1, max: 6 }),
          durationsMs: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 30 }),
          slices: fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 5 }),
          ackLater: fc.array(fc.boolean(), { minLength: 1, maxLength: 5 }),
        }),
        exercise,
      ),
      { numRuns: 25 },
    );
  });
});
