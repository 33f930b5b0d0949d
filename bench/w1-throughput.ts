import { submitTasks } from './submit.js';
import { WorkerFleet } from './worker-process.js';
import { verifyAllSucceeded, workerTraffic, type RunContext, type RunFigures, type Workload } from './workload.js';

/** W1: no-op tasks submitted in bulk and run by a separate worker process, end to end. */
const TASK_TYPE = 'bench.w1';
const CONCURRENCY = 1000;

export const w1Throughput: Workload = {
  id: 'W1',
  title: 'throughput',
  definitions: [
    'W1: N = 50 000 (quick: 5 000) immediate no-op tasks submitted with POST /api/tasks/batch (1 000 a request, 4 in parallel) while the ' +
      `worker process (SDK, ${CONCURRENCY} slots per process) already polls. Wall time runs from the first submit request ` +
      'to the moment the worker saw the last result accepted by the node; processed/s = N / wall time, so it includes ' +
      'submission. Every task is then checked `succeeded` in Postgres.',
  ],
  metrics: [
    { key: 'rate', label: 'processed, submit → last completion', unit: '/s', digits: 0, bar: { op: '>=', value: 28_000, reference: 'BullMQ ≈ 19 000/s' } },
    { key: 'wallS', label: 'wall time', unit: 's', digits: 2 },
    { key: 'submitRate', label: 'submitted', unit: '/s', digits: 0 },
    { key: 'rssMiB', label: 'node max RSS', unit: 'MiB', digits: 0 },
  ],
  async run(ctx: RunContext): Promise<RunFigures> {
    const count = ctx.quick ? 5_000 : 50_000;
    const node = await ctx.startNode();
    const fleet = await WorkerFleet.start(ctx.workers, { url: node.url, taskType: TASK_TYPE, concurrency: CONCURRENCY, pollers: ctx.pollers });
    try {
      node.rss.reset();
      const submitted = await submitTasks(node.url, count, () => ({ task_type: TASK_TYPE }));
      await fleet.until((f) => f.reported >= count, 60_000 + count, `${count} W1 results`);
      const results = await fleet.stop();
      const lastMs = Math.max(...results.map((r) => r.lastReportedMs));
      const wallMs = lastMs - submitted.firstSubmitMs;
      const check = await verifyAllSucceeded(ctx, node, TASK_TYPE, count);
      const notes = [...check.notes, workerTraffic(results)];
      if (submitted.retried > 0) notes.push(`${submitted.retried} submit requests were answered 429/503 and sent again`);
      return {
        values: {
          rate: (count / wallMs) * 1000,
          wallS: wallMs / 1000,
          submitRate: (count / (submitted.lastAnsweredMs - submitted.firstSubmitMs)) * 1000,
          rssMiB: node.rss.maxMiB,
        },
        notes,
        verified: check.verified,
      };
    } catch (error) {
      fleet.kill();
      throw error;
    }
  },
};
