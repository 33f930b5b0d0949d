import type { WebSocket } from 'ws';
import { WheelhouseError, isWheelhouseError, type ErrorCode } from '../lib/errors.js';
import { CLOSE, type ChannelSocket, type NodeFrame, type WorkerChannelApi } from '../services/worker-channel.js';
import type { WorkerSession } from '../services/worker-session.js';
import { truncateUtf8 } from './validation/fields.js';
import { frameJson, frameText, readFrame, type FrameLimits, type ReadFrame } from './worker-channel-frames.js';

/**
 * One worker socket on the HTTP face: its frames read and handled one after the other, the
 * channel's frames written, and who closed it.
 *
 * Who closed it decides what becomes of the leases it still holds without a result. Its
 * worker (a close frame read from it, whatever the code), or the node because that ends the
 * worker's hold (its key was revoked, a newer socket of the worker took its place): they go
 * back to their queues at once, their attempts not counted, as a long-poll's claims do when its
 * client has gone. A connection lost without a close frame (a network drop, the pinger's
 * terminate), or closed by the node for another reason (shutdown, a frame it refused): they
 * are kept for the worker's next socket to resume, and otherwise run out.
 */

/** Who closed a socket: its worker (a close frame read from it), the node, or nobody (the connection was lost). */
export type ClosedBy = 'worker' | 'node' | 'lost';

export interface ConnectionOptions extends FrameLimits {
  api: WorkerChannelApi;
}

type Received = { frame: ReadFrame } | { error: unknown };

export class Connection {
  /** Who closed the socket, once one side has. */
  closedBy: ClosedBy | null = null;
  private session: WorkerSession | null = null;
  private opening = false;
  /** Frames from here on are not handled: an error frame was sent, or the node ends the socket. */
  private stopped = false;
  /** The leases still held go back to their queues when the socket is done. */
  private handBack = false;
  private finished = false;
  /** Frames are handled in order: each waits for the one before. */
  private chain: Promise<void> = Promise.resolve();
  /** The socket as the channel sees it. */
  private readonly channelSocket: ChannelSocket;

  constructor(
    private readonly socket: WebSocket,
    private readonly opts: ConnectionOptions,
  ) {
    this.channelSocket = {
      get open() {
        return socket.readyState === socket.OPEN;
      },
      send: (frame, unsent) => this.send(frame, unsent),
      // The channel closes a socket when a newer one of its worker takes its place, or after
      // `goodbye` once nothing is held: either way the worker's hold on what is left ends.
      close: (code, reason) => this.closeByNode(code, reason, true),
    };
    // ws answers a worker's close frame by calling the socket's own `close` (to echo it)
    // before the connection ends and 'close' is emitted, which can take a while (the worker
    // must read the echo and end the connection). That call, when the node did not start
    // the close, is when the worker closed: nothing more is claimed for the socket from then
    // on (it is no longer open), and what it held goes back once its earlier frames are handled.
    const close = socket.close.bind(socket);
    socket.close = (code?: number, data?: string | Buffer): void => {
      const received = (socket as unknown as { _closeFrameReceived?: boolean })._closeFrameReceived === true;
      if (this.closedBy === null && received) this.ended('worker', true);
      close(code, data);
    };
  }

  receive(data: unknown, isBinary: boolean): void {
    if (this.stopped || this.closedBy !== null) return;
    const read = this.read(data, isBinary);
    // Credit is taken as it arrives, not behind the frames before it: a worker sends its credit
    // with its results, and credit that waited for those results to be recorded would hold the
    // next claim back by a statement. Everything else is handled in order.
    if (this.session !== null && 'frame' in read && read.frame.type === 'credit') {
      this.opts.api.credit(this.session, read.frame.n);
      return;
    }
    this.chain = this.chain.then(() => this.handle(read)).catch((error: unknown) => this.refuse(error));
  }

