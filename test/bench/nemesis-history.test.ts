import { describe, expect, it } from 'vitest';
import {
  checkHistory,
  parseJsonLines,
  runsOf,
  type ExecutionRow,
  type HistoryInput,
  type RuleId,
  type TaskRow,
  type WorkerRecord,
} from '../../bench/nemesis-history.js';

const T0 = Date.UTC(2026, 0, 1);
const at = (s: number): number => T0 + s * 1000;

/** A task id whose first characters say what it is in the history. */
const id = (name: string): string => `${name.padEnd(8, '0')}-0000-7000-8000-000000000000`;

function task(name: string, fields: Partial<TaskRow> = {}): TaskRow {
  return {
    id: id(name),
    taskType: 'nem.work',
    status: 'succeeded',
    attempts: 1,
    scheduleType: 'immediate',
    scheduleId: null,
    fireMs: null,
    dagId: null,
    limits: null,
    completedMs: null,
    dueMs: at(0),
    ...fields,
  };
}

/**
 * One run of `name`: a start on `worker`, and its end (`ok` unless told) at `endS`; an `ok` run's
 * result is answered `accepted` 10 ms later.
 */
function run(
  name: string,
  attempt: number,
  worker: string,
  startS: number,
  endS: number,
  outcome: 'ok' | 'lease_lost' | 'error' = 'ok',
): WorkerRecord[] {
  const base = { task_id: id(name), attempt, worker };
  return [
    { ev: 'start', t: at(startS), ...base, path: 'http', task_type: 'nem.work' },
    { ev: 'end', t: at(endS), ...base, outcome },
    ...(outcome === 'ok' ? [{ ev: 'answer' as const, t: at(endS + 0.01), ...base, outcome: 'accepted' as const }] : []),
  ];
}

function execution(name: string, attempt: number, status: string, completedS: number): ExecutionRow {
  return { taskId: id(name), attempt, status, startedMs: null, completedMs: at(completedS) };
}

/**
 * A run every rule passes: an immediate task; one whose first lease ran out while its worker
 * still ran it (the overlap the database explains); a DAG a → b; a schedule firing every 2 s
 * from 10 s to 20 s; three tasks of a family key `nem:*` with concurrency 2, the third
 * starting as the first ends; a submit that gave up.
 */
function clean(): HistoryInput {
  const rows: TaskRow[] = [
    task('aaaa', { completedMs: at(2) }),
    task('bbbb', { attempts: 2, completedMs: at(7) }),
    task('dag1', { dagId: id('dd'), completedMs: at(3) }),
    task('dag2', { dagId: id('dd'), completedMs: at(4) }),
    ...[1, 2, 3].map((i) => task(`lim${i}`, { limits: ['nem:3'], completedMs: at(31 + i * 0.5) })),
  ];
  const workers: WorkerRecord[] = [
    ...run('aaaa', 1, 'w1', 1, 2),
    ...run('bbbb', 1, 'w1', 1, 9, 'lease_lost'),
    ...run('bbbb', 2, 'w2', 6.1, 7),
    ...run('dag1', 1, 'w2', 2, 3),
    ...run('dag2', 1, 'w1', 3.1, 4),
    ...run('lim1', 1, 'w1', 30, 31),
    ...run('lim2', 1, 'w2', 30.5, 31.5),
    ...run('lim3', 1, 'w1', 31, 32),
  ];
  for (let s = 10; s <= 20; s += 2) {
    const name = `cr${s}`;
    rows.push(task(name, { scheduleId: id('sched'), fireMs: at(s), dueMs: at(s), completedMs: at(s + 0.5) }));
    workers.push(...run(name, 1, 'w2', s + 0.1, s + 0.5));
  }
  return {
    run: {
      schema: 'nem',
      postgres_url: 'postgres://x',
      started_ms: at(0),
      ended_ms: at(60),
      limits: { 'nem:*': { concurrency: 2 } },
    },
    producers: [
      { ev: 'ack', t: at(0.5), task_id: id('aaaa'), idem: 'k1', kind: 'immediate', due_ms: at(0) },
      { ev: 'ack', t: at(0.5), task_id: id('bbbb'), idem: 'k2', kind: 'delayed', due_ms: at(0) },
      ...[1, 2, 3].map((i) => ({
        ev: 'ack' as const,
        t: at(29),
        task_id: id(`lim${i}`),
        idem: `l${i}`,
        kind: 'limited' as const,
        due_ms: at(29),
      })),
      {
        ev: 'dag',
        t: at(1),
        dag_id: id('dd'),
        nodes: [
          { ref: 'a', task_id: id('dag1'), deps: [] },
          { ref: 'b', task_id: id('dag2'), deps: ['a'] },
        ],
      },
      { ev: 'cron', t: at(9.5), schedule_id: id('sched'), expr: '*/2 * * * * *', every_ms: 2000, end_ms: at(20) },
      { ev: 'gave_up', t: at(5), idem: 'k9', kind: 'immediate', last: '503' },
    ],
    workers,
    faults: [{ ev: 'fault', t: at(40), kind: 'node-kill', target: 'n2' }],
    tornLines: 0,
    tasks: new Map(rows.map((r) => [r.id, r])),
    executions: new Map([[id('bbbb'), new Map([[1, execution('bbbb', 1, 'timed_out', 6)]])]]),
    dependencies: new Map([[id('dag2'), [id('dag1')]]]),
  };
}

