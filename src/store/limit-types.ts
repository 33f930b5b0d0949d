/**
 * The store of flow control (docs/decisions/0023-flow-control.md): what operators declare,
 * and what a key's actor reads when it activates. Nothing here is a counter: a key's running
 * tasks are the `running` rows that name it (its live leases), read back, never kept.
 * Implemented over SQL for Postgres and PGlite alike (`SqlLimitStore`).
 */
import type { DueEntry } from '../domain/model.js';
import type { LimitDeclaration, LimitSpec } from '../domain/limits.js';

/** A permit of one limit key granted to one task, under the epoch of the key's actor. */
export interface LimitGrantRow {
  taskId: string;
  key: string;
  epoch: number;
}

export interface LimitPage {
  items: LimitDeclaration[];
  /** The name to pass as `after` for the next page; null on the last. */
  next: string | null;
}

/** A key's live tasks, as its actor takes them over on activation. */
export interface LiveTasks {
  /** Tasks of the key holding a lease now (`running`): its permits. */
  running: { taskId: string; version: number; startedMs: number | null }[];
  /** Pending tasks of the key already due at `nowMs`, most urgent first (priority, due time). */
  waiting: DueEntry[];
  /** true when more were waiting than `maxWaiting` (the rest are read again later). */
  truncated: boolean;
}

export interface LimitStore {
  /** Declares or changes a limit (an exact key or a family); answers it as stored. */
  put(name: string, spec: LimitSpec, nowMs: number): Promise<LimitDeclaration>;
  get(name: string): Promise<LimitDeclaration | null>;
  /** Names in order, from after `after`, those starting with `prefix` (if given). */
  list(filter: { prefix?: string; after?: string; limit: number }): Promise<LimitPage>;
  /** Removes a declaration; false when there was none. */
  remove(name: string): Promise<boolean>;
  /**
   * Every declaration, for a node's catalog, with a version that changes whenever any
   * declaration does (so an unchanged catalog is not read again): pass the last version seen,
   * and `declarations` is null while it is still current.
   */
  catalog(sinceVersion: string | null): Promise<{ version: string; declarations: LimitDeclaration[] | null }>;
  /**
   * Whether tasks waiting to start (`pending`, `blocked`) take part in `name` — a key, or for a
   * family any of its keys (DELETE answers 409 `limit_in_use` then).
   */
  inUse(name: string): Promise<boolean>;
  /**
   * A key's live tasks: its running ones and up to `maxWaiting` of its pending ones due by
   * `nowMs`. A `type:<t>` key is every task of type `t`; any other key the tasks whose
   * `limits` name it.
   */
  liveTasks(key: string, nowMs: number, maxWaiting: number): Promise<LiveTasks>;
  /**
   * Keys whose actor was live on a node that is not in `live` (up to `max`): after a node
   * died, their tasks parked in its memory wait until the key activates again somewhere.
   */
  keysHeldOutside(live: readonly string[], max: number): Promise<string[]>;
  /** The holders (`running` of `liveTasks`) of many keys at once, in order: what an activation reads. */
  holdersMany(keys: readonly string[]): Promise<LiveTasks['running'][]>;
  /** The waiting tasks (`waiting` and `truncated` of `liveTasks`) of many keys at once, in order: what a key's `readMore` reads. */
  waitingMany(keys: readonly string[], nowMs: number, maxWaiting: number): Promise<Omit<LiveTasks, 'running'>[]>;
  /** Of these tasks, those still `running` (a key's reconcile of its holders). */
  stillRunning(taskIds: readonly string[]): Promise<Set<string>>;
  /** How many tasks of the key are pending (due or not) and running: for GET and metrics. */
  counts(key: string, nowMs: number): Promise<{ running: number; waiting: number }>;
}
