import WebSocket from 'ws';

import { backoffMs, sleep } from './backoff.js';
import { UpgradeRefusedError } from './errors.js';

/**
 * Connecting the worker channel: opening its WebSocket to one node (`GET /api/workers/connect`),
 * telling a node that refused the upgrade (with the HTTP status it answered: 404 means a node
 * too old to have the channel) from one that could not be reached at all, and keeping one
 * socket open while the worker runs — the next node of the list after each failure or lost
 * socket, with backoff.
 */

/** Longest wait for the node to answer the upgrade, ms. */
const HANDSHAKE_TIMEOUT_MS = 10_000;
/** Largest frame accepted from the node: a `tasks` frame of 1 000 tasks with 256 KiB payloads, and then some. */
const MAX_FRAME_BYTES = 512 * 1024 * 1024;

/** `http://host:port/prefix` → `ws://host:port/prefix/api/workers/connect` (https → wss). */
export function channelUrl(base: string): string {
  const url = new URL(base);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/api/workers/connect`;
  url.search = '';
  url.hash = '';
  return url.toString();
}

/** Opens the channel to the node at `base`; resolves once the socket is open. */
export function openChannel(base: string, token: string | undefined): Promise<WebSocket> {
  const url = channelUrl(base);
  return new Promise((resolve, reject) => {
    let refusedStatus: number | null = null;
    const socket = new WebSocket(url, {
      headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
      handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
      maxPayload: MAX_FRAME_BYTES,
      // Frames are small JSON and the node is usually near: compression would cost CPU on both sides.
      perMessageDeflate: false,
    });
    socket.once('unexpected-response', (_request, response) => {
      refusedStatus = response.statusCode ?? 0;
      response.resume();
      socket.terminate(); // emits 'error', then 'close'
    });
    socket.once('open', () => {
      socket.off('error', onError);
      resolve(socket);
    });
    const onError = (error: Error): void => {
      reject(refusedStatus === null ? error : new UpgradeRefusedError(url, refusedStatus));
    };
    socket.once('error', onError);
  });
}

export interface ConnectDeps {
  urls: readonly string[];
  token: string | undefined;
  /** Aborted when the worker stops: ends a backoff wait at once. */
  signal: AbortSignal;
  /** Whether the worker still wants a socket. */
  running(): boolean;
  /** Whether any node has welcomed this worker (then a 404 is a node's fault, not an old cluster). */
  everWelcomed(): boolean;
  /** Runs one open socket to its close; resolves with whether the node welcomed it. */
  session(ws: WebSocket, base: string): Promise<boolean>;
  /** Every node of the list answered the upgrade with 404 before any welcomed the worker. */
  fallBack(error: UpgradeRefusedError): void;
  onError(error: unknown, context: string): void;
}

/** Keeps a socket open to some node of `urls` while `running()`; resolves when the worker stops or falls back. */
export async function keepConnected(deps: ConnectDeps): Promise<void> {
  const { urls } = deps;
  let failures = 0;
  let next = 0;
  /** Nodes that answered the upgrade with 404; all of them, before any welcome: fall back to HTTP. */
  const without = new Set<string>();
  while (deps.running()) {
    const base = urls[next++ % urls.length]!;
    let ws: WebSocket;
    try {
      ws = await openChannel(base, deps.token);
    } catch (error) {
      if (!deps.running()) return;
      if (error instanceof UpgradeRefusedError && error.status === 404 && !deps.everWelcomed()) {
        without.add(base);
        if (without.size === urls.length) return deps.fallBack(error);
      }
      deps.onError(error, `connecting to ${base}`);
      await sleep(backoffMs(failures++), deps.signal);
      continue;
    }
    if (!deps.running()) {
      ws.close(1000, 'worker stopping');
      return;
    }
    if (await deps.session(ws, base)) failures = 0;
    if (!deps.running()) return;
    await sleep(backoffMs(failures++), deps.signal);
  }
}
