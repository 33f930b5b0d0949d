import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { WheelhouseError } from '../lib/errors.js';
import type { ApiKeysApi, Principal, Scope } from '../services/api-keys.js';

/**
 * API keys on every route (docs/security.md). The scope a route needs is read from its schema's
 * `security` (`needs('read')` in src/http/schemas/), the same place the OpenAPI document shows
 * it: a route whose schema names no scope needs `admin`, so a route added without thought is
 * closed, not open. `OPEN` routes (health, readiness, the docs) need nothing; the node-to-node
 * routes have their own check (the cluster secret). While the node has no admin key and no key
 * was ever made (`wheelhouse dev` as it starts), nothing is asked.
 *
 * No key, or one this cluster does not know: 401 `unauthorized` (with `WWW-Authenticate`). A
 * known key without the route's scope: 403 `forbidden`. The key is kept on the request
 * (`request.principal`) for the routes that want to know who asks.
 */

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
  }
}

type Needed = Scope | 'open' | 'cluster';

interface SecuritySchema {
  security?: Record<string, string[]>[];
}

/** What the route of `request` needs, from its schema. */
export function neededScope(request: FastifyRequest): Needed {
  const security = (request.routeOptions.schema as SecuritySchema | undefined)?.security;
  const url = request.routeOptions.url;
  if (security === undefined) {
    // No route matched (a 404 follows) or a route without a schema: Swagger UI's own files are
    // as open as /docs; anything else is closed.
    if (url === undefined) return isApiPath(request.url) ? 'read' : 'open';
    return url === '/docs' || url.startsWith('/docs/') ? 'open' : 'admin';
  }
  if (security.length === 0) return 'open';
  const first = security[0] ?? {};
  if ('cluster' in first) return 'cluster';
  return (first.bearer?.[0] as Scope | undefined) ?? 'admin';
}

function isApiPath(url: string): boolean {
  const path = url.split('?', 1)[0] ?? '';
  return path === '/api' || path.startsWith('/api/') || path === '/admin' || path.startsWith('/admin/');
}

export function keyAuth(keys: ApiKeysApi): onRequestAsyncHookHandler {
  return async (request) => {
    if (!keys.enabled()) return;
    const needed = neededScope(request);
    if (needed === 'open' || needed === 'cluster') return;
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Bearer +(\S{1,512}) *$/i.exec(header) : null;
    if (!match?.[1]) throw new WheelhouseError('unauthorized', 'Send Authorization: Bearer <API key>.');
    const principal = await keys.authenticate(match[1]);
    if (principal === null) throw new WheelhouseError('unauthorized', 'The API key is not one this cluster knows.');
    if (!principal.scopes.includes(needed)) {
      throw new WheelhouseError('forbidden', `This route needs an API key with the ${needed} scope.`, {
        details: { scope: needed },
      });
    }
    request.principal = principal;
  };
}
