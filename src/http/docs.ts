import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';

/**
 * The OpenAPI 3.1 document, generated from the route schemas by @fastify/swagger, and Swagger UI
 * on `/docs` to read it and try requests, served from the node (its files come with the
 * package: no CDN). The shared schemas (added by `useRouteSchemas`) become `components.schemas`
 * under their `$id`.
 */

export const DOCS_PREFIX = '/docs';

/** Registers the document's generator and the UI; call before the route plugins. */
export function registerDocs(app: FastifyInstance, version: string): void {
  void app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Wheelhouse',
        version,
        description:
          'A distributed job scheduler: immediate, delayed, cron and dependent tasks, handed to workers at least once. ' +
          'Errors answer `{"error": {"code", "message", "details"}}`; each error response lists its codes.',
        license: { name: 'MIT', identifier: 'MIT' },
      },
      tags: [
        { name: 'tasks', description: 'Submit, inspect, list and cancel tasks.' },
        { name: 'schedules', description: 'Pause and resume cron schedules.' },
        { name: 'dags', description: 'Graphs of dependent tasks, submitted whole.' },
        { name: 'limits', description: 'Flow control: concurrency and rate limits, pausing a task type.' },
        { name: 'workers', description: 'Long-poll, heartbeat and report results (workers in any language).' },
        { name: 'admin', description: 'The cluster, its actors and queues (operators).' },
        { name: 'operations', description: 'Health, readiness, metrics and this document.' },
      ],
      components: {
        securitySchemes: {
          bearer: {
            type: 'http',
            scheme: 'bearer',
            description:
              'An API key. Each route names the scopes that open it (submit, read, work, metrics, ops, admin; any ' +
              'one of those listed is enough). Needed once the ' +
              'node has an admin key or any key was made; a node without either asks for none.',
          },
        },
      },
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
  });
  void app.register(fastifySwaggerUi, {
    routePrefix: DOCS_PREFIX,
    staticCSP: true,
    uiConfig: { docExpansion: 'list', deepLinking: true, tryItOutEnabled: true, displayRequestDuration: true },
  });
}
