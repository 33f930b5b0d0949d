import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkRunDir, printReport } from '../../bench/nemesis-check.js';
import { createTestSchema, TEST_POSTGRES_URL, type TestDb } from '../support/postgres.js';

const T0 = Date.UTC(2026, 0, 1);
/** More tasks than one page of the checker's reads (10 000). */
const TASKS = 10_001;

/** The id Postgres makes of `md5('t' || i)::uuid`. */
function idOf(i: number): string {
  const h = createHash('md5').update(`t${i}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

const lines = (records: object[]): string => records.map((r) => JSON.stringify(r)).join('\n') + '\n';

describe('checkRunDir', () => {
  let pg: TestDb;
  let dir: string;

  beforeAll(async () => {
    pg = await createTestSchema(1);
    dir = await mkdtemp(join(tmpdir(), 'nemesis-'));
    // Every task succeeded at its second attempt, the first having timed out unseen; one
    // schedule row (not a task to check).
    await pg.db.query(
      `INSERT INTO tasks (id, task_type, status, schedule_type, due_time, priority, partition, max_retries,
                          timeout_seconds, created_at, updated_at, attempts, completed_at, limits)
       SELECT md5('t' || i)::uuid, 'nem.work', 'succeeded', 'immediate', $1, 5, 0, 3, 30, $1, $1, 2, $2, NULL
       FROM generate_series(0, $3 - 1) i`,
      [new Date(T0), new Date(T0 + 2000), TASKS],
    );
    await pg.db.query(
      `INSERT INTO executions (task_id, attempt, status, due_time, completed_at)
       SELECT md5('t' || i)::uuid, 1, 'timed_out', $1, $2 FROM generate_series(0, $3 - 1) i`,
      [new Date(T0), new Date(T0 + 1000), TASKS],
    );
    await pg.db.query(
      `INSERT INTO tasks (id, task_type, status, schedule_type, due_time, priority, partition, max_retries,
                          timeout_seconds, created_at, updated_at)
       VALUES (md5('schedule')::uuid, 'nem.cron', 'active', 'cron', $1, 5, 0, 3, 30, $1, $1)`,
      [new Date(T0)],
    );
    const ids = Array.from({ length: TASKS }, (_, i) => idOf(i));
    await writeFile(
      join(dir, 'run.json'),
      JSON.stringify({
        schema: pg.schema,
        postgres_url: TEST_POSTGRES_URL,
        started_ms: T0,
        ended_ms: T0 + 60_000,
        limits: { 'nem:*': { concurrency: 1 } },
      }),
    );
    await writeFile(
      join(dir, 'producer-1.jsonl'),
      lines(ids.map((task_id, i) => ({ ev: 'ack', t: T0, task_id, idem: `k${i}`, kind: 'immediate', due_ms: T0 }))) +
        '{"ev":"ack","t":',
    );
    await writeFile(
      join(dir, 'worker-1.jsonl'),
      lines(
        ids.flatMap((task_id) => [
          { ev: 'start', t: T0 + 1500, task_id, attempt: 2, worker: 'w1', path: 'channel', task_type: 'nem.work' },
          { ev: 'end', t: T0 + 2000, task_id, attempt: 2, worker: 'w1', outcome: 'ok' },
        ]),
      ),
    );
    await writeFile(join(dir, 'faults.jsonl'), lines([{ ev: 'fault', t: T0 + 500, kind: 'node-kill', target: 'n1' }]));
  });

  afterAll(async () => {
    await pg.drop();
    await rm(dir, { recursive: true, force: true });
  });

  it('reads every page of the tables and the logs, and passes a clean run', async () => {
    const report = await checkRunDir(dir, { postgresUrl: TEST_POSTGRES_URL, schema: pg.schema });
    expect(report.violations).toEqual([]);
    expect(report.acknowledged).toEqual({ immediate: TASKS });
    expect(report.unseenAttempts).toBe(TASKS);
    expect(report.tornLines).toBe(1);
    expect(report.limits).toEqual([]);
    const out: string[] = [];
    printReport(report, (line) => out.push(line));
    expect(out).toContain('verdict: PASS');
  });

  it('fails a run whose tables break the rules', async () => {
    await pg.db.query(`UPDATE tasks SET limits = ARRAY['nem:1'] WHERE id = ANY($1::uuid[])`, [[idOf(1), idOf(2)]]);
    await pg.db.query(`UPDATE tasks SET status = 'running', completed_at = NULL WHERE id = $1`, [idOf(3)]);
    const report = await checkRunDir(dir, { postgresUrl: TEST_POSTGRES_URL, schema: pg.schema });
    expect(report.lost).toEqual([{ taskId: idOf(3), status: 'running' }]);
    expect(report.limits).toEqual([{ key: 'nem:1', concurrency: 1, maxObserved: 2 }]);
    expect(report.violations.map((v) => v.rule).sort()).toEqual(['limits', 'lost']);
    const out: string[] = [];
    printReport(report, (line) => out.push(line));
    expect(out).toContain('violations lost: 1');
    expect(out).toContain('verdict: FAIL');
  });
});
