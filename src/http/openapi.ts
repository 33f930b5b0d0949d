/**
 * The OpenAPI 3.1 document of the HTTP API, written by hand from API.md (served at
 * `/docs/openapi.json`). Keep it in step with the route plugins: a route added there is
 * added here.
 */
import type { Json } from './openapi/builders.js';
import { paths } from './openapi/paths.js';
import { responses, schemas } from './openapi/schemas.js';

export type { Json };

/** The document's top level; `paths` typed so the docs page can list the routes. */
export interface OpenApiDocument {
  [key: string]: Json;
  paths: { [path: string]: { [method: string]: { [key: string]: Json } } };
}

/** The document. */
export const OPENAPI_DOCUMENT: OpenApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'Wheelhouse',
    version: '1',
    description: 'A distributed job scheduler: immediate, delayed, cron and dependent tasks, at least once.',
  },
  components: {
    schemas,
    responses,
    securitySchemes: {
      bearer: { type: 'http', scheme: 'bearer', description: 'Only when the node has an auth token.' },
    },
  },
  security: [{}, { bearer: [] }],
  paths,
};
