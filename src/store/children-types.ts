import type { StoredStatus, SubmitResult, TaskStatus } from '../domain/model.js';

/** What the task store says of children of a running task (src/store/sql/children.ts). */

/** Which children of a task a page lists (`GET /api/tasks/{id}/children`). */
export interface ChildrenFilter {
  /** A visible status: `ready` is pending and due, `pending` pending and not yet due. */
  status?: TaskStatus;
  limit: number;
  /** Exclusive: children after this id (the order they were spawned in). */
  afterId?: string;
  /** The page stops once its results and errors pass this many bytes (it keeps at least one). @default unbounded */
  maxBytes?: number;
}

/** One child as its parent's listing shows it. */
export interface ChildRecord {
  taskId: string;
  childKey: string | null;
  status: StoredStatus;
  dueMs: number;
  result: unknown;
  lastError: string | null;
}

/** One page of a task's children; `nextAfterId`: where the next starts, null at the end. */
export interface ChildPage {
  children: ChildRecord[];
  nextAfterId: string | null;
}

/** What a spawn did: the children (in request order), or why none was added. */
export type SpawnResult =
  { kind: 'spawned'; results: SubmitResult[] } | { kind: 'not_found' } | { kind: 'lease_not_held' };
