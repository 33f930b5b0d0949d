import { Registry, collectDefaultMetrics } from 'prom-client';

/**
 * A node's Prometheus metrics on prom-client. Each node has a registry of its own, never
 * prom-client's global one: tests run many nodes in one process, and their counters must not
 * mix. The process's default metrics (CPU, memory, heap, event-loop lag, GC, handles) are
 * one set per process, rendered after the node's.
 */
export class Metrics {
  /** Where the node's metrics register (`registers: [metrics.registry]`). */
  readonly registry = new Registry();
  private readonly collectors: (() => Promise<void> | void)[] = [];

  constructor() {
    // Started with the first node, so that the event-loop monitor has run by the first scrape.
    processMetrics();
  }

  /**
   * Runs before each render, to refresh gauges read from elsewhere. Collectors run one after
   * another, so one read (the ready queues' depths) can feed several gauges.
   */
  onCollect(collector: () => Promise<void> | void): void {
    this.collectors.push(collector);
  }

  /** The text exposition (0.0.4) of the node's metrics, then the process's. */
  async render(): Promise<string> {
    for (const collect of this.collectors) await collect();
    const [node, process] = await Promise.all([this.registry.metrics(), processMetrics().metrics()]);
    return `${node}\n${process}`;
  }

  /**
   * The sum of the series of `name` whose labels include `labels` (0 when there are none), as
   * last counted: collectors do not run. `name` may be a histogram's `_count` or `_sum`.
   */
  async value(name: string, labels: Readonly<Record<string, string>> = {}): Promise<number> {
    const base = name.replace(/_(count|sum)$/, '');
    for (const registry of [this.registry, processMetrics()]) {
      const metric = registry.getSingleMetric(name) ?? registry.getSingleMetric(base);
      if (metric === undefined) continue;
      let sum = 0;
      for (const v of (await metric.get()).values) {
        if (((v as { metricName?: string }).metricName ?? name) !== name) continue;
        const have = v.labels as Record<string, string | number | undefined>;
        if (Object.entries(labels).every(([k, want]) => String(have[k]) === want)) sum += v.value;
      }
      return sum;
    }
    return 0;
  }
}

let processRegistry: Registry | null = null;

/**
 * The process's default metrics, named `wheelhouse_process_…` and `wheelhouse_nodejs_…`.
 * Registered once per process: each `collectDefaultMetrics` starts an event-loop delay monitor
 * and a GC observer that nothing can stop, and a process is one process whatever number of
 * nodes it runs.
 */
function processMetrics(): Registry {
  if (processRegistry === null) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry, prefix: 'wheelhouse_' });
  }
  return processRegistry;
}
