/**
 * An in-memory `LimitStore` for the HTTP layer's unit tests: declarations in a map, and the
 * live tasks a test says there are (`inUseNames`, `countsOf`). The SQL store is tested through
 * its conformance suite and real nodes.
 */
import type { LimitDeclaration, LimitSpec } from '../../src/domain/limits.js';
import { familiesOf, isFamily } from '../../src/domain/limits.js';
import { systemClock } from '../../src/runtime/clock.js';
import { LimitsService } from '../../src/services/limits-service.js';
import type { LimitPage, LimitStore, LiveTasks } from '../../src/store/limit-types.js';

export class MemoryLimitStore implements LimitStore {
  readonly declared = new Map<string, LimitDeclaration>();
  /** Keys waiting tasks take part in (a family is in use when any of its keys is). */
  readonly inUseNames = new Set<string>();
  readonly counted = new Map<string, { running: number; waiting: number }>();
  private version = 0;

  async put(name: string, spec: LimitSpec, nowMs: number): Promise<LimitDeclaration> {
    const created = this.declared.get(name)?.createdMs ?? nowMs;
    const stored = { ...spec, name, createdMs: created, updatedMs: nowMs };
    this.declared.set(name, stored);
    this.version++;
    return { ...stored };
  }

  async get(name: string): Promise<LimitDeclaration | null> {
    const found = this.declared.get(name);
    return found === undefined ? null : { ...found };
  }

  async list(filter: { prefix?: string; after?: string; limit: number }): Promise<LimitPage> {
    const names = [...this.declared.keys()]
      .sort()
      .filter(
        (n) =>
          (filter.prefix === undefined || n.startsWith(filter.prefix)) &&
          (filter.after === undefined || n > filter.after),
      );
    const items = names.slice(0, filter.limit).map((n) => ({ ...(this.declared.get(n) as LimitDeclaration) }));
    const last = items.at(-1);
    return { items, next: names.length > filter.limit && last !== undefined ? last.name : null };
  }

  async remove(name: string): Promise<boolean> {
    this.version++;
    return this.declared.delete(name);
  }

  async catalog(sinceVersion: string | null): Promise<{ version: string; declarations: LimitDeclaration[] | null }> {
    const version = String(this.version);
    return { version, declarations: sinceVersion === version ? null : [...this.declared.values()] };
  }

  async inUse(name: string): Promise<boolean> {
    if (this.inUseNames.has(name)) return true;
    return isFamily(name) && [...this.inUseNames].some((key) => familiesOf(key).includes(name));
  }

  async liveTasks(): Promise<LiveTasks> {
    return { running: [], waiting: [], truncated: false };
  }

  async keysHeldOutside(): Promise<string[]> {
    return [];
  }

  async holdersMany(keys: readonly string[]): Promise<LiveTasks['running'][]> {
    return keys.map(() => []);
  }

  async waitingMany(keys: readonly string[]): Promise<Omit<LiveTasks, 'running'>[]> {
    return keys.map(() => ({ waiting: [], truncated: false }));
  }

  async stillRunning(): Promise<Set<string>> {
    return new Set();
  }

  async counts(key: string): Promise<{ running: number; waiting: number }> {
    return this.counted.get(key) ?? { running: 0, waiting: 0 };
  }
}

/** A service over a fresh memory store, with the forced catalog refreshes and the changes it made recorded. */
export function memoryLimits(): {
  service: LimitsService;
  store: MemoryLimitStore;
  refreshes: { count: number };
  changed: string[];
} {
  const store = new MemoryLimitStore();
  const refreshes = { count: 0 };
  const changed: string[] = [];
  const service = new LimitsService({
    store,
    clock: systemClock,
    catalog: {
      // Counted only when forced: a change made here must be read at once, not within the second.
      refresh: async (force?: boolean) => {
        if (force === true) refreshes.count++;
      },
    },
    onChanged: (name) => changed.push(name),
  });
  return { service, store, refreshes, changed };
}
