import { declareLimit } from './limits.js';
import { onOneNode, w1Count, type OneNodeVariant } from './w1-throughput.js';
import type { RunContext, RunFigures, Workload } from './workload.js';

/**
 * W1L: what a limit costs when it never binds. W1 on one node, once as W1 and once with every
 * task naming one limit whose concurrency nothing can reach, interleaved in one sitting.
 */
const LIMIT_NAME = 'w1-nonbinding';
/** Far above what one worker process (1 000 slots) can hold at once. */
const NON_BINDING_CONCURRENCY = 1_000_000;

const VARIANT: OneNodeVariant = {
  limits: [LIMIT_NAME],
  declare: (url) => declareLimit(url, LIMIT_NAME, { concurrency: NON_BINDING_CONCURRENCY }),
};

/**
 * Plain, limited, limited, plain: a steady drift over the four runs falls on both alike. The
 * runs of a sitting take turns with the mirror order (limited, plain, plain, limited): the
 * two middle places ran slower than the outer two even with both sides plain (A/A medians
 * 0.963 of five runs, 0.990 of nine), for no cause found, and alternating charges that to
 * each side in turn.
 */
const ORDER = [false, true, true, false];
const MIRRORED = ORDER.map((withLimit) => !withLimit);
/** W1L runs so far in this process: even ones take `ORDER`, odd ones `MIRRORED`. */
let runsSoFar = 0;
/**
 * `W1L_AA=1`: the limited runs run plain too, a check of the bench itself — the ratio of such
 * an A/A run is its own bias, 1 if the order is fair.
 */
const AA = process.env.W1L_AA === '1';

export const w1lNonBindingLimit: Workload = {
  id: 'W1L',
  title: 'cost of a non-binding limit',
  definitions: [
    `W1L: W1 on one node (same N, same definition of processed/s), run four times per run in the order plain, limited, ` +
      `limited, plain (every second run of a sitting mirrored: limited, plain, plain, limited), each on a fresh node (stopped after its run) after a Postgres CHECKPOINT, after a plain warm-up run that is not counted; "limited" declares \`${LIMIT_NAME}\` with concurrency ` +
      `${NON_BINDING_CONCURRENCY.toLocaleString('en-US').replace(/,/g, ' ')} and every task names it, so every task ` +
      "goes past the key's actor (admitted by it, granted at the claim, its permit given back at the end) though the limit " +
      'never binds. Each figure is the mean of its two runs; ratio = limited / plain. Node CPU: /proc utime + stime of the ' +
      'node process from the first submit to the last result, per 1 000 tasks.',
  ],
  metrics: [
    { key: 'plainRate', label: 'plain: processed, submit → last completion', unit: '/s', digits: 0 },
    { key: 'limitedRate', label: 'non-binding limit: processed', unit: '/s', digits: 0 },
    {
      key: 'ratio',
      label: 'non-binding limit / plain, processed/s',
      unit: '×',
      digits: 3,
      bar: { op: '>=', value: 0.9 },
    },
    { key: 'plainCpu', label: 'plain: node CPU per 1 000 tasks', unit: 'ms', digits: 0 },
    { key: 'limitedCpu', label: 'non-binding limit: node CPU per 1 000 tasks', unit: 'ms', digits: 0 },
    { key: 'cpuRatio', label: 'node CPU per task, limited / plain', unit: '×', digits: 3 },
  ],
  async run(ctx: RunContext): Promise<RunFigures> {
    const count = w1Count(ctx.quick);
    const plain: RunFigures[] = [];
    const limited: RunFigures[] = [];
    // Not counted: the first W1 of a sitting ran fastest in every run looked at (9 061/s, then
    // 7 830, 5 403, 5 185 for the same code), which the order below charged to plain alone.
    // A checkpoint before each run: a W1 run writes ~80 MB of WAL (402 MB for a warm-up and four
    // runs) and Postgres checkpoints every ~540 MB, so one run in six or seven had a checkpoint
    // writing beside it — whichever run that fell on.
    const fresh = async (): Promise<void> => {
      if (!(await ctx.stores.checkpoint())) ctx.log('W1L: CHECKPOINT refused; runs may share a checkpoint');
    };
    await fresh();
    const warm = await onOneNode(ctx, count);
    ctx.log(`W1L warm-up (not counted): ${Math.round(warm.values.rate as number)}/s`);
    const order = runsSoFar++ % 2 === 0 ? ORDER : MIRRORED;
    for (const withLimit of order) {
      await fresh();
      const f = await onOneNode(ctx, count, withLimit && !AA ? VARIANT : undefined);
      (withLimit ? limited : plain).push(f);
      ctx.log(
        `W1L ${withLimit ? (AA ? 'limited (A/A: run plain)' : 'limited') : 'plain'}: ${Math.round(f.values.rate as number)}/s, node CPU ${Math.round(f.values.nodeCpuMsPer1k as number)} ms per 1 000`,
      );
    }
    const mean = (runs: RunFigures[], key: string): number =>
      runs.reduce((n, r) => n + (r.values[key] as number), 0) / runs.length;
    const values = {
      plainRate: mean(plain, 'rate'),
      limitedRate: mean(limited, 'rate'),
      plainCpu: mean(plain, 'nodeCpuMsPer1k'),
      limitedCpu: mean(limited, 'nodeCpuMsPer1k'),
    };
    return {
      values: {
        ...values,
        ratio: values.limitedRate / values.plainRate,
        cpuRatio: values.limitedCpu / values.plainCpu,
      },
      notes: [
        `each: plain ${plain.map((r) => Math.round(r.values.rate as number)).join(', ')}/s; limited ${limited.map((r) => Math.round(r.values.rate as number)).join(', ')}/s`,
        ...plain.flatMap((r) => r.notes.map((n) => `plain: ${n}`)),
        ...limited.flatMap((r) => r.notes.map((n) => `limited: ${n}`)),
      ],
      verified: [...plain, ...limited].every((r) => r.verified),
    };
  },
};
