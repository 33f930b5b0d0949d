import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { WheelhouseError, isWheelhouseError } from '../lib/errors.js';

/**
 * The one place errors become HTTP answers. Every error answers with its catalogue status and
 * `{error: {code, message, details}}` (API.md). Fastify's own errors (body parsing, body
 * limit, content type, bad URLs) are translated to catalogue codes; anything unexpected is a
 * 500 `internal`, logged with its stack, and its message is not shown to the client.
 */

/** The body of every error answer. */
export interface ErrorBody {
  error: { code: string; message: string; details: Record<string, unknown> };
}

/** Translates any thrown value to a catalogue error. Unknown errors become `internal`. */
export function toWheelhouseError(error: unknown): WheelhouseError {
  if (isWheelhouseError(error)) return error;
  const fe = error as Partial<FastifyError> | null;
  const code = typeof fe?.code === 'string' ? fe.code : undefined;
  switch (code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new WheelhouseError('malformed_json', undefined, { cause: error });
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new WheelhouseError('payload_too_large', undefined, { cause: error });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new WheelhouseError('unsupported_media_type', undefined, { cause: error });
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new WheelhouseError('validation_failed', 'The body size does not match Content-Length.', { cause: error });
    case 'FST_ERR_BAD_URL':
      return new WheelhouseError('validation_failed', 'The URL is not validly percent-encoded.', { cause: error });
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return new WheelhouseError('validation_failed', 'A path parameter is too long.', { cause: error });
  }
  const status = typeof fe?.statusCode === 'number' ? fe.statusCode : undefined;
  if (status !== undefined && status >= 400 && status < 500) {
    // A client error fastify raised that has no case above (for instance from a body stream
    // that broke off): keep it a 4xx with a catalogue code.
    if (status === 404) return new WheelhouseError('not_found', undefined, { cause: error });
    if (status === 405) return new WheelhouseError('method_not_allowed', undefined, { cause: error });
    if (status === 413) return new WheelhouseError('payload_too_large', undefined, { cause: error });
    if (status === 415) return new WheelhouseError('unsupported_media_type', undefined, { cause: error });
    if (error instanceof SyntaxError) return new WheelhouseError('malformed_json', undefined, { cause: error });
    return new WheelhouseError('validation_failed', fe?.message || undefined, { cause: error });
  }
  return new WheelhouseError('internal', undefined, { cause: error });
}

/** The JSON body for a catalogue error. */
export function errorBody(error: WheelhouseError): ErrorBody {
  return { error: { code: error.code, message: error.message, details: error.details } };
}

/** Sends a catalogue error: its status, `Retry-After` on 429/503, `WWW-Authenticate` on 401. */
export function sendError(reply: FastifyReply, error: WheelhouseError): FastifyReply {
  reply.code(error.status);
  if (error.status === 429 || error.status === 503) {
    reply.header('retry-after', String(Math.max(1, Math.ceil(error.retryAfterSeconds ?? 1))));
  }
  if (error.status === 401) reply.header('www-authenticate', 'Bearer');
  return reply.type('application/json; charset=utf-8').send(errorBody(error));
}

/**
 * Fastify's error handler (also used for `frameworkErrors`). Logs 500s with their cause at
 * error level and other 5xx at warn (but not `not_ready`, which readiness probes hit during
 * every start); client errors are not logged (the request log has them).
 */
export const handleError = errorHandler();

/**
 * The error handler, given how to tell a 503 the node has already explained: while a store is
 * logged as lost (see `node/store-outages.ts`), the requests that fail because of it are
 * logged at debug — the outage is one line, not one warning per poll of every worker.
 */
export function errorHandler(
  explained: (error: unknown) => boolean = () => false,
): (error: unknown, request: FastifyRequest, reply: FastifyReply) => FastifyReply {
  return (error, request, reply) => {
    let mapped = toWheelhouseError(error);
    if (mapped.code === 'internal') {
      request.log.error({ err: error }, 'unexpected error answering a request');
      mapped = publicError(mapped, request.id);
    } else if (mapped.code === 'payload_too_large' && !('limit_bytes' in mapped.details)) {
      const limit = request.routeOptions.bodyLimit;
      mapped = new WheelhouseError(
        'payload_too_large',
        `The request body is larger than the limit of ${limit} bytes.`,
        {
          details: { ...mapped.details, limit_bytes: limit },
          cause: error,
        },
      );
    } else if (mapped.status >= 500) {
      if (mapped.code !== 'not_ready') {
        const fields = { err: error, code: mapped.code };
        if (explained(mapped)) request.log.debug(fields, 'request failed: service unavailable');
        else request.log.warn(fields, 'request failed: service unavailable');
      }
      mapped = publicError(mapped, request.id);
    }
    return sendError(reply, mapped);
  };
}

/**
 * A server-side error (5xx) as a client is told it, on HTTP and on the worker channel alike: an
 * `internal` error's message is hidden, a 503's is replaced (`unavailable`), and both carry the
 * request id that finds the log line. A client error is returned as it is.
 */
export function publicError(error: WheelhouseError, requestId: string): WheelhouseError {
  if (error.code === 'internal')
    return new WheelhouseError('internal', undefined, { details: { request_id: requestId }, cause: error });
  return error.status >= 500 ? unavailable(error, requestId) : error;
}

/**
 * A 503 as the client sees it: what is unavailable, not where. The message inside names hosts,
 * ports, node ids and actor keys (`Redis is unavailable (take): connect ECONNREFUSED
 * 10.0.0.7:6379`): that goes to the log, and the client gets the catalogue's sentence (the store
 * named, for `store_unavailable`), the request id to find the log line, and `Retry-After`.
 */
function unavailable(error: WheelhouseError, requestId: string): WheelhouseError {
  const store = /^redis/i.test(error.message) ? 'Redis' : /database|postgres/i.test(error.message) ? 'database' : null;
  const message =
    error.code === 'store_unavailable' && store !== null
      ? `The node cannot reach its ${store === 'Redis' ? 'Redis' : 'database'} right now.`
      : undefined;
  return new WheelhouseError(error.code, message, {
    details: { request_id: requestId },
    cause: error,
    ...(error.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: error.retryAfterSeconds }),
  });
}

/** The not-found handler: `404 route_not_found` naming the method and path. */
export function handleNotFound(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const path = request.url.split('?', 1)[0] ?? '';
  const shown = path.length > 200 ? `${path.slice(0, 200)}…` : path;
  return sendError(
    reply,
    new WheelhouseError('route_not_found', `No route ${request.method} ${shown}.`, {
      details: { method: request.method, path: shown },
    }),
  );
}
