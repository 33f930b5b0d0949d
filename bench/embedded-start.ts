/**
 * `npm run bench:embedded-start`: how long the embedded default takes to be ready, and what it
 * holds in memory once idle (issue 32). Each run starts `wheelhouse dev` in a fresh temporary
 * directory (as `npm start` in a new checkout: the data directory is its `./.wheelhouse`),
 * times from the spawn to the first 200 of `/readyz` (and reads the CPU time it used), waits `--idle-seconds`, reads VmRSS from
 * /proc/<pid>/status, stops it with SIGTERM; then starts it again on the same directory (the
 * second start) and measures the same. Prints each run and the medians.
 *
 * Flags: --runs <n> (default 5), --idle-seconds <s> (default 10), --cli <path to cli.js>
 * (default this build's; BENCH_CLI too), --json. `--cli` given several times (before and after
 * figures: another build's cli.js, then this one's) runs the builds interleaved, run by run, so
 * that a machine busier in one minute than the next weighs on each alike.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { request } from 'undici';
import { trackChild, waitForExit } from './children.js';
import { freePort } from './node-process.js';
import { rssKiB } from './rss.js';
import { median } from './stats.js';
import { sleep } from './time.js';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    'idle-seconds': { type: 'string', default: '10' },
    cli: { type: 'string', multiple: true },
    json: { type: 'boolean', default: false },
  },
});
const runs = Number(values.runs);
const idleMs = Number(values['idle-seconds']) * 1000;
const clis = (values.cli ?? [process.env.BENCH_CLI ?? join(import.meta.dirname, '../src/cli.js')]).map((c) =>
  resolve(c),
);

/**
 * One start: milliseconds from the spawn to ready, the CPU time the process had used by then
 * (user + system; on a busy machine the wall time is mostly waiting for a core), and the idle
 * RSS in MiB.
 */
interface StartFigures {
  readyMs: number;
  cpuMs: number;
  idleRssMiB: number;
}

/** User + system CPU time of a process, ms (Linux: /proc/<pid>/stat, in ticks of 1/100 s). */
function cpuMsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function startOnce(cli: string, cwd: string): Promise<StartFigures> {
  const port = await freePort();
  const started = performance.now();
  const child = trackChild(
    spawn(process.execPath, [cli, 'dev', '--port', String(port), '--log-level', 'warn'], {
      cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let output = '';
  const keep = (chunk: Buffer): void => {
    output = (output + chunk.toString('utf8')).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  try {
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`wheelhouse dev exited before it was ready:\n${output}`);
      if (performance.now() - started > 120_000) throw new Error(`not ready within 120 s:\n${output}`);
      try {
        const res = await request(`http://127.0.0.1:${port}/readyz`, { headersTimeout: 2_000, bodyTimeout: 2_000 });
        await res.body.dump();
        if (res.statusCode === 200) break;
      } catch {
        // not listening yet
      }
      await sleep(25);
    }
    const readyMs = performance.now() - started;
    const cpuMs = cpuMsOf(child.pid as number);
    await sleep(idleMs);
    const kib = rssKiB(child.pid as number);
    if (kib === null) throw new Error(`could not read the RSS of ${child.pid}`);
    return { readyMs, cpuMs, idleRssMiB: kib / 1024 };
  } finally {
    child.kill('SIGTERM');
    await waitForExit(child, 30_000);
  }
}

function line(f: StartFigures): string {
  return `ready ${(f.readyMs / 1000).toFixed(2)} s (CPU ${(f.cpuMs / 1000).toFixed(2)} s), idle RSS ${f.idleRssMiB.toFixed(0)} MiB`;
}

function medians(of: StartFigures[]): StartFigures {
  return {
    readyMs: median(of.map((f) => f.readyMs)),
    cpuMs: median(of.map((f) => f.cpuMs)),
    idleRssMiB: median(of.map((f) => f.idleRssMiB)),
  };
}

const figures = clis.map(() => ({ first: [] as StartFigures[], second: [] as StartFigures[] }));
for (let run = 1; run <= runs; run++) {
  for (const [i, cli] of clis.entries()) {
    const cwd = mkdtempSync(join(tmpdir(), 'wheelhouse-embedded-start-'));
    try {
      const a = await startOnce(cli, cwd);
      const b = await startOnce(cli, cwd);
      figures[i]!.first.push(a);
      figures[i]!.second.push(b);
      if (!values.json) process.stdout.write(`${cli} run ${run}: first start ${line(a)}; second start ${line(b)}\n`);
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  }
}
const summaries = clis.map((cli, i) => {
  const { first, second } = figures[i]!;
  return {
    cli,
    runs,
    idleSeconds: idleMs / 1000,
    first: medians(first),
    second: medians(second),
    samples: { first, second },
  };
});
if (values.json) process.stdout.write(`${JSON.stringify(summaries, null, 2)}\n`);
else
  for (const summary of summaries)
    process.stdout.write(
      `${summary.cli}: medians of ${runs}: first start ${line(summary.first)}; second start ${line(summary.second)}\n`,
    );
