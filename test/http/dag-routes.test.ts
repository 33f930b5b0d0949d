/**
 * UNIT tests of the graph routes' HTTP mapping (`POST /api/dags`, `GET /api/dags/{id}`),
 * against the fake SchedulerApi: validation errors name the field, nothing reaches the
 * scheduler on a 400, and the answers have API.md's shape. The graph semantics (cycles,
 * unknown ids, propagation) are tested end to end in test/e2e/dag.test.ts.
 */
import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { DagSpec } from '../../src/domain/specs.js';
import { MAX_DAG_TASKS } from '../../src/http/validation/tasks.js';
import { FakeApi, KNOWN_ID, record, serverWith } from './fake-api.js';

let app: FastifyInstance;
let api: FakeApi;

beforeEach(() => {
  ({ app, api } = serverWith());
});
afterEach(async () => {
  await app.close();
});

const post = (payload: unknown) => app.inject({ method: 'POST', url: '/api/dags', payload: payload as object });

function expectField(res: { statusCode: number; json(): unknown }, code: string, field: string): void {
  expect(res.statusCode).toBe(400);
  const { error } = res.json() as { error: { code: string; message: string; details: { field?: string } } };
  expect(error.code).toBe(code);
  expect(error.details.field).toBe(field);
  expect(error.message.startsWith(`${field}: `)).toBe(true);
}

describe('POST /api/dags', () => {
  it('passes refs, depends_on and each task to the scheduler and answers 201 with the tasks in order', async () => {
    const res = await post({
      tasks: [
        { ref: 'extract', task_type: 'etl.extract', payload: { day: 1 } },
        {
          ref: 'load',
          task_type: 'etl.load',
          depends_on: ['extract', KNOWN_ID],
          schedule: { type: 'delayed', delay_seconds: 30 },
        },
      ],
      idempotency_key: 'nightly',
    });
    expect(res.statusCode).toBe(201);
    const body = res.json<{
      dag_id: string;
      tasks: { ref: string; task_id: string; status: string; due_time: string }[];
    }>();
    expect(Object.keys(body).sort()).toEqual(['dag_id', 'tasks']);
    expect(body.tasks.map((t) => [t.ref, t.status])).toEqual([
      ['extract', 'pending'],
      ['load', 'blocked'],
    ]);
    const [spec] = api.callsOf('submitDag')[0] as [DagSpec];
    expect(spec.idempotencyKey).toBe('nightly');
    expect(spec.requestHash).toMatch(/^[0-9a-f]{64}$/);
    expect(spec.tasks.map((t) => [t.ref, t.dependsOn, t.spec.taskType])).toEqual([
      ['extract', [], 'etl.extract'],
      ['load', ['extract', KNOWN_ID], 'etl.load'],
    ]);
    expect(spec.tasks[1]!.spec.schedule).toEqual({ type: 'delayed', dueMs: null, delaySeconds: 30 });
  });

  it('hashes the same graph the same way whatever the key order, and a different graph differently', async () => {
    await post({ idempotency_key: 'k', tasks: [{ ref: 'a', task_type: 't', payload: { x: 1, y: 2 } }] });
    await post({ tasks: [{ payload: { y: 2, x: 1 }, task_type: 't', ref: 'a' }], idempotency_key: 'k' });
    await post({ idempotency_key: 'k', tasks: [{ ref: 'a', task_type: 't', payload: { x: 1, y: 3 } }] });
    const [a, b, c] = api.callsOf('submitDag').map(([spec]) => (spec as DagSpec).requestHash);
    expect(a).toBe(b);
    expect(c).not.toBe(a);
  });

  it('answers 200 for an idempotent replay', async () => {
    api.override('submitDag', async () => ({
      created: false,
      dag: {
        dagId: KNOWN_ID,
        status: 'succeeded',
        counts: { succeeded: 1 },
        tasks: [{ ref: 'a', record: record({ status: 'succeeded' }), status: 'succeeded', dependsOn: [] }],
      },
    }));
    const res = await post({ tasks: [{ ref: 'a', task_type: 't' }], idempotency_key: 'k' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      dag_id: KNOWN_ID,
      tasks: [{ ref: 'a', task_id: KNOWN_ID, status: 'succeeded' }],
    });
  });

  it.each([
    [{}, 'tasks'],
    [{ tasks: [] }, 'tasks'],
    [{ tasks: {} }, 'tasks'],
    [{ tasks: [{ ref: 'a', task_type: 't' }], extra: 1 }, 'extra'],
    [{ tasks: [{ task_type: 't' }] }, 'tasks[0].ref'],
    [{ tasks: [{ ref: '', task_type: 't' }] }, 'tasks[0].ref'],
    [{ tasks: [{ ref: 'a', task_type: 't' }, { ref: 'b' }] }, 'tasks[1].task_type'],
    [{ tasks: [{ ref: 'a', task_type: 't', depends_on: 'b' }] }, 'tasks[0].depends_on'],
    [{ tasks: [{ ref: 'a', task_type: 't', depends_on: [7] }] }, 'tasks[0].depends_on[0]'],
    [{ tasks: [{ ref: 'a', task_type: 't', dependencies: [KNOWN_ID] }] }, 'tasks[0].dependencies'],
    [{ tasks: [{ ref: 'a', task_type: 't', idempotency_key: 'x' }] }, 'tasks[0].idempotency_key'],
    [
      { tasks: [{ ref: 'a', task_type: 't', schedule: { type: 'cron', cron_expression: '* * * * *' } }] },
      'tasks[0].schedule.type',
    ],
    [{ tasks: [{ ref: 'a', task_type: 't', priority: 12 }] }, 'tasks[0].priority'],
    [{ tasks: [{ ref: 'a', task_type: 't' }], idempotency_key: '' }, 'idempotency_key'],
  ])('400 validation_failed for %j, and nothing reaches the scheduler', async (body, field) => {
    expectField(await post(body), 'validation_failed', field);
    expect(api.callsOf('submitDag')).toHaveLength(0);
  });

  it(`refuses more than ${MAX_DAG_TASKS} tasks`, async () => {
    const tasks = Array.from({ length: MAX_DAG_TASKS + 1 }, (_, i) => ({ ref: `t${i}`, task_type: 't' }));
    expectField(await post({ tasks }), 'validation_failed', 'tasks');
  });

  it('accepts a graph of the largest size in one request (past the single-task body limit)', async () => {
    const tasks = Array.from({ length: MAX_DAG_TASKS }, (_, i) => ({
      ref: `t${i}`,
      task_type: 't',
      depends_on: i === 0 ? [] : [`t${i - 1}`],
    }));
    const res = await post({ tasks });
    expect(res.statusCode).toBe(201);
  });
});

