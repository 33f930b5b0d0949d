import type { TSchema } from 'typebox';
import { ErrorBody } from './common.js';
import { Execution, Schedule, Submitted, Task, TaskRequest } from './tasks.js';
import { Assignment } from './workers.js';
import { Limit } from './limits.js';

export * from './common.js';
export * from './tasks.js';
export * from './task-routes.js';
export * from './workers.js';
export * from './operations.js';
export * from './explain.js';
export * from './limits.js';

/**
 * The schemas routes refer to by name (`{$ref: 'Task#'}`): added to fastify (and so to its
 * serializers and to the OpenAPI document's `components.schemas`) and to the validating Ajv.
 */
export const SHARED_SCHEMAS: readonly (TSchema & { $id: string })[] = [
  { ...ErrorBody, $id: 'Error' },
  { ...Schedule, $id: 'Schedule' },
  { ...TaskRequest, $id: 'TaskRequest' },
  { ...Submitted, $id: 'Submitted' },
  { ...Task, $id: 'Task' },
  { ...Execution, $id: 'Execution' },
  { ...Assignment, $id: 'Assignment' },
  { ...Limit, $id: 'Limit' },
];
