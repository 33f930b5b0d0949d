import type { Pool } from 'undici';
import { ERROR_CATALOGUE, WheelhouseError, type ErrorCode } from '../lib/errors.js';
import type { ActorInfo } from './actor.js';
import type { Clock } from './clock.js';
import type { TransportEnvelope } from './router.js';

/**
 * What nodes say to each other over HTTP: the routes, the envelope batches and their answers,
 * and the small one-off calls (refresh, inspect). Shared by the sending side
 * (`http-transport.ts`) and the receiving routes (`src/http/cluster-routes.ts`).
 */
/** The header that carries the cluster secret on every `/internal/*` request. */
export const CLUSTER_SECRET_HEADER = 'x-wheelhouse-cluster-secret';

/** The route one batch of envelopes is posted to. */
export const ACTORS_PATH = '/internal/actors';

/** The route a peer calls when it joins or leaves, so membership is re-read at once. */
export const REFRESH_PATH = '/internal/cluster/refresh';

/** One envelope on the wire: `deadline` is Unix ms. */
export interface WireEnvelope {
  kind: string;
  key: string;
  message: unknown;
  deadline: number;
  ask: boolean;
}

/**
 * Where a batch stands in its sender's stream to one node. `seq` counts the stream's batches
 * from 0; `since` is the lowest `seq` whose answer the sender still awaits, so every batch
 * below it has arrived or never will. The receiver uses both to hand envelopes to mailboxes
 * in the order they were sent although batches travel on several connections.
 */
export interface BatchOrder {
  stream: string;
  seq: number;
  since: number;
}

/** The body of `POST /internal/actors`. `order` is optional for the receiver. */
export interface ActorBatch {
  from: string;
  order?: BatchOrder;
  envelopes: WireEnvelope[];
}

/** The outcome of one envelope; the answer is `{results}` in envelope order. */
export type EnvelopeResult =
  | { ok: true; value?: unknown }
  | { ok: false; error: { code: string; message: string; details: Record<string, unknown> } };

/**
 * Asks the node at `address` to re-read membership now (a node calls it on its peers when it
 * joins or leaves). Resolves true once the peer has done so, false if it could not be reached
 * or refused: the peer's own membership loop catches up anyway.
 */
export async function notifyRefresh(address: string, secret: string | null, timeoutMs = 1_000): Promise<boolean> {
  try {
    const answer = await requestPeer(address, secret, 'POST', REFRESH_PATH, timeoutMs);
    return answer.status === 204 || answer.status === 200;
  } catch {
    return false; // Unreachable: the peer may be gone, which is what refresh would tell it.
  }
}

/**
 * GETs `path` of the peer at `address` with the cluster secret: its JSON body when it answers
 * 200. Anything else — no answer within `timeoutMs`, another status — rejects with `not_ready`
 * naming the peer, so a caller that fans out to every node can list the one that failed.
 */
export async function getFromPeer(
  address: string,
  secret: string | null,
  path: string,
  timeoutMs = 1_000,
): Promise<unknown> {
  let answer: PeerAnswer;
  try {
    answer = await requestPeer(address, secret, 'GET', path, timeoutMs);
  } catch (error) {
    throw new WheelhouseError('not_ready', `Node at ${address} did not answer GET ${path}: ${messageOf(error)}`, {
      cause: error,
    });
  }
  if (answer.status === 200) return answer.body;
  const remote = errorOf(answer.body);
  throw new WheelhouseError(
    'not_ready',
    `Node at ${address} answered GET ${path} with ${answer.status} ${remote.code}: ${remote.message}`,
  );
}

/**
 * One live actor on the node at `address`, with its state; null if that node does not hold it.
 * Rejects with `not_ready` if the node cannot be reached, `internal` if it refuses.
 */
export async function inspectRemote(
  address: string,
  secret: string | null,
  kind: string,
  key: string,
  timeoutMs = 1_000,
): Promise<ActorInfo | null> {
  const path = `${ACTORS_PATH}/${encodeURIComponent(kind)}/${encodeURIComponent(key)}`;
  let answer: PeerAnswer;
  try {
    answer = await requestPeer(address, secret, 'GET', path, timeoutMs);
  } catch (error) {
    throw new WheelhouseError('not_ready', `Node at ${address} did not answer GET ${path}: ${messageOf(error)}`, {
      cause: error,
    });
  }
  if (answer.status === 200) return answer.body as ActorInfo;
  const remote = errorOf(answer.body);
  if (answer.status === 404 && remote.code === 'not_found') return null;
  const secrets =
    answer.status === 401 || answer.status === 403 ? ' (the cluster secrets of the two nodes differ)' : '';
  throw new WheelhouseError(
    'internal',
    `Node at ${address} answered GET ${path} with ${answer.status} ${remote.code}: ${remote.message}${secrets}`,
  );
}

