import WebSocket from 'ws';

import { UpgradeRefusedError } from './errors.js';

/**
 * Opening the worker channel's WebSocket to one node (`GET /api/workers/connect`), and telling
 * a node that refused the upgrade (with the HTTP status it answered: 404 means a node too old
 * to have the channel) from one that could not be reached at all.
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
