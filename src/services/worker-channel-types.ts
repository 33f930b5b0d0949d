import type { ActorSystemApi } from '../runtime/actor.js';
import type { Clock } from '../runtime/clock.js';
import type { Dispatcher } from './dispatcher.js';
import type { ChannelSpawn } from './channel-spawn.js';
import type { ChildrenApi } from './types.js';
import type { WorkerService } from './worker-service.js';
import type { ChannelSocket, NodeFrame, WorkerSession } from './worker-session.js';

/** The worker channel's contract with the HTTP face and with the node that builds it (src/services/worker-channel.ts). */

/** What a worker says first. */
export interface ChannelHello {
  workerId: string;
  /** The API key that opened the socket; null while the node asks for none. */
  keyId: string | null;
  taskTypes: string[];
  credits: number;
  /** Leases it still holds from a previous socket. */
  resume: { taskId: string; leaseToken: string }[];
}

export interface WorkerChannelDeps {
  nodeId: string;
  workers: Pick<WorkerService, 'heartbeat' | 'complete' | 'progress' | 'release' | 'releaseHeld'>;
  dispatcher: Pick<Dispatcher, 'claimReadyFor' | 'onPush'>;
  system: ActorSystemApi;
  clock: Clock;
  /** How often a session pings its socket and announces itself to its actor, ms. */
  heartbeatMs: number;
  /** Where a `spawn` frame's children go: the service of `POST /api/tasks/{id}/children`. */
  children: Pick<ChildrenApi, 'spawnChildren'>;
  onError(error: unknown, context: string): void;
  /**
   * Told of claims handed back to their queues with their attempts uncounted, and why: rare
   * (a socket that closed or stopped reading as its tasks were claimed or written), and what a
   * task run twice with one attempt number traces back to. @default nothing
   */
  handedBack?(why: string, workerId: string, taskIds: readonly string[]): void;
}

/**
 * What this node's worker sockets hold in frames, as the HTTP face counts them (the bound on a
 * socket's memory, docs/security.md): the tests read it, and so can an operator's debugger.
 */
export interface FrameMeter {
  /** Bytes of frames read and not handled yet, over every socket. */
  queuedBytes: number;
  /** The most bytes of frames one socket held read and not handled yet. */
  peakQueuedBytes: number;
  /** The most bytes one socket had waiting to be written to its worker. */
  peakBufferedBytes: number;
  /** Sockets the node does not read now (too much waits on one side or the other). */
  paused: number;
}

/** What the HTTP face asks of the channel. */
export interface WorkerChannelApi {
  readonly heartbeatMs: number;
  /** The HTTP face counts its sockets' frames here. */
  readonly frames: FrameMeter;
  /** Verifies the resumed leases, sends `welcome`, and starts pushing tasks. */
  open(hello: ChannelHello, socket: ChannelSocket): Promise<WorkerSession>;
  /** `credit`: `n` more tasks may be sent. */
  credit(session: WorkerSession, n: number): void;
  /**
   * `spawn`: adds the children as `POST /api/tasks/{id}/children` does; answers the `spawned`
   * frame to send (with the error when none was added). Never rejects.
   */
  spawn(spawn: ChannelSpawn): Promise<NodeFrame>;
  /**
   * The socket closed. `handBack`: its worker closed it (or the node did for a reason that
   * ends the worker's hold, a revoked key or a newer socket), so the leases it still holds
   * without a result go back to their queues at once, their attempts not counted. Otherwise
   * (the connection was lost, the node shut down or refused a frame) they are left to be
   * resumed by the worker's next socket, or to run out.
   */
  closed(session: WorkerSession, handBack: boolean): void;
  /** Stops claiming; the HTTP face then closes the sockets. */
  stop(): void;
}