  /** The socket's 'close': whoever had not said so closed it (a close frame from the worker, or none). */
  closed(code: number): void {
    if (this.closedBy === null) this.ended(code === 1006 ? 'lost' : 'worker', code !== 1006);
    this.afterFrames();
  }

  /** ws refused a frame (too large, not UTF-8, a protocol error): the node ends the socket. */
  errored(): void {
    if (this.closedBy === null) this.ended('node', false);
    this.socket.terminate();
  }

  /** The pinger: no pong since the last ping. */
  lost(): void {
    if (this.closedBy === null) this.ended('lost', false);
    this.socket.terminate();
  }

  /** The node shuts down: the worker resumes its leases on another node. */
  shutdown(): void {
    this.closeByNode(CLOSE.goingAway, 'node shutting down', false);
  }

  /** The frame held to its schema and limits, or why it is not one (said in its turn, by `handle`). */
  private read(data: unknown, isBinary: boolean): Received {
    if (isBinary) return { error: new WheelhouseError('validation_failed', 'frames are JSON text, not binary') };
    try {
      return { frame: readFrame(frameText(data), this.opts) };
    } catch (error) {
      return { error };
    }
  }

  private async handle(read: Received): Promise<void> {
    if (this.stopped || this.finished) return;
    if ('error' in read) throw read.error;
    const { frame } = read;
    const { api } = this.opts;
    if (frame.type === 'hello') {
      if (this.session !== null || this.opening)
        throw new WheelhouseError('validation_failed', 'hello was already said');
      this.opening = true;
      this.session = await api.open(frame.hello, this.channelSocket);
      return;
    }
    const session = this.session;
    if (session === null)
      throw new WheelhouseError('validation_failed', `the first frame must be hello, not ${frame.type}`);
    switch (frame.type) {
      case 'credit':
        api.credit(session, frame.n);
        return;
      case 'results':
        await session.results(frame.results);
        return;
      case 'progress':
        await session.progress(frame.updates);
        return;
      case 'goodbye':
        session.goodbye();
        return;
    }
  }

  /** A frame refused, or its handling failed: an error frame, and the socket is closed. */
  private refuse(error: unknown): void {
    this.stopped = true;
    if (isWheelhouseError(error) && error.status < 500) this.fail(error.code, error.message);
    else if (isWheelhouseError(error)) this.fail(error.code, error.message, CLOSE.tryAgainLater);
    else this.fail('internal', 'the node could not handle this frame', CLOSE.internal);
  }

  private send(frame: NodeFrame, unsent?: () => void): boolean {
    if (this.socket.readyState !== this.socket.OPEN) return false;
    const json = JSON.stringify(frameJson(frame));
    if (unsent === undefined) this.socket.send(json);
    else this.socket.send(json, (error) => error && unsent());
    return true;
  }

  /** Says why in an `error` frame, then closes; the leases are kept for a resume. */
  private fail(code: ErrorCode, message: string, closeCode: number = CLOSE.policy): void {
    if (this.closedBy === null) this.ended('node', false);
    refuseSocket(this.socket, code, message, closeCode);
  }

  private closeByNode(code: number, reason: string, handBack: boolean): void {
    if (this.closedBy === null) this.ended('node', handBack);
    this.socket.close(code, reason);
  }

  /** One side closed: the session ends once the frames read before are handled. */
  private ended(by: ClosedBy, handBack: boolean): void {
    this.closedBy = by;
    this.handBack = handBack;
    this.afterFrames();
  }

  private afterFrames(): void {
    this.chain = this.chain.then(() => {
      if (this.finished) return;
      this.finished = true;
      if (this.session !== null) this.opts.api.closed(this.session, this.handBack);
    });
  }
}

/** Says why in an `error` frame, then closes. */
export function refuseSocket(socket: WebSocket, code: ErrorCode, message: string, closeCode: number): void {
  if (socket.readyState !== socket.OPEN) return;
  socket.send(JSON.stringify({ type: 'error', error: { code, message } }));
  // A close reason is at most 123 bytes.
  socket.close(closeCode, truncateUtf8(code, 120));
}
