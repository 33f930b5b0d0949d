import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dagClient, ms, type DagClient, type DagNodeJson, type Polled } from '../support/dags.js';
import { BACKENDS, startTestNode, type BackendName, type TestCluster } from '../support/nodes.js';
import { eventually } from '../support/waits.js';
import { uniqueType } from '../support/tasks.js';

/**
 * A property of the dependency machinery, through a real node on each backend: for a random
 * graph (up to 200 tasks, each told to succeed or to fail for good), submitted in one
 * POST /api/dags in a random order and run by a worker over HTTP,
 * - every task ends in exactly the status the graph dictates: `succeeded` if told to and
 *   all its ancestors succeeded, `failed` if told to fail and all its predecessors
 *   succeeded, `cancelled` (naming a predecessor that failed or was cancelled) otherwise;
 * - every task that ran was handed out once, only after each of its predecessors had
 *   succeeded (as the worker saw it, and by the recorded times).
 */
interface GraphNode {
  /** Indices of earlier nodes. */
  preds: number[];
  fail: boolean;
}
interface Graph {
  nodes: GraphNode[];
  /** Seeds the order the tasks are listed in the request. */
  shuffle: number;
}

const MAX_NODES = 200;
const RUNS = Number(process.env.DAG_PROPERTY_RUNS ?? 10);

/** Each node depends on 0–4 earlier ones; about one in twelve is told to fail. */
const graphArb: fc.Arbitrary<Graph> = fc
  .array(
    fc.record({
      picks: fc.array(fc.nat(), { maxLength: 4 }),
      fail: fc.nat(11).map((n) => n === 0),
    }),
    { minLength: 1, maxLength: MAX_NODES, size: 'max' },
  )
  .chain((raw) =>
    fc.record({
      nodes: fc.constant(
        raw.map((r, i) => ({ preds: i === 0 ? [] : [...new Set(r.picks.map((p) => p % i))], fail: r.fail })),
      ),
      shuffle: fc.nat(),
    }),
  );

/** A small seeded PRNG (mulberry32): uniform integers in [0, n). */
function prng(seed: number): (n: number) => number {
  let a = seed >>> 0;
  return (n) => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 2 ** 32) * n);
  };
}

/** One fixed large case, run first on each backend: 200 tasks, 0–4 predecessors each, one in twenty-five told to fail. */
function largeExample(): Graph {
  const next = prng(20261130);
  const nodes: GraphNode[] = [];
  for (let i = 0; i < MAX_NODES; i++) {
    const preds = i === 0 ? [] : [...new Set(Array.from({ length: next(5) }, () => next(i)))];
    nodes.push({ preds, fail: next(25) === 0 });
  }
  return { nodes, shuffle: 7 };
}

/** A permutation of 0…n-1 from a seed. */
function permutation(n: number, seed: number): number[] {
  const next = prng(seed);
  const order = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = next(i + 1);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return order;
}

/** The status each node must end in. */
function expectedStatuses(nodes: readonly GraphNode[]): string[] {
  const out: string[] = [];
  nodes.forEach((n, i) => {
    if (n.preds.some((p) => out[p] !== 'succeeded')) out[i] = 'cancelled';
    else out[i] = n.fail ? 'failed' : 'succeeded';
  });
  return out;
}

