/**
 * Building tasks for task-store tests, on a fixed fake time line.
 */
import { uuidv7 } from '../../src/lib/ids.js';
import { pendingTask } from '../../bench/store-tasks.js';
import { canTransition } from '../../src/domain/lifecycle.js';
import { leaseTokenDigest } from '../../src/domain/lease-token.js';
import type { BackoffPolicy, NewTask, StoredStatus } from '../../src/domain/model.js';

/** The tests' "now": 2026-11-30T12:00:00Z. Stores take time as an argument, never the wall clock. */
export const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);

export const BACKOFF: BackoffPolicy = { baseMs: 1000, maxMs: 8000 };

let idMs = T0 - 3_600_000;

/** A UUID v7 one millisecond newer than the previous one, so creation order is id order. */
export function nextId(): string {
  return uuidv7(idMs++);
}

/** A pending, immediate task due at T0; override any field. */
export function makeTask(overrides: Partial<NewTask> = {}): NewTask {
  return pendingTask('test.task', T0, { id: overrides.id ?? nextId(), payload: { hello: 'world' }, ...overrides });
}

/** `n` tasks of one type, oldest first. */
export function makeTasks(n: number, overrides: Partial<NewTask> = {}): NewTask[] {
  return Array.from({ length: n }, () => makeTask(overrides));
}

/** A task type no other test uses, so listings and counts see only this test's tasks. */
export function uniqueType(label: string): string {
  return `test.${label}.${Math.random().toString(36).slice(2, 10)}`;
}

/** Throws unless `from → to` is an edge of the state machine (or no change). */
export function expectLegal(from: StoredStatus, to: StoredStatus): void {
  if (from !== to && !canTransition(from, to)) throw new Error(`illegal transition ${from} → ${to}`);
}

/** The digest a heartbeat or result carries for a lease token this version issued. */
export function tokenDigest(leaseToken: string): Buffer {
  const digest = leaseTokenDigest(leaseToken);
  if (digest === null) throw new Error(`not a lease token: ${leaseToken}`);
  return digest;
}
