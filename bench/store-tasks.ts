import { partitionOf, uuidv7 } from '../src/lib/ids.js';
import type { NewTask } from '../src/domain/model.js';

/**
 * A pending immediate task as the store takes it, for the scripts that measure the store
 * itself (no node): due at `dueMs`, priority 5, 64 partitions; override any field.
 */
export function pendingTask(taskType: string, dueMs: number, overrides: Partial<NewTask> = {}): NewTask {
  const id = overrides.id ?? uuidv7();
  return {
    id,
    taskType,
    payload: {},
    scheduleType: 'immediate',
    schedule: null,
    status: 'pending',
    dueMs,
    priority: 5,
    maxRetries: 3,
    timeoutSeconds: 30,
    partition: partitionOf(id, 64),
    idempotencyKey: null,
    requestHash: null,
    ...overrides,
  };
}
