import { describe, expect, it } from 'vitest';
import { WheelhouseError } from '../../src/lib/errors.js';
import {
  canonicalJson,
  parseIsoTime,
  validateBatch,
  validateCompletion,
  validateCompletionBatch,
  validateHeartbeat,
  validateHistoryQuery,
  validateListQuery,
  validatePoll,
  validateTask,
  validateTaskId,
} from '../../src/http/validation/tasks.js';
import { truncateUtf8 } from '../../src/http/validation/fields.js';

const defaults = { timeoutSeconds: 60, maxPayloadBytes: 256 * 1024 };
const ID = '0192f3a4-5b6c-7d8e-9f00-112233445566';

/** The WheelhouseError `fn` throws. */
function caught(fn: () => unknown): WheelhouseError {
  try {
    fn();
  } catch (error) {
    if (error instanceof WheelhouseError) return error;
    throw error;
  }
  throw new Error('expected a WheelhouseError, nothing was thrown');
}

function task(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { task_type: 'email.send', ...extra };
}

describe('validateTask', () => {
  it('fills the defaults of a minimal task', () => {
    const spec = validateTask(task(), defaults);
    expect(spec).toMatchObject({
      taskType: 'email.send',
      payload: null,
      schedule: { type: 'immediate' },
      dependencies: [],
      idempotencyKey: null,
      priority: 5,
      maxRetries: 3,
      timeoutSeconds: 60,
    });
    // No idempotency key: no replay can happen, so no hash is computed.
    expect(spec.requestHash).toBe('');
    expect(validateTask(task({ idempotency_key: 'k' }), defaults).requestHash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('takes timeout_seconds from the defaults given', () => {
    expect(validateTask(task(), { timeoutSeconds: 17 }).timeoutSeconds).toBe(17);
    expect(validateTask(task({ timeout_seconds: 5 }), { timeoutSeconds: 17 }).timeoutSeconds).toBe(5);
  });

  it.each([
    [{}, 'task_type', 'is required'],
    [{ task_type: '' }, 'task_type', '1–128 characters'],
    [{ task_type: 'x'.repeat(129) }, 'task_type', '1–128 characters'],
    [{ task_type: 'has space' }, 'task_type', 'letters, digits'],
    [{ task_type: 42 }, 'task_type', 'must be a string'],
    [task({ priority: 10 }), 'priority', 'between 0 and 9'],
    [task({ priority: 1.5 }), 'priority', 'integer'],
    [task({ priority: '5' }), 'priority', 'integer'],
    [task({ max_retries: 101 }), 'max_retries', 'between 0 and 100'],
    [task({ max_retries: -1 }), 'max_retries', 'between 0 and 100'],
    [task({ timeout_seconds: 0 }), 'timeout_seconds', 'between 1 and 86400'],
    [task({ timeout_seconds: 86_401 }), 'timeout_seconds', 'between 1 and 86400'],
    [task({ idempotency_key: '' }), 'idempotency_key', '1–256'],
    [task({ idempotency_key: 'k'.repeat(257) }), 'idempotency_key', '1–256'],
    [task({ dependencies: 'abc' }), 'dependencies', 'array'],
    [task({ dependencies: [ID, 'nope'] }), 'dependencies[1]', 'UUID'],
    [task({ schedule: 'now' }), 'schedule', 'JSON object'],
    [task({ schedule: {} }), 'schedule.type', 'is required'],
    [task({ schedule: { type: 'soon' } }), 'schedule.type', 'one of immediate, delayed, cron'],
    [task({ schedule: { type: 'immediate', delay_seconds: 3 } }), 'schedule.delay_seconds', 'not a known field'],
    [task({ colour: 'red' }), 'colour', 'not a known field'],
  ])('rejects %j at %s', (body, field, text) => {
    const error = caught(() => validateTask(body, defaults));
    expect(error.code).toBe('validation_failed');
    expect(error.status).toBe(400);
    expect(error.details.field).toBe(field);
    expect(error.message).toContain(`${field}: `);
    expect(error.message).toContain(text);
  });

  it('names the unknown top-level field and the allowed ones', () => {
    const error = caught(() => validateTask(task({ prio: 1 }), defaults));
    expect(error.message).toMatch(
      /^prio: is not a known field \(allowed: task_type, payload, .*start_deadline_seconds(, \w+)*\)$/,
    );
  });

  it('rejects a body that is not an object', () => {
    for (const body of [null, [], 'x', 3, undefined]) {
      const error = caught(() => validateTask(body, defaults));
      expect(error.details.field).toBe('body');
    }
  });

  it('treats null optional fields as left out', () => {
    const spec = validateTask(
      task({
        priority: null,
        max_retries: null,
        timeout_seconds: null,
        idempotency_key: null,
        dependencies: null,
        schedule: null,
      }),
      defaults,
    );
    expect(spec).toMatchObject({
      priority: 5,
      maxRetries: 3,
      timeoutSeconds: 60,
      idempotencyKey: null,
      dependencies: [],
    });
    expect(spec.schedule).toEqual({ type: 'immediate' });
  });

  it('keeps any JSON payload, and holds it to the payload limit with 413', () => {
    for (const payload of [0, 'text', [1, 2], { a: { b: null } }, false]) {
      expect(validateTask(task({ payload }), defaults).payload).toEqual(payload);
    }
    const error = caught(() =>
      validateTask(task({ payload: 'é'.repeat(200) }), { timeoutSeconds: 60, maxPayloadBytes: 300 }),
    );
    expect(error.code).toBe('payload_too_large');
    expect(error.status).toBe(413);
    expect(error.details).toMatchObject({ field: 'payload', limit_bytes: 300 });
  });

  it('lower-cases and de-duplicates dependencies', () => {
    const spec = validateTask(task({ dependencies: [ID.toUpperCase(), ID] }), defaults);
    expect(spec.dependencies).toEqual([ID]);
  });

  describe('delayed', () => {
    it('accepts due_time, and a past due time (it means due now)', () => {
      const s = validateTask(task({ schedule: { type: 'delayed', due_time: '2001-01-01T00:00:00.000Z' } }), defaults);
      expect(s.schedule).toEqual({ type: 'delayed', dueMs: Date.UTC(2001, 0, 1), delaySeconds: null });
    });

    it('accepts delay_seconds, including 0 and fractions', () => {
      for (const delay of [0, 1.5, 3600]) {
        const s = validateTask(task({ schedule: { type: 'delayed', delay_seconds: delay } }), defaults);
        expect(s.schedule).toEqual({ type: 'delayed', dueMs: null, delaySeconds: delay });
      }
    });

    it.each([
      [{ type: 'delayed', due_time: '2030-01-01T00:00:00Z', delay_seconds: 5 }, 'schedule', 'not both'],
      [{ type: 'delayed' }, 'schedule', 'needs due_time or delay_seconds'],
      [{ type: 'delayed', delay_seconds: -1 }, 'schedule.delay_seconds', 'between 0'],
      [{ type: 'delayed', delay_seconds: '5' }, 'schedule.delay_seconds', 'must be a number'],
      [{ type: 'delayed', due_time: 'tomorrow' }, 'schedule.due_time', 'not an ISO-8601 time'],
      [{ type: 'delayed', due_time: '2026-02-30T00:00:00Z' }, 'schedule.due_time', 'not an ISO-8601 time'],
      [{ type: 'delayed', due_time: 1_700_000_000_000 }, 'schedule.due_time', 'ISO-8601 time string'],
    ])('rejects %j', (schedule, field, text) => {
      const error = caught(() => validateTask(task({ schedule }), defaults));
      expect(error.code).toBe('validation_failed');
      expect(error.details.field).toBe(field);
      expect(error.message).toContain(text);
    });
  });

  describe('cron', () => {
    const cron = (extra: Record<string, unknown>): Record<string, unknown> =>
      task({ schedule: { type: 'cron', cron_expression: '0 * * * *', ...extra } });

    it('fills the cron defaults', () => {
      expect(validateTask(cron({}), defaults).schedule).toEqual({
        type: 'cron',
        cronExpression: '0 * * * *',
        timezone: 'UTC',
        jitterSeconds: 0,
        misfirePolicy: 'fire_once',
        overlapPolicy: 'allow',
        endMs: null,
      });
    });

    it.each(['*/5 * * * *', '30 0 9 * * 1-5', '0 0 L * *', '0 9 * * 1#2', '0 0 * * 5L', '0 0 1 jan,jul *'])(
      'accepts %s',
      (expr) => {
        const s = validateTask(cron({ cron_expression: expr, timezone: 'Europe/Paris' }), defaults).schedule;
        expect(s).toMatchObject({ type: 'cron', cronExpression: expr, timezone: 'Europe/Paris' });
      },
    );

    it('normalises whitespace in the expression', () => {
      const s = validateTask(cron({ cron_expression: '  0   *\t* * *  ' }), defaults).schedule;
      expect(s).toMatchObject({ cronExpression: '0 * * * *' });
    });

    it.each(['* * * *', '* * * * * * *', '@daily', '60 * * * *', '*/0 * * * *', '0 0 31 2 *', 'a b c d e'])(
      'rejects %s as invalid_cron',
      (expr) => {
        const error = caught(() => validateTask(cron({ cron_expression: expr }), defaults));
        expect(error.code).toBe('invalid_cron');
        expect(error.status).toBe(400);
        expect(error.details.field).toBe('schedule.cron_expression');
        expect(error.message).toMatch(/^schedule\.cron_expression: /);
      },
    );

    it('requires cron_expression', () => {
      expect(caught(() => validateTask(task({ schedule: { type: 'cron' } }), defaults)).details.field).toBe(
        'schedule.cron_expression',
      );
    });

    it('rejects an unknown time zone with unknown_timezone', () => {
      const error = caught(() => validateTask(cron({ timezone: 'Mars/Olympus_Mons' }), defaults));
      expect(error.code).toBe('unknown_timezone');
      expect(error.status).toBe(400);
      expect(error.details.field).toBe('schedule.timezone');
    });

    it.each([
      [{ jitter_seconds: -1 }, 'schedule.jitter_seconds'],
      [{ misfire_policy: 'always' }, 'schedule.misfire_policy'],
      [{ overlap_policy: 'queue' }, 'schedule.overlap_policy'],
      [{ end_time: 'never' }, 'schedule.end_time'],
      [{ due_time: '2030-01-01T00:00:00Z' }, 'schedule.due_time'],
    ])('rejects %j', (extra, field) => {
      expect(caught(() => validateTask(cron(extra), defaults)).details.field).toBe(field);
    });

    it('reads the policies, jitter and end time', () => {
      const s = validateTask(
        cron({
          jitter_seconds: 30,
          misfire_policy: 'fire_all',
          overlap_policy: 'skip',
          end_time: '2027-01-01T00:00:00+01:00',
        }),
        defaults,
      ).schedule;
      expect(s).toMatchObject({
        jitterSeconds: 30,
        misfirePolicy: 'fire_all',
        overlapPolicy: 'skip',
        endMs: Date.UTC(2026, 11, 31, 23),
      });
    });

    it('refuses dependencies on a cron task, and allows an empty list', () => {
      const error = caught(() => validateTask({ ...cron({}), dependencies: [ID] }, defaults));
      expect(error.code).toBe('validation_failed');
      expect(error.details.field).toBe('dependencies');
      expect(error.message).toContain('cron task cannot have dependencies');
      expect(validateTask({ ...cron({}), dependencies: [] }, defaults).dependencies).toEqual([]);
    });
  });

  describe('requestHash', () => {
    const keyed = (o: Record<string, unknown> = {}): Record<string, unknown> => task({ idempotency_key: 'k', ...o });
    it('does not depend on key order, in the task or in its payload', () => {
      const a = validateTask(
        {
          task_type: 't',
          idempotency_key: 'k',
          payload: { x: 1, y: { b: 2, a: [1, { d: 1, c: 2 }] } },
          priority: 2,
          schedule: { type: 'delayed', delay_seconds: 5 },
        },
        defaults,
      );
      const b = validateTask(
        {
          schedule: { delay_seconds: 5, type: 'delayed' },
          priority: 2,
          payload: { y: { a: [1, { c: 2, d: 1 }], b: 2 }, x: 1 },
          task_type: 't',
          idempotency_key: 'k',
        },
        defaults,
      );
      expect(a.requestHash).toBe(b.requestHash);
    });

    it('treats a spelled-out default like a left-out one', () => {
      expect(validateTask(keyed({ priority: 5, max_retries: 3, payload: null }), defaults).requestHash).toBe(
        validateTask(keyed(), defaults).requestHash,
      );
    });

    it('changes when anything that matters changes', () => {
      const base = validateTask(keyed({ payload: { n: 1 } }), defaults).requestHash;
      expect(validateTask(keyed({ payload: { n: 2 } }), defaults).requestHash).not.toBe(base);
      expect(validateTask(keyed({ payload: { n: 1 }, priority: 4 }), defaults).requestHash).not.toBe(base);
      expect(
        validateTask(keyed({ payload: { n: 1 }, schedule: { type: 'delayed', delay_seconds: 1 } }), defaults)
          .requestHash,
      ).not.toBe(base);
      expect(validateTask(keyed({ payload: [1, 2] }), defaults).requestHash).not.toBe(
        validateTask(keyed({ payload: [2, 1] }), defaults).requestHash,
      );
    });
  });
});

describe('validateBatch', () => {
  it('validates every task', () => {
    const specs = validateBatch({ tasks: [task(), task({ priority: 1 })] }, defaults);
    expect(specs.map((s) => s.priority)).toEqual([5, 1]);
  });

  it('names the bad task by index and field', () => {
    const tasks = [task(), task(), task(), task({ schedule: { type: 'cron', cron_expression: 'nope' } })];
    const error = caught(() => validateBatch({ tasks }, defaults));
    expect(error.code).toBe('invalid_cron');
    expect(error.details).toMatchObject({ index: 3, field: 'tasks[3].schedule.cron_expression' });
    expect(error.message).toMatch(/^tasks\[3\]\.schedule\.cron_expression: /);
  });

  it.each([
    [{}, 'tasks', 'is required'],
    [{ tasks: {} }, 'tasks', 'array'],
    [{ tasks: [] }, 'tasks', 'at least one'],
    [{ tasks: Array.from({ length: 1001 }, () => ({ task_type: 't' })) }, 'tasks', 'the most is 1000'],
    [{ tasks: [task()], extra: 1 }, 'extra', 'not a known field'],
    [[task()], 'body', 'JSON object'],
  ])('rejects %#', (body, field, text) => {
    const error = caught(() => validateBatch(body, defaults));
    expect(error.details.field).toBe(field);
    expect(error.message).toContain(text);
  });

  it('accepts 1000 tasks', () => {
    expect(validateBatch({ tasks: Array.from({ length: 1000 }, () => task()) }, defaults)).toHaveLength(1000);
  });
});

describe('worker validators', () => {
  it('fills poll defaults and clamps wait_ms to the node maximum', () => {
    expect(validatePoll({ worker_id: 'w', task_types: ['a', 'a', 'b'] }, { pollMaxWaitMs: 30_000 })).toEqual({
      workerId: 'w',
      taskTypes: ['a', 'b'],
      maxTasks: 1,
      waitMs: 20_000,
    });
    expect(validatePoll({ worker_id: 'w', task_types: ['a'], wait_ms: 25_000 }, { pollMaxWaitMs: 5_000 }).waitMs).toBe(
      5_000,
    );
  });

  it.each([
    [{ task_types: ['a'] }, 'worker_id'],
    [{ worker_id: '', task_types: ['a'] }, 'worker_id'],
    [{ worker_id: 'w'.repeat(129), task_types: ['a'] }, 'worker_id'],
    [{ worker_id: 'w' }, 'task_types'],
    [{ worker_id: 'w', task_types: [] }, 'task_types'],
    [{ worker_id: 'w', task_types: ['ok', 'bad type'] }, 'task_types[1]'],
    [{ worker_id: 'w', task_types: ['a'], max_tasks: 0 }, 'max_tasks'],
    [{ worker_id: 'w', task_types: ['a'], max_tasks: 1001 }, 'max_tasks'],
    [{ worker_id: 'w', task_types: ['a'], wait_ms: 30_001 }, 'wait_ms'],
    [{ worker_id: 'w', task_types: ['a'], wait_ms: -1 }, 'wait_ms'],
    [{ worker_id: 'w', task_types: ['a'], hostname: 'h' }, 'hostname'],
  ])('rejects poll %j at %s', (body, field) => {
    expect(caught(() => validatePoll(body, { pollMaxWaitMs: 30_000 })).details.field).toBe(field);
  });

  it('reads heartbeats and completions', () => {
    expect(validateHeartbeat({ lease_token: 'lt1.2' })).toEqual({ leaseToken: 'lt1.2' });
    expect(caught(() => validateHeartbeat({})).details.field).toBe('lease_token');
    expect(validateCompletion(ID, { lease_token: 't', status: 'failed', error: 'boom' })).toEqual({
      taskId: ID,
      leaseToken: 't',
      outcome: 'failed',
      error: 'boom',
      retryable: true,
    });
    expect(validateCompletion(ID, { lease_token: 't', status: 'succeeded', retryable: false }).retryable).toBe(false);
    expect(caught(() => validateCompletion(ID, { lease_token: 't', status: 'done' })).details.field).toBe('status');
    expect(
      caught(() => validateCompletion(ID, { lease_token: 't', status: 'failed', retryable: 'no' })).details.field,
    ).toBe('retryable');
  });

  it('cuts a long error to 4 KiB of UTF-8 without splitting a character', () => {
    const c = validateCompletion(ID, { lease_token: 't', status: 'failed', error: '€'.repeat(3000) });
    expect(Buffer.byteLength(c.error ?? '')).toBeLessThanOrEqual(4096);
    expect(c.error).toBe('€'.repeat(1365));
    expect(truncateUtf8('ab😀', 5)).toBe('ab');
    expect(truncateUtf8('ab😀', 6)).toBe('ab😀');
  });

  it('reads a batch of completions and names a bad item by index', () => {
    const results = validateCompletionBatch({
      results: [{ task_id: ID, lease_token: 'a', status: 'succeeded' }],
    });
    expect(results).toEqual([{ taskId: ID, leaseToken: 'a', outcome: 'succeeded', error: null, retryable: true }]);
    const error = caught(() =>
      validateCompletionBatch({
        results: [
          { task_id: ID, lease_token: 'a', status: 'succeeded' },
          { task_id: 'x', lease_token: 'a', status: 'succeeded' },
        ],
      }),
    );
    expect(error.details).toMatchObject({ field: 'results[1].task_id', index: 1 });
    expect(caught(() => validateCompletionBatch({ results: [] })).details.field).toBe('results');
  });

  it('checks task ids', () => {
    expect(validateTaskId(ID.toUpperCase())).toBe(ID);
    expect(caught(() => validateTaskId('42')).details.field).toBe('task_id');
  });
});

describe('query validators', () => {
  it('reads list queries', () => {
    expect(validateListQuery({})).toEqual({ limit: 50 });
    expect(validateListQuery({ status: 'ready', task_type: 'a.b', limit: '10', next_token: 'xyz' })).toEqual({
      status: 'ready',
      taskType: 'a.b',
      limit: 10,
      nextToken: 'xyz',
    });
    expect(validateListQuery({ next_token: '' })).toEqual({ limit: 50 });
  });

  it.each([
    [{ status: 'done' }, 'query.status'],
    [{ status: ['ready', 'running'] }, 'query.status'],
    [{ limit: '0' }, 'query.limit'],
    [{ limit: '1001' }, 'query.limit'],
    [{ limit: 'ten' }, 'query.limit'],
    [{ limit: '1.5' }, 'query.limit'],
    [{ task_type: 'a b' }, 'query.task_type'],
    [{ sort: 'asc' }, 'query.sort'],
  ])('rejects list query %j', (query, field) => {
    expect(caught(() => validateListQuery(query)).details.field).toBe(field);
  });

  it('reads history queries', () => {
    expect(validateHistoryQuery({})).toEqual({ limit: 20 });
    expect(validateHistoryQuery({ limit: '1000', next_token: 't' })).toEqual({ limit: 1000, nextToken: 't' });
    expect(caught(() => validateHistoryQuery({ limit: '1001' })).details.field).toBe('query.limit');
  });
});

describe('helpers', () => {
  it('parses ISO-8601 times strictly', () => {
    expect(parseIsoTime('2026-11-30T12:00:00.000Z')).toBe(Date.UTC(2026, 10, 30, 12));
    expect(parseIsoTime('2026-11-30T12:00:00.123456Z')).toBe(Date.UTC(2026, 10, 30, 12, 0, 0, 123));
    expect(parseIsoTime('2026-11-30T14:00:00+02:00')).toBe(Date.UTC(2026, 10, 30, 12));
    expect(parseIsoTime('2026-11-30T07:00-0500')).toBe(Date.UTC(2026, 10, 30, 12));
    expect(parseIsoTime('2026-11-30T12:00:00')).toBe(Date.UTC(2026, 10, 30, 12));
    expect(parseIsoTime('2026-11-30')).toBe(Date.UTC(2026, 10, 30));
    expect(parseIsoTime('2028-02-29T00:00:00Z')).toBe(Date.UTC(2028, 1, 29));
    for (const bad of [
      '2026-02-29T00:00:00Z',
      '2026-13-01',
      '2026-11-30T24:00:00Z',
      'Nov 30 2026',
      '',
      '2026-11-30T12:00:00+25:00',
    ]) {
      expect(parseIsoTime(bad), bad).toBeNull();
    }
  });

  it('writes canonical JSON with sorted keys', () => {
    expect(canonicalJson({ b: 1, a: [{ d: 1, c: undefined, b: null }] })).toBe('{"a":[{"b":null,"d":1}],"b":1}');
    expect(canonicalJson('x"y')).toBe('"x\\"y"');
    expect(canonicalJson(undefined)).toBe('null');
  });
});
