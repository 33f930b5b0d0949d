/** Small builders the OpenAPI document's schemas and paths are written with. */

/** A JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
// `satisfies`, not a type annotation: the schemas spread these two and add a description.
export const time = { type: 'string', format: 'date-time', example: '2026-11-30T12:00:00.000Z' } satisfies Json;
export const nullableTime: Json = { type: ['string', 'null'], format: 'date-time' };
export const uuid = { type: 'string', format: 'uuid' } satisfies Json;
export const taskIdParam: Json = {
  name: 'id',
  in: 'path',
  required: true,
  schema: uuid,
  description: 'Task id (UUID).',
};

export const errors = (...statuses: number[]): Record<string, Json> =>
  Object.fromEntries(statuses.map((s) => [String(s), { $ref: `#/components/responses/E${s}` }] as const));

export const json = (schema: Json, description = 'OK'): Json => ({
  description,
  content: { 'application/json': { schema } },
});

export const body = (schema: Json): Json => ({ required: true, content: { 'application/json': { schema } } });

/** A task's status as the API shows it. */
export const taskStatus: Json = {
  type: 'string',
  enum: ['blocked', 'pending', 'ready', 'running', 'succeeded', 'failed', 'cancelled', 'active', 'paused'],
};

/** The error answers almost every route can give. */
export const common = [400, 401, 403, 413, 415, 429, 503];
