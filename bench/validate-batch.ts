/**
 * `node dist/bench/validate-batch.js [other-build/dist/src/http/validation/tasks.js]`: the CPU
 * cost of checking a 1 000-task `POST /api/tasks/batch` body and making its specs (what the
 * route does before it touches a store), in this build and, given a path, in another build,
 * measured in turn (A B A B …) so both see the same machine. Prints the median µs per batch.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

type Validate = (body: unknown, defaults: { timeoutSeconds: number; maxPayloadBytes: number }) => unknown[];

function body(round: number): unknown {
  const tasks = [];
  for (let i = 0; i < 1000; i++) {
    const task: Record<string, unknown> = {
      task_type: i % 3 === 0 ? 'email.send' : 'report.build',
      payload: { user: `u${round}-${i}`, items: [1, 2, 3], note: 'a short note to make the payload realistic' },
      schedule:
        i % 10 === 0
          ? { type: 'delayed', due_time: '2030-01-01T00:00:00.000Z' }
          : { type: 'delayed', delay_seconds: 3600 + (i % 60) },
      priority: i % 10,
    };
    if (i % 4 === 0) task.idempotency_key = `r${round}-${i}`;
    if (i % 5 === 0) task.max_retries = 5;
    tasks.push(task);
  }
  // A body as fastify hands it over: parsed from JSON text.
  return JSON.parse(JSON.stringify({ tasks }));
}

const here = resolve(import.meta.dirname, '../src/http/validation/tasks.js');
const builds: [string, Validate][] = [
  ['this build', ((await import(pathToFileURL(here).href)) as { validateBatch: Validate }).validateBatch],
];
if (process.argv[2]) {
  const other = (await import(pathToFileURL(resolve(process.argv[2])).href)) as { validateBatch: Validate };
  builds.push([process.argv[2], other.validateBatch]);
}
const defaults = { timeoutSeconds: 60, maxPayloadBytes: 256 * 1024 };
const bodies = Array.from({ length: 50 }, (_, i) => body(i));
const samples = builds.map(() => [] as number[]);
for (let round = 0; round < 30; round++) {
  builds.forEach(([, validate], b) => {
    const started = process.hrtime.bigint();
    for (const one of bodies) if (validate(one, defaults).length !== 1000) throw new Error('wrong count');
    const us = Number(process.hrtime.bigint() - started) / 1000 / bodies.length;
    if (round >= 5) samples[b]?.push(us);
  });
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
builds.forEach(([name], b) =>
  console.log(`validate-batch ${name}: median ${median(samples[b] ?? []).toFixed(0)} µs per 1 000-task batch`),
);
if (builds.length === 2) {
  const ratio = median(samples[0] ?? []) / median(samples[1] ?? []);
  console.log(`ratio this/other: ${ratio.toFixed(2)}`);
}
