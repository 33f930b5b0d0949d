import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import {
  hostMatches,
  isLoopbackHost,
  parseDestinationPattern,
  parseIp,
  rangeContains,
} from '../lib/address-patterns.js';
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

/** What a route needs: nothing, the cluster secret, or a key with any of these scopes. */
type Needed = 'open' | 'cluster' | readonly Scope[];

interface SecuritySchema {
  security?: Record<string, string[]>[];
}

const ADMIN_ONLY: readonly Scope[] = ['admin'];
const READ: readonly Scope[] = ['read'];

/** What the route of `request` needs, from its schema. */
export function neededScope(request: FastifyRequest): Needed {
  const security = (request.routeOptions.schema as SecuritySchema | undefined)?.security;
  const url = request.routeOptions.url;
  if (security === undefined) {
    // No route matched (a 404 follows) or a route without a schema: Swagger UI's own files are
    // as open as /docs; anything else is closed.
    if (url === undefined) return isApiPath(request.url) ? READ : 'open';
    return url === '/docs' || url.startsWith('/docs/') ? 'open' : ADMIN_ONLY;
  }
  if (security.length === 0) return 'open';
  if (security.some((requirement) => 'cluster' in requirement)) return 'cluster';
  const scopes = security.flatMap((requirement) => (requirement.bearer ?? []) as Scope[]);
  return scopes.length === 0 ? ADMIN_ONLY : scopes;
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
    if (!needed.some((scope) => principal.scopes.includes(scope))) {
      const named = needed.length === 1 ? `the ${needed[0]} scope` : `one of the scopes ${needed.join(', ')}`;
      throw new WheelhouseError('forbidden', `This route needs an API key with ${named}.`, {
        details: { scope: needed[0], scopes: needed },
      });
    }
    request.principal = principal;
  };
}

/**
 * While the node asks for no key, the `Host` of every request must be one of its own names:
 * loopback (`localhost`, 127.0.0.0/8, `[::1]`, any port), its `host` and the host of its
 * advertised URL, or one `allowedHosts` names. A web page that rebinds its own name to
 * 127.0.0.1 (DNS rebinding) is then same-origin with the node but its requests carry that
 * name, and are refused: 403 `host_not_allowed`. With keys on, the key is the check, and a
 * browser's page cannot send one.
 */
export function hostCheck(
  keys: ApiKeysApi,
  own: readonly string[],
  allowed: readonly string[],
): onRequestAsyncHookHandler {
  const patterns = [...own, ...allowed].flatMap((entry) => parseDestinationPattern(entry) ?? []);
  const accepts = (host: string): boolean => {
    if (isLoopbackHost(host)) return true;
    const ip = parseIp(host);
    return patterns.some((p) =>
      p.kind === 'range' ? ip !== null && rangeContains(p.range, ip) : ip === null && hostMatches(p, host),
    );
  };
  return async (request) => {
    const header = request.headers.host;
    // No Host at all (HTTP/1.0) is no browser's request.
    if (header === undefined || keys.enabled()) return;
    const host = hostnameOf(header);
    if (host !== null && accepts(host)) return;
    const shown = header.length > 100 ? `${header.slice(0, 100)}…` : header;
    throw new WheelhouseError(
      'host_not_allowed',
      `This node asks for no API key, so it answers only requests to its own host names, not ${JSON.stringify(shown)}: ` +
        'add the name to allowedHosts (--allowed-hosts), or give the node an admin key (docs/security.md).',
      { details: { host: shown } },
    );
  };
}

/** The host name of a `Host` header without its port (`[::1]:7070` → `::1`), or null when it is not one. */
function hostnameOf(header: string): string | null {
  const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]\s]+))(?::\d{0,5})?$/.exec(header);
  return match === null ? null : (match[1] ?? match[2] ?? null);
}

/**
 * A WebSocket upgrade whose `Origin` names another site is refused before the upgrade: 403
 * `origin_not_allowed`. Browsers apply no CORS to WebSockets, so without this any page the
 * node's user opens could take tasks from a node that asks for no key (cross-site WebSocket
 * hijacking). Workers send no `Origin`; a page of the node itself (its `Host`) or of an origin
 * in `allowedOrigins` may.
 */
export function originCheck(allowedOrigins: readonly string[]): onRequestAsyncHookHandler {
  const allowed = new Set(allowedOrigins);
  return async (request) => {
    const origin = request.headers.origin;
    if (origin === undefined || !isUpgrade(request)) return;
    if (allowed.has(origin.toLowerCase()) || sameHost(origin, request.headers.host)) return;
    const shown = origin.length > 100 ? `${origin.slice(0, 100)}…` : origin;
    throw new WheelhouseError(
      'origin_not_allowed',
      `A page of ${JSON.stringify(shown)} may not open this node's WebSocket: add the origin to allowedOrigins ` +
        '(--allowed-origins) if it should.',
      { details: { origin: shown } },
    );
  };
}

/**
 * Whether `origin` (`https://host:port`) is of the host and port the request was sent to. A
 * `Host` without a port (behind a proxy, on the scheme's port) takes an origin without one.
 */
function sameHost(origin: string, host: string | undefined): boolean {
  const name = host === undefined ? null : hostnameOf(host);
  if (host === undefined || name === null) return false;
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  if (url.hostname.replace(/^\[|\]$/g, '').toLowerCase() !== name.toLowerCase()) return false;
  const port = /\]?:(\d+)$/.exec(host)?.[1];
  if (port === undefined) return url.port === '';
  return (url.port || (url.protocol === 'https:' ? '443' : '80')) === String(Number(port));
}

/** Whether `request` asks to become a WebSocket. */
export function isUpgrade(request: FastifyRequest): boolean {
  return /\bwebsocket\b/i.test(request.headers.upgrade ?? '');
}
