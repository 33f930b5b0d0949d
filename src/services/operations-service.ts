import type { OperationAction, OperationFilter, OperationRecord } from '../domain/operations.js';
import type { OperationsApi } from './types.js';
import { WheelhouseError } from '../lib/errors.js';
import { isUuid, uuidv7, uuidv7Floor } from '../lib/ids.js';
import type { Clock } from '../runtime/clock.js';
import type { OperationStore } from '../store/operation-types.js';
import { badToken, decodeToken, encodeToken } from './support.js';

export interface OperationsServiceDeps {
  operations: Pick<OperationStore, 'create' | 'get' | 'list' | 'cancel'>;
  clock: Clock;
  /** Told when an operation was started here: the runner looks for work at once. */
  started(): void;
}

/**
 * Operations on many tasks: the record of each (the `operations` table), read and ended here;
 * run by `OperationRunner` wherever the ring puts it. An operation looks at the tasks that
 * exist when it starts: the walk stops below the first id of the next millisecond.
 */
export class OperationsService implements OperationsApi {
  constructor(private readonly deps: OperationsServiceDeps) {}

  async start(action: OperationAction, filter: OperationFilter): Promise<OperationRecord> {
    const now = this.deps.clock.now();
    const record = await this.deps.operations.create({
      id: uuidv7(now),
      action,
      filter,
      walkBefore: uuidv7Floor(now + 1),
      startedMs: now,
    });
    this.deps.started();
    return record;
  }

  async get(operationId: string): Promise<OperationRecord> {
    const record = await this.deps.operations.get(operationId);
    if (record === null) throw notFound(operationId);
    return record;
  }

  async list(limit: number, nextToken?: string): ReturnType<OperationsApi['list']> {
    const beforeId = nextToken === undefined ? undefined : decodeToken(nextToken, 'next_token');
    if (beforeId !== undefined && !isUuid(beforeId)) throw badToken();
    const operations = await this.deps.operations.list(limit, beforeId);
    const last = operations[operations.length - 1];
    return { operations, nextToken: operations.length === limit && last ? encodeToken(last.id) : null };
  }

  async cancel(operationId: string): Promise<OperationRecord> {
    const record = await this.deps.operations.cancel(operationId, this.deps.clock.now());
    if (record === null) throw notFound(operationId);
    if (record.state !== 'cancelled') {
      throw new WheelhouseError('invalid_transition', `the operation has already ended: it is ${record.state}`, {
        details: { operation_id: operationId, state: record.state },
      });
    }
    return record;
  }
}

function notFound(operationId: string): WheelhouseError {
  return new WheelhouseError('not_found', 'No operation has this id.', { details: { operation_id: operationId } });
}
