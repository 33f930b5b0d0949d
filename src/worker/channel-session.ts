import type WebSocket from 'ws';

import { readNodeFrame, type NodeFrame, type WorkerFrame } from './channel-wire.js';
import { ProtocolError } from './wire.js';

/**
 * One socket of the worker channel, from `hello` to its close: it reads and checks the node's
 * frames and hands them to its owner (the channel worker), knows whether the node welcomed it,
 * and watches that the node is still there — from the welcome on it pings every `heartbeat_ms`
 * and terminates a socket on which nothing (frame, ping or pong) was heard for a whole period,
 * a node gone without closing. A frame the worker cannot read terminates the socket too; a
 * second welcome is reported and ignored.
 */

/** What a session tells the worker it belongs to. */
export interface SessionOwner {
  /** A frame the node sent on `session`, read and checked. */
  frame(session: ChannelSession, frame: NodeFrame): void;
  /** `session`'s socket closed (after its frames). */
  closed(session: ChannelSession): void;
  onError(error: unknown, context: string): void;
}

/** Ping period when the node's welcome names none, ms. */
const DEFAULT_HEARTBEAT_MS = 5_000;
const OPEN = 1; // WebSocket.OPEN, without a value import of the class here

export class ChannelSession {
  private welcomedByNode = false;
  /** Something came from the node since the last ping. */
  private heard = true;
  private pinger: NodeJS.Timeout | undefined;
  /** Resolves when the socket has closed, with whether the node welcomed it. */
  readonly ended: Promise<boolean>;

  constructor(
    private readonly ws: WebSocket,
    private readonly base: string,
    private readonly owner: SessionOwner,
  ) {
    ws.on('error', (error) => owner.onError(error, `channel to ${base}`));
    ws.on('ping', () => (this.heard = true));
    ws.on('pong', () => (this.heard = true));
    ws.on('message', (data: WebSocket.RawData) => this.receive(data));
    this.ended = new Promise((resolve) => {
      ws.on('close', () => {
        clearInterval(this.pinger);
        owner.closed(this);
        resolve(this.welcomedByNode);
      });
    });
  }

  /** The node has welcomed this socket. */
  get welcomed(): boolean {
    return this.welcomedByNode;
  }

  /** Welcomed and open: frames other than `hello` may go. */
  get ready(): boolean {
    return this.welcomedByNode && this.ws.readyState === OPEN;
  }

  send(frame: WorkerFrame): void {
    this.sendText(JSON.stringify(frame));
  }

  /** Sends a frame already written as JSON text. */
  sendText(text: string): void {
    // A send on a socket that is closing fails quietly here; its 'close' handles what was lost.
    if (this.ws.readyState === OPEN) this.ws.send(text, () => undefined);
  }

  /** Closes the socket and resolves once it has closed. */
  async close(code: number, reason: string): Promise<void> {
    this.ws.close(code, reason);
    await this.ended;
  }

  private receive(data: WebSocket.RawData): void {
    this.heard = true;
    let frame: NodeFrame | null;
    try {
      frame = readNodeFrame(text(data));
    } catch (error) {
      this.owner.onError(error, `channel to ${this.base}`);
      this.ws.terminate();
      return;
    }
    if (frame === null) return;
    if (frame.type === 'welcome') {
      if (this.welcomedByNode) {
        // A second watchdog would outlive the socket (only one is cleared at its close).
        this.owner.onError(
          new ProtocolError('the node welcomed this socket twice; ignored'),
          `channel to ${this.base}`,
        );
        return;
      }
      this.welcomedByNode = true;
      this.watch(frame.heartbeat_ms ?? DEFAULT_HEARTBEAT_MS);
    }
    this.owner.frame(this, frame);
  }

  /** No frame, ping or pong from the node for a whole period: it is gone without closing. */
  private watch(everyMs: number): void {
    this.pinger = setInterval(() => {
      if (!this.heard) return this.ws.terminate();
      this.heard = false;
      this.ws.ping();
    }, everyMs);
  }
}

/** A message's bytes as text (ws hands over a Buffer, or fragments). */
function text(data: WebSocket.RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}
