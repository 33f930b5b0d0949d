/**
 * The parts of `wheelhouse submit --file` that need no node: the line reader, the line → task
 * reading, and the progress line.
 */
import { describe, expect, it } from 'vitest';

import { readLines, type Line } from '../../src/cli/ndjson.js';
import { progressLine } from '../../src/cli/progress.js';
import { taskFromLine } from '../../src/cli/task-lines.js';

async function collect(chunks: (string | Buffer)[]): Promise<Line[]> {
  const out: Line[] = [];
  for await (const line of readLines(chunks)) out.push(line);
  return out;
}

describe('readLines', () => {
  it('splits lines across chunk boundaries, a multi-byte character included', async () => {
    const text = Buffer.from('{"a":"é"}\n\n{"b":2}\r\nlast', 'utf8');
    // Cut inside "é" (two bytes) and inside the \r\n.
    const cuts = [8, 11, 19, text.length];
    const chunks = cuts.map((end, i) => text.subarray(i === 0 ? 0 : cuts[i - 1], end));
    expect(await collect(chunks)).toEqual([
      { number: 1, text: '{"a":"é"}', bytes: 11 },
      { number: 2, text: '', bytes: 1 },
      { number: 3, text: '{"b":2}', bytes: 9 },
      { number: 4, text: 'last', bytes: 4 },
    ]);
  });

  it('drops a byte-order mark before the first line and reads nothing from an empty input', async () => {
    expect((await collect(['\uFEFF{"a":1}\n'])).map((l) => l.text)).toEqual(['{"a":1}']);
    expect(await collect([])).toEqual([]);
  });
});

describe('taskFromLine', () => {
  it("reads the API's snake_case into the client's task, leaving values for the node to check", () => {
    expect(
      taskFromLine(
        JSON.stringify({
          task_type: 'a.b',
          payload: { x: 1 },
          schedule: { type: 'cron', cron_expression: '0 * * * *', timezone: 'Europe/Paris', misfire_policy: 'skip' },
          idempotency_key: 'k',
          priority: 'high',
          max_retries: 2,
          timeout_seconds: 30,
        }),
      ),
    ).toEqual({
      taskType: 'a.b',
      payload: { x: 1 },
      schedule: { type: 'cron', cronExpression: '0 * * * *', timezone: 'Europe/Paris', misfirePolicy: 'skip' },
      idempotencyKey: 'k',
      priority: 'high',
      maxRetries: 2,
      timeoutSeconds: 30,
    });
    expect(taskFromLine('{"task_type":"a","schedule":{"type":"delayed","delay_seconds":5}}').schedule).toEqual({
      type: 'delayed',
      delaySeconds: 5,
    });
  });

  it('refuses what the client would drop without a word: unknown fields, an unknown schedule type', () => {
    expect(() => taskFromLine('[1]')).toThrow(/not a JSON object/);
    expect(() => taskFromLine('{"task_type":"a","priorty":1}')).toThrow(/unknown field "priorty"/);
    expect(() => taskFromLine('{"task_type":"a","schedule":{"type":"weekly"}}')).toThrow(/schedule\.type: must be/);
    expect(() => taskFromLine('{"task_type":"a","schedule":{"type":"delayed","cron_expression":"x"}}')).toThrow(
      /schedule: unknown field "cron_expression"/,
    );
    expect(() => taskFromLine('{"task_type":')).toThrow(/^not JSON: /);
  });
});

describe('progressLine', () => {
  it('gives counts and rate, and with the size of the input a share and an estimate of lines', () => {
    expect(progressLine({ submitted: 2000, lines: 2500, bytes: 250_000 }, 1_000_000, 2000)).toBe(
      '2,000 submitted · 2,500 lines read (25 %, ~10,000 in all) · 1,000 tasks/s',
    );
    expect(progressLine({ submitted: 0, lines: 0, bytes: 0 }, null, 0)).toBe('0 submitted · 0 lines read · 0 tasks/s');
  });
});
