import { Ajv, type ValidateFunction } from 'ajv';
import type { FastifyInstance } from 'fastify';
import { SHARED_SCHEMAS } from '../schemas/index.js';

/**
 * Holds every answer to its route's response schema: the check that the routes say what their
 * schemas (and so the OpenAPI document) promise. The serializer alone would not tell: it drops
 * members a schema does not name and coerces mistyped values. Off in production (it costs a
 * validation per answer); the test suite turns it on, so a handler that answers off-schema
 * fails the test that reached it with a 500 naming the route and the first difference.
 */
const ERROR_REF = { $ref: 'Error#' };

export function checkResponses(app: FastifyInstance): void {
  const ajv = new Ajv({
    strict: false,
    allErrors: false,
    discriminator: true,
    allowUnionTypes: true,
    formats: { uuid: true, 'date-time': true },
    schemas: SHARED_SCHEMAS.map((s) => ({ ...s })),
  });
  const compiled = new WeakMap<object, ValidateFunction>();
  app.addHook('preSerialization', async (request, reply, payload) => {
    const responses = (request.routeOptions.schema as { response?: Record<string, object> } | undefined)?.response;
    if (responses === undefined) return payload;
    const status = reply.statusCode;
    // An error the route does not list (any route can meet a 503 or a 500) still has the
    // catalogue's shape.
    const schema =
      responses[String(status)] ??
      responses[`${String(status)[0]}xx`] ??
      responses.default ??
      (status >= 400 ? ERROR_REF : undefined);
    if (schema === undefined) {
      throw new Error(
        `${request.method} ${request.routeOptions.url} answered ${status}, which its schema does not list`,
      );
    }
    let validate = compiled.get(schema);
    if (validate === undefined) {
      validate = ajv.compile(schema);
      compiled.set(schema, validate);
    }
    if (!validate(payload)) {
      const first = validate.errors?.[0];
      throw new Error(
        `${request.method} ${request.routeOptions.url} answered ${status} off its schema: ` +
          `${first?.instancePath || '(root)'} ${first?.message ?? ''} ${JSON.stringify(first?.params ?? {})}`,
      );
    }
    return payload;
  });
}
