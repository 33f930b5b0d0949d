import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { OperationFilter, OperationRecord } from '../domain/operations.js';
import { WheelhouseError } from '../lib/errors.js';
import type { ApiKeysApi } from '../services/api-keys.js';
import type { OperationsApi } from '../services/types.js';
import { operationRoutes as schemas, type OperationJson } from './schemas/operation-routes.js';
import { operationRequest } from './validation/operations.js';

/**
 * Operations on many tasks (API.md, "POST /api/operations"): start one, read its progress, list
 * them, cancel one. The work itself runs in the background (src/services/operation-runner.ts).
 */
export interface OperationsRoutesOptions {
  api: OperationsApi;
  /** Whether keys are asked for: without, every request may do everything. */
  keys: Pick<ApiKeysApi, 'enabled'>;
}

export const operationsRoutes: FastifyPluginAsync<OperationsRoutesOptions> = async (fastify, opts) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { api } = opts;

  app.post('/api/operations', { schema: schemas.start }, async (request, reply) => {
    const { action, filter } = operationRequest(request.body);
    // The route opens to `submit` or `admin`; deleting tasks is for `admin` alone.
    if (action === 'delete' && opts.keys.enabled() && request.principal?.scopes.includes('admin') !== true) {
      throw new WheelhouseError('forbidden', 'Deleting tasks needs an API key with the admin scope.', {
        details: { scope: 'admin', scopes: ['admin'] },
      });
    }
    reply.code(202);
    return operationJson(await api.start(action, filter));
  });

  app.get('/api/operations/:operation_id', { schema: schemas.get }, async (request) =>
    operationJson(await api.get(request.params.operation_id.toLowerCase())),
  );

  app.get('/api/operations', { schema: schemas.list }, async (request) => {
    const q = request.query;
    const page = await api.list(
      q.limit ?? 50,
      q.next_token === undefined || q.next_token === '' ? undefined : q.next_token,
    );
    return { operations: page.operations.map(operationJson), next_token: page.nextToken };
  });

  app.delete('/api/operations/:operation_id', { schema: schemas.cancel }, async (request) =>
    operationJson(await api.cancel(request.params.operation_id.toLowerCase())),
  );
};

const iso = (ms: number): string => new Date(ms).toISOString();

export function operationJson(op: OperationRecord): OperationJson {
  return {
    operation_id: op.id,
    action: op.action,
    filter: filterJson(op.filter),
    state: op.state,
    matched: op.matched,
    done: op.done,
    failed: op.failed,
    error: op.error,
    started_at: iso(op.startedMs),
    finished_at: op.finishedMs === null ? null : iso(op.finishedMs),
  };
}

function filterJson(f: OperationFilter): OperationJson['filter'] {
  return {
    ...(f.status === undefined ? {} : { status: f.status }),
    ...(f.taskType === undefined ? {} : { task_type: f.taskType }),
    ...(f.createdAfterMs === undefined ? {} : { created_after: iso(f.createdAfterMs) }),
    ...(f.createdBeforeMs === undefined ? {} : { created_before: iso(f.createdBeforeMs) }),
    ...(f.dueAfterMs === undefined ? {} : { due_after: iso(f.dueAfterMs) }),
    ...(f.dueBeforeMs === undefined ? {} : { due_before: iso(f.dueBeforeMs) }),
    ...(f.limit === undefined ? {} : { limit: f.limit }),
    ...(f.errorContains === undefined ? {} : { error_contains: f.errorContains }),
    ...(f.errorEquals === undefined ? {} : { error_equals: f.errorEquals }),
    ...(f.parentId === undefined ? {} : { parent_id: f.parentId }),
  };
}