export interface PeerAnswer {
  status: number;
  /** The parsed JSON body; null when empty or not JSON. */
  body: unknown;
}

/** One request on `pool`, bounded by `timeoutMs` on `clock`. Any status resolves. */
export async function exchange(
  pool: Pool,
  clock: Clock,
  spec: {
    method: 'GET' | 'POST';
    path: string;
    headers: Record<string, string>;
    body: string | null;
    timeoutMs: number;
  },
): Promise<PeerAnswer> {
  const controller = new AbortController();
  const cancel = clock.setTimer(spec.timeoutMs, () =>
    controller.abort(new Error(`no answer within ${Math.round(spec.timeoutMs)} ms`)),
  );
  try {
    const response = await pool.request({
      method: spec.method,
      path: spec.path,
      headers: spec.headers,
      body: spec.body,
      signal: controller.signal,
    });
    return { status: response.statusCode, body: parseJson(await response.body.text()) };
  } finally {
    cancel();
  }
}

/**
 * A one-off request through undici's global keep-alive agent. undici is loaded by the first:
 * a node alone (`wheelhouse dev`) never asks a peer (decision 0047).
 */
async function requestPeer(
  address: string,
  secret: string | null,
  method: 'GET' | 'POST',
  path: string,
  timeoutMs: number,
): Promise<PeerAnswer> {
  const { request } = await import('undici');
  const response = await request(address.replace(/\/+$/, '') + path, {
    method,
    headers: secretHeaders(secret, {}),
    signal: AbortSignal.timeout(timeoutMs),
  });
  return { status: response.statusCode, body: parseJson(await response.body.text()) };
}

export function secretHeaders(secret: string | null, headers: Record<string, string>): Record<string, string> {
  return secret === null ? headers : { ...headers, [CLUSTER_SECRET_HEADER]: secret };
}

/** The JSON text of one envelope, or why it cannot travel. */
export function wireEnvelope(envelope: TransportEnvelope): string | WheelhouseError {
  const { kind, key, message, deadlineMs, ask } = envelope;
  if (typeof message !== 'object' || message === null || Array.isArray(message)) {
    return new WheelhouseError('internal', `${kind}/${key}: a message must be a JSON object to travel between nodes.`);
  }
  try {
    const wire: WireEnvelope = { kind, key, message, deadline: deadlineMs, ask };
    return JSON.stringify(wire);
  } catch (error) {
    return new WheelhouseError('internal', `${kind}/${key}: the message cannot be sent as JSON: ${messageOf(error)}`, {
      cause: error,
    });
  }
}

/** The `results` of a 200 answer, or null if they are not one well-formed result per envelope. */
export function resultsOf(body: unknown, count: number): EnvelopeResult[] | null {
  const results = (body as { results?: unknown } | null)?.results;
  if (!Array.isArray(results) || results.length !== count) return null;
  const wellFormed = results.every(
    (r: unknown) =>
      typeof r === 'object' &&
      r !== null &&
      ((r as { ok?: unknown }).ok === true ||
        ((r as { ok?: unknown }).ok === false &&
          typeof (r as { error?: { code?: unknown } }).error?.code === 'string')),
  );
  return wellFormed ? (results as EnvelopeResult[]) : null;
}

/** A catalogue error from a remote one; a code this node does not know becomes `internal`. */
export function remoteError(error: { code: string; message: unknown; details?: unknown }): WheelhouseError {
  const known = Object.hasOwn(ERROR_CATALOGUE, error.code);
  const details =
    typeof error.details === 'object' && error.details !== null ? (error.details as Record<string, unknown>) : {};
  return new WheelhouseError(
    known ? (error.code as ErrorCode) : 'internal',
    typeof error.message === 'string' ? error.message : undefined,
    { details: known ? details : { ...details, remoteCode: error.code } },
  );
}

/** The `{error: {code, message}}` of an error answer, empty strings where absent. */
export function errorOf(body: unknown): { code: string; message: string } {
  const error = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  return {
    code: typeof error?.code === 'string' ? error.code : '',
    message: typeof error?.message === 'string' ? error.message : '',
  };
}

export function parseJson(text: string): unknown {
  if (text.length === 0) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null; // Not JSON: the status alone tells what happened.
  }
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