function rules(input: HistoryInput): RuleId[] {
  return checkHistory(input).violations.map((v) => v.rule);
}

function setTask(input: HistoryInput, name: string, fields: Partial<TaskRow>): void {
  input.tasks.set(id(name), { ...(input.tasks.get(id(name)) as TaskRow), ...fields });
}

describe('checkHistory', () => {
  it('passes a clean history and reports what it counted', () => {
    const report = checkHistory(clean());
    expect(report.violations).toEqual([]);
    expect(report.verdict).toBe('PASS');
    expect(report.acknowledged).toEqual({ immediate: 1, delayed: 1, limited: 3 });
    expect(report.dags).toEqual({ count: 1, nodes: 2 });
    expect(report.cron).toEqual({ schedules: 1, instances: 6 });
    expect(report.gaveUp).toBe(1);
    expect(report.strays).toBe(0);
    expect(report.duplicates['lease ran out']).toBe(1);
    expect(report.duplicatedTasks).toBe(1);
    expect(report.cronGaps.count).toBe(0);
    expect(report.limits).toEqual([{ key: 'nem:3', concurrency: 2, maxObserved: 2 }]);
    expect(report.faults).toEqual({ 'node-kill': 1 });
    expect(Object.values(report.violationsByRule)).toEqual([0, 0, 0, 0, 0, 0]);
  });

  it('reports an acknowledged task that is not final, or not in the database, but not one due after the run nor a stray', () => {
    const input = clean();
    setTask(input, 'aaaa', { status: 'pending', completedMs: null });
    input.producers.push({ ev: 'ack', t: at(1), task_id: id('gone'), idem: 'k3', kind: 'immediate', due_ms: at(1) });
    input.tasks.set(id('late'), task('late', { status: 'pending', scheduleType: 'delayed', dueMs: at(90) }));
    input.producers.push({ ev: 'ack', t: at(1), task_id: id('late'), idem: 'k4', kind: 'delayed', due_ms: at(90) });
    // A submit that gave up after its row was written: not acknowledged, so not lost.
    input.tasks.set(id('stray'), task('stray', { status: 'pending' }));
    const report = checkHistory(input);
    expect(report.lost).toEqual([
      { taskId: id('aaaa'), status: 'pending' },
      { taskId: id('gone'), status: 'missing' },
    ]);
    expect(report.notDue).toBe(1);
    expect(report.strays).toBe(1);
    expect(rules(input)).toEqual(['lost', 'lost']);
  });

  it('reports a cron instance left unfinished', () => {
    const input = clean();
    setTask(input, 'cr14', { status: 'running' });
    expect(rules(input)).toEqual(['lost']);
  });

  it('reports one attempt handed out twice with no failover, and explains it with one', () => {
    const input = clean();
    input.workers.push(...run('aaaa', 1, 'w2', 3, 4, 'lease_lost'));
    const broken = checkHistory(input);
    expect(broken.violations.map((v) => v.rule)).toEqual(['attempts']);
    expect(broken.violations[0]?.why).toContain('handed out twice with no Postgres failover');
    input.faults.push({ ev: 'fault', t: at(0.5), kind: 'pg-failover', target: 'pg1' });
    const explained = checkHistory(input);
    expect(explained.violations).toEqual([]);
    expect(explained.duplicates['claim lost in failover']).toBe(1);
  });

  it('reports two live runs overlapping while the earlier lease had not run out', () => {
    const input = clean();
    input.executions.set(id('bbbb'), new Map([[1, execution('bbbb', 1, 'timed_out', 8)]]));
    const report = checkHistory(input);
    expect(report.violations.map((v) => v.rule)).toEqual(['double-holding']);
    expect(report.violations[0]?.why).toContain('timed_out at');
  });

  it('allows the overlap when the database says the earlier attempt timed out before the later start', () => {
    const input = clean();
    input.executions.set(id('bbbb'), new Map([[1, execution('bbbb', 1, 'timed_out', 6.1)]]));
    const report = checkHistory(input);
    expect(report.violations).toEqual([]);
    expect(report.duplicates['lease ran out']).toBe(1);
  });

  it('reports a start beyond the attempts the database counts, and an attempt without its execution row', () => {
    const input = clean();
    input.workers.push(...run('aaaa', 2, 'w2', 3, 4));
    input.executions.delete(id('bbbb'));
    const whys = checkHistory(input).violations.map((v) => `${v.rule}: ${v.why}`);
    expect(whys.some((w) => w.startsWith('attempts: worker w2 started attempt 2, the database counts 1'))).toBe(true);
    expect(whys.some((w) => w.startsWith('attempts: attempt 1 of 2 (task succeeded) has no execution row'))).toBe(true);
  });

  it('reports a succeeded task whose final attempt no worker had accepted', () => {
    const input = clean();
    const runs = input.workers.filter((w) => w.task_id === id('aaaa'));
    input.workers = input.workers.filter((w) => w.task_id !== id('aaaa'));
    input.workers.push(...runs.map((w): WorkerRecord => (w.ev === 'answer' ? { ...w, outcome: 'refused' } : w)));
    expect(checkHistory(input).violations.map((v) => v.why)).toEqual([
      'succeeded at attempt 1, but every run of it was refused or dropped',
    ]);
    // The same refusal after the worker's node died between the result and its answer: the
    // node may have stored it and died before its ack left (the resent result is then refused).
    const run1End = runs.find((w) => w.ev === 'end')!.t;
    input.faults.push({ ev: 'fault', t: run1End + 5, kind: 'node-kill', target: 'n2', until: run1End + 3_000 });
    const report = checkHistory(input);
    expect(report.violations).toEqual([]);
    expect(report.unknownAnswers).toBe(1);
  });

  it('counts a result sent but unacknowledged when its worker stopped as unknown, not refused', () => {
    const input = clean();
    const runs = input.workers.filter((w) => w.task_id === id('aaaa'));
    input.workers = input.workers.filter((w) => w.task_id !== id('aaaa'));
    input.workers.push(...runs.map((w): WorkerRecord => (w.ev === 'answer' ? { ...w, outcome: 'unacknowledged' } : w)));
    const report = checkHistory(input);
    expect(report.violations).toEqual([]);
    expect(report.unknownAnswers).toBe(1);
    input.workers = input.workers.map((w): WorkerRecord =>
      w.ev === 'answer' && w.task_id === id('aaaa') ? { ...w, outcome: 'dropped' } : w,
    );
    expect(checkHistory(input).violations.map((v) => v.rule)).toEqual(['attempts']);
  });

  it('reports an attempt that ended without a worker unless it timed out', () => {
    const input = clean();
    setTask(input, 'aaaa', { attempts: 2 });
    input.executions.set(id('aaaa'), new Map([[2, execution('aaaa', 2, 'failed', 1)]]));
    input.workers = input.workers.map((w) => (w.task_id === id('aaaa') ? { ...w, attempt: 2 } : w));
    input.executions.get(id('aaaa'))?.set(1, execution('aaaa', 1, 'failed', 0.9));
    expect(rules(input)).toEqual(['attempts']);
    input.executions.get(id('aaaa'))?.set(1, execution('aaaa', 1, 'timed_out', 0.9));
    const report = checkHistory(input);
    expect(report.violations).toEqual([]);
    expect(report.unseenAttempts).toBe(1);
  });

  it('reports a result accepted for an attempt the database then timed out, unless a failover lost it', () => {
    const input = clean();
    setTask(input, 'aaaa', { attempts: 2, completedMs: at(5) });
    input.executions.set(id('aaaa'), new Map([[1, execution('aaaa', 1, 'timed_out', 3)]]));
    input.workers.push(...run('aaaa', 2, 'w2', 4, 5));
    expect(checkHistory(input).violations.map((v) => v.why)).toEqual([
      expect.stringContaining("worker w1's result for attempt 1 was accepted"),
    ]);
    input.faults.push({ ev: 'fault', t: at(2.5), kind: 'pg-failover', target: 'pg1' });
    const report = checkHistory(input);
    expect(report.violations).toEqual([]);
    expect(report.duplicates['result lost in failover']).toBe(1);
  });

  it('reports two results accepted for one attempt, unless a failover lost the first claim and result', () => {
    const input = clean();
    input.workers.push(...run('aaaa', 1, 'w2', 14, 15));
    // A failover before the first run ended explains nothing: its claim was then on the new primary.
    input.faults.push({ ev: 'fault', t: at(0.5), kind: 'pg-failover', target: 'pg1' });
    expect(checkHistory(input).violations.map((v) => v.why)).toEqual(['2 results accepted for attempt 1']);
    // One just after the first run's end lost its claim and its result (neither is committed
    // synchronously): the row was pending again at 0 attempts, and the next claim was attempt 1.
    input.faults.push({ ev: 'fault', t: at(2.1), kind: 'pg-failover', target: 'pg1' });
    expect(checkHistory(input).violations).toEqual([]);
  });

  it('reports two instances of one cron fire time', () => {
    const input = clean();
    input.tasks.set(id('cr14b'), task('cr14b', { scheduleId: id('sched'), fireMs: at(14), completedMs: at(15) }));
    input.workers.push(...run('cr14b', 1, 'w1', 14.5, 15));
    const report = checkHistory(input);
    expect(report.violations.map((v) => v.rule)).toEqual(['cron']);
    expect(report.violations[0]?.taskIds.sort()).toEqual([id('cr14'), id('cr14b')].sort());
  });

  it('reports missing fire times outside any fault window, and counts them inside one', () => {
    const input = clean();
    input.tasks.delete(id('cr14'));
    input.tasks.delete(id('cr16'));
    input.workers = input.workers.filter((w) => w.task_id !== id('cr14') && w.task_id !== id('cr16'));
    const broken = checkHistory(input);
    expect(broken.violations.map((v) => v.why)).toEqual([expect.stringContaining('no instance for 2 fire time(s)')]);
    expect(broken.cronGaps).toEqual({ count: 1, missed: 2, longestMs: 6000 });
    input.faults.push({ ev: 'fault', t: at(13), kind: 'node-stop', target: 'n1', until: at(17) });
    expect(checkHistory(input).violations).toEqual([]);
    input.faults = [{ ev: 'fault', t: at(13), kind: 'worker-kill', target: 'w9' }];
    expect(rules(input)).toEqual(['cron']);
    // A fault long over does not explain a schedule that is still silent (it is stuck).
    input.faults = [{ ev: 'fault', t: at(13) - 60_000, kind: 'node-stop', target: 'n1', until: at(13) - 45_000 }];
    expect(checkHistory(input).violations.map((v) => v.why)).toEqual([expect.stringContaining('2 of them (from')]);
    input.faults[0]!.until = at(15) - 30_000; // the fire time at 14 s is within 30 s of its end, 16 s is not
    expect(checkHistory(input).violations.map((v) => v.why)).toEqual([expect.stringContaining('1 of them (from')]);
  });

  it('reports a schedule that stopped firing before its end', () => {
    const input = clean();
    for (const s of [16, 18, 20]) input.tasks.delete(id(`cr${s}`));
    input.workers = input.workers.filter((w) => !['cr16', 'cr18', 'cr20'].some((n) => w.task_id === id(n)));
    expect(checkHistory(input).violations.map((v) => v.why)).toEqual([
      expect.stringContaining('no instance for 3 fire time(s)'),
    ]);
  });

  it('reports a DAG dependent started before its predecessor completed, or after it failed', () => {
    const input = clean();
    setTask(input, 'dag1', { completedMs: at(3.5) });
    expect(checkHistory(input).violations.map((v) => v.why)).toEqual([
      expect.stringContaining('before its predecessor'),
    ]);
    // The same when a Postgres failover lost the predecessor's first, accepted success (its
    // completion was committed asynchronously) and it ran again: the dependent's start is
    // explained by that first success.
    const accepted = input.workers.find((w) => w.task_id === id('dag1') && w.ev === 'answer')!;
    const explained = {
      ...input,
      faults: [
        ...input.faults,
        { ev: 'fault' as const, t: accepted.t + 50, kind: 'pg-failover' as const, target: 'pg1' },
      ],
    };
    expect(checkHistory(explained).violations).toEqual([]);
    setTask(input, 'dag1', { status: 'failed', completedMs: at(3) });
    expect(checkHistory(input).violations.map((v) => v.why)).toEqual([expect.stringContaining('is failed')]);
  });

  it('reports a limit of 2 with 3 runs overlapping', () => {
    const input = clean();
    input.workers = input.workers.map((w) =>
      w.task_id === id('lim3') && w.ev === 'start' ? { ...w, t: at(30.8) } : w,
    );
    const report = checkHistory(input);
    expect(report.violations.map((v) => v.rule)).toEqual(['limits']);
    expect(report.violations[0]?.why).toContain('nem:3 (concurrency 2) held by 3 runs');
    expect(report.limits).toEqual([{ key: 'nem:3', concurrency: 2, maxObserved: 3 }]);
    expect(report.violationsByRule.limits).toBe(1);
    expect(report.verdict).toBe('FAIL');
  });

  it('applies the family nem:* to nem:3 unless nem:3 is declared itself, and ends a hold where the database did', () => {
    const input = clean();
    input.run.limits = { 'nem:*': { concurrency: 1 } };
    // lim1 with lim2 from 30.5 s, then lim2 with lim3 from 31 s.
    expect(rules(input)).toEqual(['limits', 'limits']);
    input.run.limits = { 'nem:*': { concurrency: 1 }, 'nem:3': { concurrency: 2 } };
    expect(rules(input)).toEqual([]);
    // lim1's worker logs its end at 31 s; the database had taken its result at 30.5 s, as lim2 started.
    input.run.limits = { 'nem:*': { concurrency: 1 } };
    setTask(input, 'lim3', { limits: ['other'] });
    setTask(input, 'lim1', { completedMs: at(30.5) });
    expect(rules(input)).toEqual([]);
  });
});

describe('the logs', () => {
  it('skips a torn last line', () => {
    const { records, torn } = parseJsonLines('{"ev":"ack","t":1}\n{"ev":"ack","t":2}\n{"ev":"ac');
    expect(records).toHaveLength(2);
    expect(torn).toBe(1);
  });

  it("ends a worker's open runs at its kill, and the others at the run's end", () => {
    const input = clean();
    input.workers = [run('aaaa', 1, 'w1', 1, 2)[0] as WorkerRecord, run('bbbb', 1, 'w2', 1, 2)[0] as WorkerRecord];
    input.faults.push({ ev: 'fault', t: at(5), kind: 'worker-kill', target: 'w1' });
    const { runs, cut } = runsOf(input);
    expect(runs.get(id('aaaa'))?.[0]).toMatchObject({ endMs: at(5), how: 'killed' });
    expect(runs.get(id('bbbb'))?.[0]).toMatchObject({ endMs: at(60), how: 'cut' });
    expect(cut).toBe(1);
  });
});
