import type { FastifyBaseLogger } from 'fastify';
import type { WebSocket } from 'ws';
import { WheelhouseError, type ErrorCode } from '../lib/errors.js';
import { CLOSE, type ChannelSocket, type NodeFrame, type WorkerChannelApi } from '../services/worker-channel.js';
import type { WorkerSession } from '../services/worker-session.js';
import { publicError, toWheelhouseError } from './errors.js';
import { truncateUtf8 } from './validation/fields.js';
import {
  frameBytes,
  frameJson,
  frameText,
  readFrame,
  type FrameLimits,
  type ReadFrame,
} from './worker-channel-frames.js';

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
 *
 * What one socket can make the node hold is bounded (docs/security.md). Each frame is read as
 * it arrives, every limit checked then (a result over `maxResultBytes` is refused before
 * anything waits with it, and nothing after a refused frame is read), and waits its turn
 * behind the frame in hand. Once more than `PAUSE_FRAMES` frames, or more than `PAUSE_BYTES`
 * behind the one in hand, wait, the node stops reading the socket until they are handled: the
 * worker's own writes then wait in its TCP buffers, not in the node. What was already read
 * when it stopped is capped: past `MAX_QUEUED_FRAMES` frames, or twice the largest frame and
 * a little more in bytes, the socket is refused (1008, or 1009 for bytes). The other way,
 * once more than the largest frame waits to be written to the worker (it does not read its
 * acks or its tasks), nothing more is claimed for it and its frames are not read until it
 * catches up; a worker that reads nothing at all does not answer pings either, and the pinger
 * closes it. Stopping rather than closing: a worker that is merely slow carries on, and a
 * close would only make it reconnect and resume at once.
 */

/** Frames waiting behind the one in hand past which the node stops reading the socket. */
export const PAUSE_FRAMES = 16;
/** Bytes of frames waiting behind the one in hand past which the node stops reading the socket. */
export const PAUSE_BYTES = 1024 * 1024;
/** Frames read and not handled past which the socket is refused (only reachable by frames read before the pause took hold). */
export const MAX_QUEUED_FRAMES = 1_000;

/** Who closed a socket: its worker (a close frame read from it), the node, or nobody (the connection was lost). */
export type ClosedBy = 'worker' | 'node' | 'lost';

export interface ConnectionOptions extends FrameLimits {
  api: WorkerChannelApi;
  /** The API key that opened the socket; null while the node asks for none. */
  keyId: string | null;
  /** Largest frame a worker may send, bytes: the bounds on what waits are counted in these. */
  maxFrameBytes: number;
  /** A socket that has not said `hello` this long after it opened is closed, ms. */
  helloTimeoutMs: number;
  /** The upgrade request's id: what a worker is told of a server-side error names it, as an HTTP answer does. */
  requestId: string;
  /** The upgrade request's logger: server-side errors are logged here, as the HTTP path logs them. */
  log: FastifyBaseLogger;
  /** True when an error is a store outage the node has already logged (then it is logged at debug). */
  explained: (error: unknown) => boolean;
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
  /** A frame was refused as it was read: nothing after it is read. */
  private unread = false;
  /** Frames read and not yet handled (the one in hand included), and their bytes. */
  private queuedFrames = 0;
  private queuedBytes = 0;
  /** Reading is stopped: too much waits to be handled, or to be written. */
  private paused = false;
  /** The worker answered the last ping. */
  private answered = true;
  /** The socket as the channel sees it. */
  private readonly channelSocket: ChannelSocket;
  /** Called when a write is flushed (or failed): reading may go on. */
  private readonly flushed = (): void => this.flow();
  /** A `hello` was read. */
  private helloRead = false;
  private helloTimer: NodeJS.Timeout | null;

