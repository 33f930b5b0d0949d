import { Counter, Gauge, type Registry } from 'prom-client';
import { LIMIT } from '../actors/limit-key.js';
import type { NodeEvents } from '../domain/events.js';
import type { TypedEvents } from '../lib/events.js';
import type { ActorSystemApi } from '../runtime/actor.js';
import { TaskTypeLabels } from './task-metrics.js';

/** What a limit key's actor shows of itself (`limitKeyBehavior`'s `describe`), the members read here. */
interface LimitDescription {
  declaredAs: string | null;
  holders: number;
  admitted: number;
  waiting: number;
  /** Offered and kept in the key's inbox, not in its waiting set (a queue key's fired tasks, a flood). */
  offered: number;
}

/**
 * The metrics of flow control, by `limit`: the name whose declaration applies to a key — its
 * family (`customer:*`) for a key declared through one, else the key — so that a million
 * customers make one series, not a million; and, as task types are, at most `maxLimits` label
 * values, every later one counted as `other`.
 *
 * - `wheelhouse_limit_running` / `wheelhouse_limit_waiting` (gauges): summed at scrape time
 *   over the limit actors live on this node (each key lives on one node: sum over nodes). A
 *   label once shown stays, at 0 when none of its keys is live here.
 * - `wheelhouse_limit_throttled_total` (counter): claims a key refused for its rate
 *   (`limit:throttled`).
 *
 * @returns the collector that sets the gauges, to run at scrape time
 */
export function limitMetrics(
  registry: Registry,
  events: TypedEvents<NodeEvents>,
  maxLimits: number,
  system: () => Pick<ActorSystemApi, 'list' | 'inspect'>,
): () => void {
  const labels = new TaskTypeLabels(maxLimits);
  const registers = [registry];
  const running = new Gauge({
    name: 'wheelhouse_limit_running',
    help: 'Tasks holding a permit of a limit (running, or granted and being claimed), by limit (a family for its keys), over the limit actors live on this node.',
    labelNames: ['limit'],
    registers,
  });
  const waiting = new Gauge({
    name: 'wheelhouse_limit_waiting',
    help: 'Due tasks of a limit that may not start yet (waiting at its actor, or admitted to the ready queue and not yet claimed), by limit (a family for its keys), over the limit actors live on this node.',
    labelNames: ['limit'],
    registers,
  });
  const throttled = new Counter({
    name: 'wheelhouse_limit_throttled_total',
    help: 'Claims of tasks a limit refused for its rate (they wait for the next allowed start), by limit (a family for its keys).',
    labelNames: ['limit'],
    registers,
  });
  events.on('limit:throttled', (e) => throttled.inc({ limit: labels.of(e.declaredAs) }, e.count));

  const shown = new Set<string>();
  return () => {
    const sums = new Map<string, { running: number; waiting: number }>();
    for (const label of shown) sums.set(label, { running: 0, waiting: 0 });
    const sys = system();
    for (const actor of sys.list({ kind: LIMIT, limit: Number.POSITIVE_INFINITY })) {
      const state = sys.inspect(LIMIT, actor.key)?.state as Partial<LimitDescription> | undefined;
      if (state === undefined || state === null || typeof state.holders !== 'number') continue;
      const label = labels.of(state.declaredAs ?? actor.key);
      const sum = sums.get(label) ?? { running: 0, waiting: 0 };
      sum.running += state.holders;
      sum.waiting += (state.waiting ?? 0) + (state.offered ?? 0) + (state.admitted ?? 0);
      sums.set(label, sum);
    }
    for (const [label, sum] of sums) {
      shown.add(label);
      running.set({ limit: label }, sum.running);
      waiting.set({ limit: label }, sum.waiting);
    }
  };
}