describe.each(BACKENDS)('random DAGs on %s', (backend: BackendName) => {
  let c: TestCluster;
  let w: DagClient;
  beforeAll(async () => {
    c = await startTestNode(backend, { logLevel: process.env.TEST_LOG ?? 'silent' });
    w = dagClient(() => c.url);
  });
  afterAll(async () => {
    await c?.cleanup();
  });

  /** Submits the graph, runs it to the end, checks it. */
  async function check(graph: Graph): Promise<void> {
    const { nodes } = graph;
    const type = uniqueType('prop');
    const order = permutation(nodes.length, graph.shuffle);
    const submitted = await w.submitDag({
      tasks: order.map((i) => ({
        ref: `n${i}`,
        task_type: type,
        payload: { i },
        max_retries: 0,
        ...(nodes[i]!.preds.length > 0 ? { depends_on: nodes[i]!.preds.map((p) => `n${p}`) } : {}),
      })),
    });
    expect(submitted.status, JSON.stringify(submitted.body).slice(0, 300)).toBe(201);
    const idOf = new Map(submitted.body.tasks.map((t) => [Number(t.ref.slice(1)), t.task_id]));

    // The worker: a task handed out must not have been handed out before, and every one of
    // its predecessors must have been reported succeeded already.
    const succeeded = new Set<number>();
    const handedOut = new Set<number>();
    const deadline = Date.now() + 120_000;
    for (;;) {
      if (Date.now() > deadline)
        throw new Error(`the graph did not finish: ${handedOut.size} of ${nodes.length} handed out`);
      const tasks = await w.poll([type], 100, 200);
      if (tasks.length === 0) {
        if ((await w.dag(submitted.body.dag_id)).status !== 'running') break;
        continue;
      }
      const ok: Polled[] = [];
      const bad: Polled[] = [];
      for (const t of tasks) {
        const i = (t.payload as { i: number }).i;
        expect(handedOut.has(i), `n${i} handed out twice`).toBe(false);
        handedOut.add(i);
        expect(t.attempt).toBe(1);
        const early = nodes[i]!.preds.filter((p) => !succeeded.has(p));
        expect(
          early,
          `n${i} handed out before its predecessors ${early.map((p) => `n${p}`).join(', ')} succeeded`,
        ).toEqual([]);
        (nodes[i]!.fail ? bad : ok).push(t);
      }
      await w.complete(bad, 'failed', { error: 'told to fail', retryable: false });
      await w.complete(ok);
      for (const t of ok) succeeded.add((t.payload as { i: number }).i);
    }

    const expected = expectedStatuses(nodes);
    const dag = await w.dag(submitted.body.dag_id);
    const byIndex = new Map<number, DagNodeJson>(dag.tasks.map((t) => [Number(t.ref.slice(1)), t]));
    expect(dag.tasks).toHaveLength(nodes.length);
    const actual = nodes.map((_, i) => byIndex.get(i)!.status);
    expect(actual).toEqual(expected);
    expect(dag.status).toBe(expected.includes('failed') ? 'failed' : 'succeeded');
    expect([...handedOut].sort((a, b) => a - b)).toEqual(expected.flatMap((s, i) => (s === 'cancelled' ? [] : [i])));

    nodes.forEach((n, i) => {
      const t = byIndex.get(i)!;
      expect(t.depends_on.slice().sort()).toEqual(n.preds.map((p) => `n${p}`).sort());
      if (expected[i] === 'cancelled') {
        expect(t.attempts).toBe(0);
        expect(t.started_at).toBeNull();
        // Named: one of its predecessors, which did not succeed.
        const m = /^predecessor ([0-9a-f-]{36}) (failed|cancelled)$/.exec(t.last_error ?? '');
        expect(m, `n${i}: ${t.last_error}`).not.toBeNull();
        const named = n.preds.find((p) => idOf.get(p) === m![1]);
        expect(named, `n${i} names ${m![1]}, not a predecessor`).toBeDefined();
        expect(expected[named!]).toBe(m![2]);
      } else {
        expect(t.attempts).toBe(1);
        for (const p of n.preds) expect(ms(t.started_at)).toBeGreaterThanOrEqual(ms(byIndex.get(p)!.completed_at));
      }
    });
  }

  it(`ends every task of a random graph as the graph dictates (${RUNS} runs and a 200-task case)`, async () => {
    await check(largeExample());
    await fc.assert(
      fc.asyncProperty(graphArb, async (graph) => {
        await check(graph);
      }),
      { numRuns: RUNS, endOnFailure: true },
    );
    // Every dependent took its events in.
    await eventually(
      async () => {
        const [row] = await c.sql<{ n: number }>('SELECT count(*)::int AS n FROM dag_events');
        return row!.n === 0 ? true : undefined;
      },
      30_000,
      'the outbox to empty',
    );
  });
});
