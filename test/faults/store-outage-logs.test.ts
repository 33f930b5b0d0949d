import { afterEach, describe, expect, it } from 'vitest';
import type { DestinationStream } from 'pino';
import type { FaultProxy } from '../support/fault-proxy.js';
import { startFaultyNode, type FaultyNode } from '../support/faulty-node.js';
import { api } from '../support/nodes.js';
import { eventually } from '../support/waits.js';
import { uniqueType } from '../support/tasks.js';

/**
 * A store lost is logged once, with what it stops, and once when it is back — not a line per
 * failed statement, per reconnection attempt or per retry of a duty. One node on Postgres +
 * Redis behind fault proxies, on the real clock (its membership heartbeat, its loops and its
 * wheel keep using the stores every second or faster), logging JSON into the test: the
 * connections to one store are cut and refused for a while — long enough for many failed
 * attempts, a poll and a submit — then let through again.
 */

/** One parsed log line. */
interface Line {
  level: number;
  msg: string;
  store?: string;
  downMs?: number;
  [key: string]: unknown;
}

const WARN = 40;

/** A pino destination that keeps the lines, parsed. */
function capture(): { destination: DestinationStream; lines: Line[] } {
  const lines: Line[] = [];
  return { destination: { write: (line: string) => void lines.push(JSON.parse(line) as Line) }, lines };
}

describe('store outages in the log', () => {
  let c: FaultyNode | undefined;
  afterEach(async () => {
    await c?.cleanup();
    c = undefined;
  });

  async function start(): Promise<{ node: FaultyNode; lines: Line[] }> {
    const { destination, lines } = capture();
    c = await startFaultyNode(
      { logLevel: 'info', logFormat: 'json', partitions: 2, builtinExecutors: false },
      { logDestination: destination },
    );
    return { node: c, lines };
  }

  const about = (lines: Line[], store: string, what: 'lost' | 'restored'): Line[] =>
    lines.filter((l) => l.msg.startsWith(`${store} connection ${what}`));

  const waitForLine = (lines: Line[], store: string, what: 'lost' | 'restored'): Promise<Line> =>
    eventually(() => about(lines, store, what)[0], 15_000, `the "${store} connection ${what}" line`);

  /** Waits until the node has been refused by the store `n` more times: attempts that failed while it was down. */
  const refusedMore = async (proxy: FaultProxy, n: number): Promise<void> => {
    const before = proxy.stats().refused;
    await eventually(
      () => (proxy.stats().refused >= before + n ? true : undefined),
      20_000,
      `${n} refused connections`,
    );
  };

  /** Warnings and errors logged between two lines (by index), besides the store's own. */
  const noisy = (lines: Line[], from: Line, to: Line): Line[] =>
    lines.slice(lines.indexOf(from) + 1, lines.indexOf(to)).filter((l) => l.level >= WARN);

  it('logs a lost Redis once with what it stops, and once when it is back', async () => {
    const { node, lines } = await start();
    node.redis.dropAll();
    void node.redis.refuse();
    const lost = await waitForLine(lines, 'redis', 'lost');
    // What the line says: polls answer 503, a submission is still accepted.
    const poll = await api(node.url, 'POST', '/api/workers/poll', {
      worker_id: 'w-log',
      task_types: [uniqueType('outage')],
      wait_ms: 0,
    });
    expect(poll.status).toBe(503);
    const submit = await api(node.url, 'POST', '/api/tasks', { task_type: uniqueType('outage') });
    expect(submit.status).toBe(201);
    await refusedMore(node.redis, 5);
    node.redis.restore();
    const restored = await waitForLine(lines, 'redis', 'restored');

    expect(about(lines, 'redis', 'lost')).toHaveLength(1);
    expect(about(lines, 'redis', 'restored')).toHaveLength(1);
    expect(lost.level).toBeGreaterThanOrEqual(WARN);
    expect(lost.store).toBe('redis');
    expect(lost.msg).toContain('polls answer 503');
    expect(lost.msg).toContain('submissions are still accepted');
    expect(restored.msg).toMatch(/^redis connection restored after \d+\.\d s$/);
    expect(restored.downMs).toBeGreaterThan(0);
    // The failures the outage caused meanwhile (the poll's 503, the loops' retries, the
    // reconnection attempts) are no warnings of their own.
    expect(noisy(lines, lost, restored)).toEqual([]);
    expect(about(lines, 'postgres', 'lost')).toEqual([]);
  });

  it('logs a lost Postgres once with what it stops, and once when it is back', async () => {
    const { node, lines } = await start();
    node.pg.dropAll();
    void node.pg.refuse();
    const lost = await waitForLine(lines, 'postgres', 'lost');
    const submit = await api(node.url, 'POST', '/api/tasks', { task_type: uniqueType('outage') });
    expect(submit.status).toBe(503);
    // A membership heartbeat a second, the loops and their retries: many failed statements.
    await refusedMore(node.pg, 5);
    node.pg.restore();
    const restored = await waitForLine(lines, 'postgres', 'restored');

    expect(about(lines, 'postgres', 'lost')).toHaveLength(1);
    expect(about(lines, 'postgres', 'restored')).toHaveLength(1);
    expect(lost.level).toBeGreaterThanOrEqual(WARN);
    expect(lost.msg).toContain('submissions, claims, heartbeats, results and task reads answer 503');
    expect(restored.msg).toMatch(/^postgres connection restored after \d+\.\d s$/);
    expect(restored.failures).toBeGreaterThanOrEqual(5);
    expect(noisy(lines, lost, restored)).toEqual([]);
    expect(about(lines, 'redis', 'lost')).toEqual([]);
  });
});