  constructor(
    private readonly socket: WebSocket,
    private readonly opts: ConnectionOptions,
  ) {
    const maxBuffered = opts.maxFrameBytes;
    this.channelSocket = {
      get open() {
        return socket.readyState === socket.OPEN;
      },
      get backlogged() {
        return socket.bufferedAmount > maxBuffered;
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
    // A socket that says nothing holds a slot of the node's budget: it has a few seconds to say hello.
    this.helloTimer = setTimeout(() => {
      this.helloTimer = null;
      if (this.helloRead || this.closedBy !== null) return;
      this.stopped = true;
      this.fail(
        'validation_failed',
        `the first frame must be hello, within ${opts.helloTimeoutMs / 1000} s of opening the socket (workerHelloTimeoutSeconds)`,
      );
    }, opts.helloTimeoutMs);
    this.helloTimer.unref();
  }

  receive(data: unknown, isBinary: boolean): void {
    if (this.stopped || this.unread || this.closedBy !== null) return;
    const bytes = frameBytes(data);
    const read = this.read(data, isBinary);
    if ('error' in read)
      this.unread = true; // said in its turn; nothing after it is read
    else if (read.frame.type === 'hello') this.helloRead = true;
    // Credit is taken as it arrives, not behind the frames before it: a worker sends its credit
    // with its results, and credit that waited for those results to be recorded would hold the
    // next claim back by a statement. Everything else is handled in order.
    if (this.session !== null && 'frame' in read && read.frame.type === 'credit') {
      this.opts.api.credit(this.session, read.frame.n);
      return;
    }
    if (!this.enqueue(bytes)) return;
    this.chain = this.chain
      .then(() => this.handle(read))
      .catch((error: unknown) => this.refuse(error))
      .finally(() => this.dequeue(bytes));
  }

  /** The pinger's turn: a socket that did not answer the last ping is lost, unless the node stopped reading it. */
  ping(): void {
    if (!this.answered && !this.waitingOnNode) return this.lost();
    this.answered = false;
    this.socket.ping();
  }

  pong(): void {
    this.answered = true;
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

  /**
   * The key that opened the socket was revoked: nothing more is read from it or pushed to it,
   * and what it holds goes back to its queues once the frame in hand is handled.
   */
  revoke(): void {
    if (this.closedBy !== null) return;
    this.stopped = true;
    this.ended('node', true);
    const keyless = this.opts.keyId === null;
    refuseSocket(
      this.socket,
      'unauthorized',
      keyless
        ? 'this node now asks for an API key, and this socket was opened without one'
        : 'the API key that opened this socket was revoked',
      CLOSE.policy,
      keyless ? 'key_required' : 'key_revoked',
    );
  }

  get keyId(): string | null {
    return this.opts.keyId;
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
      this.session = await api.open({ ...frame.hello, keyId: this.opts.keyId }, this.channelSocket);
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
      case 'spawn':
        this.send(await api.spawn(frame.spawn));
        return;
      case 'goodbye':
        session.goodbye();
        return;
    }
  }

  /** A frame refused, or its handling failed: an error frame, and the socket is closed. */
  private refuse(error: unknown): void {
    this.stopped = true;
    const shown = this.show(toWheelhouseError(error));
    const closeCode =
      shown.status < 500 ? CLOSE.policy : shown.code === 'internal' ? CLOSE.internal : CLOSE.tryAgainLater;
    this.fail(shown.code, shown.message, closeCode);
  }

  /**
   * A node-side error as the worker is told it: what an HTTP client would be told (src/http/
   * errors.ts: no hosts, ports or node ids; the request id), the error itself logged as the HTTP
   * path logs it.
   */
  private readonly show = (error: WheelhouseError): WheelhouseError => {
    if (error.code === 'internal')
      this.opts.log.error({ err: error.cause ?? error }, 'unexpected error on a worker socket');
    else if (error.status >= 500 && error.code !== 'not_ready') {
      const fields = { err: error, code: error.code };
      if (this.opts.explained(error)) this.opts.log.debug(fields, 'worker socket: service unavailable');
      else this.opts.log.warn(fields, 'worker socket: service unavailable');
    }
    return publicError(error, this.opts.requestId);
  };

  private send(frame: NodeFrame, unsent?: () => void): boolean {
    if (this.socket.readyState !== this.socket.OPEN) return false;
    const json = JSON.stringify(frameJson(frame, this.show));
    if (unsent === undefined) this.socket.send(json, this.flushed);
    else
      this.socket.send(json, (error) => {
        if (error) unsent();
        this.flow();
      });
    const meter = this.opts.api.frames;
    if (this.socket.bufferedAmount > meter.peakBufferedBytes) meter.peakBufferedBytes = this.socket.bufferedAmount;
    this.flow();
    return true;
  }

  /** Counts a frame in; false when that is more than a socket may hold (it is then refused). */
  private enqueue(bytes: number): boolean {
    this.queuedFrames++;
    this.queuedBytes += bytes;
    const meter = this.opts.api.frames;
    meter.queuedBytes += bytes;
    if (this.queuedBytes > meter.peakQueuedBytes) meter.peakQueuedBytes = this.queuedBytes;
    const maxBytes = 2 * this.opts.maxFrameBytes + 2 * PAUSE_BYTES;
    if (this.queuedBytes > maxBytes || this.queuedFrames > MAX_QUEUED_FRAMES) {
      const over = this.queuedFrames > MAX_QUEUED_FRAMES;
      this.dequeue(bytes);
      this.stopped = true;
      this.fail(
        'payload_too_large',
        over
          ? `more than ${MAX_QUEUED_FRAMES} frames wait to be handled on this socket: send the next when the last is answered`
          : `more than ${maxBytes} bytes of frames wait to be handled on this socket (twice workerFrameMaxBytes and 2 MiB)`,
        over ? CLOSE.policy : CLOSE.tooBig,
      );
      return false;
    }
    this.flow();
    return true;
  }

  private dequeue(bytes: number): void {
    this.queuedFrames--;
    this.queuedBytes -= bytes;
    this.opts.api.frames.queuedBytes -= bytes;
    this.flow();
  }

  /** Frames wait on the node: too many to read more. */
  private get waitingOnNode(): boolean {
    return this.queuedFrames > PAUSE_FRAMES || (this.queuedFrames > 1 && this.queuedBytes > PAUSE_BYTES);
  }

  /** Stops or goes on reading the socket, as what waits on either side says. */
  private flow(): void {
    const pause = this.waitingOnNode || this.channelSocket.backlogged;
    if (pause === this.paused || this.socket.readyState !== this.socket.OPEN) return;
    this.paused = pause;
    this.opts.api.frames.paused += pause ? 1 : -1;
    if (pause) this.socket.pause();
    else this.socket.resume();
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
    // Read again, so that the close handshake can finish; what is read from now on is dropped.
    if (this.paused) {
      this.paused = false;
      this.opts.api.frames.paused--;
      this.socket.resume();
    }
    this.afterFrames();
  }

  private afterFrames(): void {
    if (this.helloTimer !== null) clearTimeout(this.helloTimer);
    this.helloTimer = null;
    this.chain = this.chain.then(() => {
      if (this.finished) return;
      this.finished = true;
      if (this.session !== null) this.opts.api.closed(this.session, this.handBack);
    });
  }
}

/** Says why in an `error` frame, then closes (the reason: the code, unless told). */
export function refuseSocket(
  socket: WebSocket,
  code: ErrorCode,
  message: string,
  closeCode: number,
  reason: string = code,
): void {
  if (socket.readyState !== socket.OPEN) return;
  socket.send(JSON.stringify({ type: 'error', error: { code, message } }));
  // A close reason is at most 123 bytes.
  socket.close(closeCode, truncateUtf8(reason, 120));
}