describe('GET /api/dags/{id}', () => {
  it('answers the graph with each task’s status and predecessors', async () => {
    api.override('getDag', async (dagId) => ({
      dagId,
      status: 'running',
      counts: { succeeded: 1, blocked: 1 },
      tasks: [
        { ref: 'a', record: record({ status: 'succeeded', dagId, dagRef: 'a' }), status: 'succeeded', dependsOn: [] },
        { ref: 'b', record: record({ status: 'blocked', dagId, dagRef: 'b' }), status: 'blocked', dependsOn: ['a'] },
      ],
    }));
    const res = await app.inject({ method: 'GET', url: `/api/dags/${KNOWN_ID}` });
    expect(res.statusCode).toBe(200);
    const body = res.json<{ dag_id: string; status: string; counts: object; tasks: Record<string, unknown>[] }>();
    expect(body).toMatchObject({ dag_id: KNOWN_ID, status: 'running', counts: { succeeded: 1, blocked: 1 } });
    expect(body.tasks.map((t) => [t.ref, t.status, t.depends_on])).toEqual([
      ['a', 'succeeded', []],
      ['b', 'blocked', ['a']],
    ]);
    expect(Object.keys(body.tasks[0]!).sort()).toEqual(
      [
        'attempts',
        'completed_at',
        'depends_on',
        'due_time',
        'last_error',
        'ref',
        'started_at',
        'status',
        'task_id',
        'task_type',
      ].sort(),
    );
  });

  it('404 for an unknown graph, 400 naming dag_id for a malformed id', async () => {
    const missing = await app.inject({ method: 'GET', url: `/api/dags/${KNOWN_ID}` });
    expect(missing.statusCode).toBe(404);
    const bad = await app.inject({ method: 'GET', url: '/api/dags/not-a-uuid' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json<{ error: { details: { field: string } } }>().error.details.field).toBe('dag_id');
  });
});
