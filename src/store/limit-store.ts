import type { LimitDeclaration, LimitSpec } from '../domain/limits.js';
import type { Db } from './db.js';
import type { LimitPage, LimitStore, LiveTasks } from './limit-types.js';
import {
  getLimit,
  limitCatalog,
  limitCounts,
  limitInUse,
  listLimits,
  holdersMany,
  liveTasks,
  waitingMany,
  keysHeldOutside,
  putLimit,
  removeLimit,
  stillRunning,
} from './sql/limits.js';

/**
 * Flow control's store over SQL, on Postgres and PGlite alike; the statements are in
 * `sql/limits.ts`. Declarations and a key's live tasks go through the durable connection:
 * an actor that activates must see every claim committed before its ownership statement.
 */
export class SqlLimitStore implements LimitStore {
  constructor(
    private readonly db: Db,
    /** The priority lane: an activating key's read of its live tasks, which its first tasks wait on. */
    private readonly lane: Db = db,
  ) {}

  put(name: string, spec: LimitSpec, nowMs: number): Promise<LimitDeclaration> {
    return putLimit(this.db, name, spec, nowMs);
  }

  get(name: string): Promise<LimitDeclaration | null> {
    return getLimit(this.db, name);
  }

  list(filter: { prefix?: string; after?: string; limit: number }): Promise<LimitPage> {
    return listLimits(this.db, filter);
  }

  remove(name: string): Promise<boolean> {
    return removeLimit(this.db, name);
  }

  catalog(sinceVersion: string | null): Promise<{ version: string; declarations: LimitDeclaration[] | null }> {
    return limitCatalog(this.db, sinceVersion);
  }

  inUse(name: string): Promise<boolean> {
    return limitInUse(this.db, name);
  }

  liveTasks(key: string, nowMs: number, maxWaiting: number): Promise<LiveTasks> {
    return liveTasks(this.lane, key, nowMs, maxWaiting);
  }

  keysHeldOutside(live: readonly string[], max: number): Promise<string[]> {
    return keysHeldOutside(this.db, live, max);
  }

  holdersMany(keys: readonly string[]): Promise<LiveTasks['running'][]> {
    return holdersMany(this.lane, keys);
  }

  waitingMany(keys: readonly string[], nowMs: number, maxWaiting: number): Promise<Omit<LiveTasks, 'running'>[]> {
    return waitingMany(this.lane, keys, nowMs, maxWaiting);
  }

  stillRunning(taskIds: readonly string[]): Promise<Set<string>> {
    return stillRunning(this.db, taskIds);
  }

  counts(key: string, _nowMs: number): Promise<{ running: number; waiting: number }> {
    return limitCounts(this.db, key);
  }
}
