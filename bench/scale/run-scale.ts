/**
 * `npm run bench -- --scale`: the day-scale figures of issue 17 on one node each — pending
 * tasks by the ten million and cron schedules by the million — printed and written to their
 * own section of docs/benchmarks.md. Bounded by the harness's hard timeout (90 min).
 */
import type { BenchArgs } from '../args.js';
import { replaceSection } from '../chaos-report.js';
import { describeMachine } from '../machine.js';
import type { BenchStores } from '../stores.js';
import { schedulesAtScale } from './cron.js';
import { pendingAtScale } from './pending.js';
import type { ScaleContext, ScalePart } from './types.js';

/**
 * The node's V8 heap ceiling, as docs/decisions/0019-node-heap-ceiling.md has a deployment set
 * it (`NODE_OPTIONS`): without one V8 sizes its heap by the machine's memory and lets it grow
 * to several times what is live before it collects. `BENCH_NODE_ARGS` set by hand (even empty)
 * replaces it.
 */
const NODE_HEAP_ARGS = '--max-old-space-size=1536';

/** Each part writes its own section, so that one part can be run again alone. */
const begin = (part: string): string => `<!-- scale-${part}:begin (npm run bench -- --scale --scale-parts ${part}) -->`;
const end = (part: string): string => `<!-- scale-${part}:end -->`;

const LABELS: Record<string, { label: string; digits: number; bar?: string }> = {
  pending: { label: 'pending delayed tasks', digits: 0 },
  submitPerS: { label: 'submitted (POST /api/tasks/batch, 4 in parallel)', digits: 0 },
  rssPeakMiB: { label: 'node max RSS (MiB)', digits: 0, bar: '≤ 512' },
  redisMiB: { label: 'Redis used_memory for them (MiB)', digits: 1 },
  redisBytesPerTask: { label: 'Redis bytes per pending task', digits: 0 },
  pgTasksMiB: { label: 'Postgres `tasks` with indexes (MiB)', digits: 0 },
  pgBytesPerTask: { label: 'Postgres bytes per pending task (tasks + indexes)', digits: 0 },
  walBytesPerTask: { label: 'WAL bytes per submitted task', digits: 0 },
  rebuildS: { label: 'Redis flushed → every partition rebuilt (s)', digits: 1 },
  rebuildPerS: { label: 'rebuilt pending tasks per second', digits: 0 },
  probeLagMs: {
    label: 'task due 60 s after the flush: start − due (ms)',
    digits: 0,
    bar: '≤ 1 000 (due tasks start within 1 s)',
  },
  schedules: { label: 'cron schedules', digits: 0 },
  registerPerS: { label: 'registered per second', digits: 0 },
  rssAfterHerdMiB: { label: 'node RSS after the herd (MiB)', digits: 0 },
  herdFires: { label: 'fires at the measured minute boundary', digits: 0 },
  herdS: { label: 'minute boundary → last per-minute instance started (s)', digits: 3 },
  herdP99Ms: { label: 'per-minute start − fire time p99 (ms)', digits: 0 },
  duplicates: { label: 'duplicate instances or claims', digits: 0, bar: '0' },
};

export interface ScaleRun {
  args: BenchArgs;
  stores: BenchStores;
  log(line: string): void;
  track: ScaleContext['track'];
  untrack: ScaleContext['untrack'];
}

export async function runScale(run: ScaleRun): Promise<number> {
  const { args, log } = run;
  const ctx: ScaleContext = {
    stores: run.stores,
    nodeFlags: args.nodeFlags,
    log,
    track: run.track,
    untrack: run.untrack,
  };
  process.env.BENCH_NODE_ARGS ??= NODE_HEAP_ARGS;
  log(`node process flags: ${process.env.BENCH_NODE_ARGS || '(none)'}`);
  let failures = 0;
  const attempt = async (name: string, fn: () => Promise<ScalePart>): Promise<void> => {
    try {
      const partStartedMs = Date.now();
      const part = await fn();
      if (!part.verified) failures++;
      log(`${name}: ${part.verified ? 'bars held' : 'A BAR FAILED'}`);
      const text = render(part);
      process.stdout.write(`\n${text}\n`);
      if (args.write) await write(run, name, part, text, partStartedMs);
    } catch (error) {
      failures++;
      log(`${name} FAILED: ${error instanceof Error ? error.message : String(error)}`);
    }
  };
  if (args.scaleParts.includes('pending')) await attempt('pending', () => pendingAtScale(ctx, args.scaleTasks));
  if (args.scaleParts.includes('cron')) await attempt('cron', () => schedulesAtScale(ctx, args.scaleSchedules));
  return failures > 0 ? 1 : 0;
}

async function write(run: ScaleRun, name: string, part: ScalePart, text: string, startedMs: number): Promise<void> {
  const machine = describeMachine();
  const versions = await run.stores.versions();
  const command = `npm run bench -- ${process.argv.slice(2).join(' ')}`;
  const section = [
    begin(name),
    `## Scale: ${part.title}`,
    '',
    `\`${command}\` on ${machine.cpuModel}, ${machine.cores} cores, ${machine.memoryGiB} GiB, Node ${machine.node}, ` +
      `PostgreSQL ${versions.postgres}, Redis ${versions.redis} (a private redis-server for the part); ` +
      `the node run with \`${process.env.BENCH_NODE_ARGS || 'no Node.js flags'}\`; ` +
      `${new Date().toISOString().slice(0, 10)}, ${((Date.now() - startedMs) / 60_000).toFixed(1)} min. ` +
      'One run: the part takes minutes and its figures are sizes and rates of one node, not a comparison.',
    '',
    text,
    end(name),
  ].join('\n');
  replaceSection(begin(name), end(name), section);
  run.log(`wrote the scale-${name} section of docs/benchmarks.md`);
}

function render(part: ScalePart): string {
  const out: string[] = ['| figure | value | bar |', '|---|---:|---|'];
  for (const [key, value] of Object.entries(part.values)) {
    const spec = LABELS[key] ?? { label: key, digits: 1 };
    const shown = Number.isFinite(value)
      ? value.toLocaleString('en-US', { maximumFractionDigits: spec.digits, minimumFractionDigits: spec.digits })
      : 'n/a';
    out.push(`| ${spec.label} | ${shown} | ${spec.bar ?? ''} |`);
  }
  out.push('', ...part.notes.map((n) => `- ${n}`), '');
  return out.join('\n');
}
